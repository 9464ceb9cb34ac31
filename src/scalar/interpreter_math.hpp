#pragma once
// What one instruction of a scalar program computes, written once for both interpreters: the host
// backend's (scalar/host_interpreter.cpp, which is also the compiler's constant folder) and the
// cuda kernel's (src/scalar/cuda/scalar_kernels.cu; nvcc compiles this file as host+device code).
// Running a program (registers, loads, the result's store) and launching it are each backend's own.
//
// The floating-point operations that round come from each backend's library, as a policy `M`:
//
//   M::c32, M::c64                   the complex types (std::complex, cuda::std::complex)
//   M::add sub mul div pow (a, b)    floating-point or complex operands: equal types, or a complex
//                                    type and its real type in either order
//   M::abs sqrt exp log sin cos tan (x)   floating-point or complex
//
// Everything else is exact and decided here, so both backends give the same bits for it: integer
// arithmetic, conversions, comparisons, min/max, negation, conj, real and imag.

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "sluice/detail/scalar_format.hpp"

#if defined(__CUDACC__)
#define SLUICE_SCALAR_HD __host__ __device__ __forceinline__
#else
#define SLUICE_SCALAR_HD inline
#endif

namespace sluice::scalar_math {

/// The operations of one operand (convert ... imag); the others but load and constant take two.
SLUICE_SCALAR_HD constexpr bool is_unary(ScalarOp op) {
  return op >= ScalarOp::convert && op <= ScalarOp::imag;
}

template <class T>
struct tag {
  using type = T;
};

// The types of the kinds are the integers, float, double and the complex types.
template <class T>
inline constexpr bool is_complex_v = !std::is_arithmetic_v<T>;

template <class T, bool = std::is_arithmetic_v<T>>
struct real_of {
  using type = T;
};
template <class T>
struct real_of<T, false> {
  using type = typename T::value_type;
};
template <class T>
using real_t = typename real_of<T>::type;

/// The operand pairs of binary instructions: equal types, or a complex type with its real type.
template <class A, class B>
inline constexpr bool pair_v = std::is_same_v<A, B> ||
                               (is_complex_v<A> && std::is_same_v<real_t<A>, B>) ||
                               (is_complex_v<B> && std::is_same_v<real_t<B>, A>);

/// Never complex to real, never floating-point to integer.
template <class From, class To>
inline constexpr bool convertible_v = !(is_complex_v<From> && !is_complex_v<To>)&&!(
    std::is_floating_point_v<From> && std::is_integral_v<To>);

template <class T>
SLUICE_SCALAR_HD T get(const ScalarValue& v) {
  T x;
  memcpy(&x, v.bytes, sizeof(T));
  return x;
}

template <class T>
SLUICE_SCALAR_HD ScalarValue put(const T& x) {
  ScalarValue v{};
  memcpy(v.bytes, &x, sizeof(T));
  return v;
}

SLUICE_SCALAR_HD ScalarValue boolean(bool b) {
  return put(static_cast<std::int32_t>(b));
}

/// f(tag<T>{}) for the type T of kind k.
template <class M, class F>
SLUICE_SCALAR_HD ScalarValue visit_kind(ScalarKind k, F&& f) {
  switch (k) {
    case ScalarKind::i32:
      return f(tag<std::int32_t>{});
    case ScalarKind::i64:
      return f(tag<std::int64_t>{});
    case ScalarKind::f32:
      return f(tag<float>{});
    case ScalarKind::f64:
      return f(tag<double>{});
    case ScalarKind::c32:
      return f(tag<typename M::c32>{});
    case ScalarKind::c64:
      return f(tag<typename M::c64>{});
  }
  return ScalarValue{};
}

template <class M, class From>
SLUICE_SCALAR_HD ScalarValue convert(ScalarKind to, const From& x) {
  return visit_kind<M>(to, [&](auto t) {
    using To = typename decltype(t)::type;
    if constexpr (!convertible_v<From, To>) {
      return ScalarValue{};
    } else if constexpr (is_complex_v<To>) {
      using R = real_t<To>;
      if constexpr (is_complex_v<From>) {
        return put(To(static_cast<R>(x.real()), static_cast<R>(x.imag())));
      } else {
        return put(To(static_cast<R>(x), R(0)));
      }
    } else {
      return put(static_cast<To>(x));  // integer narrowing wraps (C++20)
    }
  });
}

/// -x; an integer wraps (-MIN is MIN).
template <class T>
SLUICE_SCALAR_HD T negate(const T& x) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(U(0) - static_cast<U>(x));
  } else if constexpr (is_complex_v<T>) {
    return T(-x.real(), -x.imag());
  } else {
    return -x;
  }
}

// conj, real and imag: of a real value, x, x and 0.
template <class T>
SLUICE_SCALAR_HD T conjugate(const T& x) {
  if constexpr (is_complex_v<T>) {
    return T(x.real(), -x.imag());
  } else {
    return x;
  }
}
template <class T>
SLUICE_SCALAR_HD real_t<T> real_part(const T& x) {
  if constexpr (is_complex_v<T>) {
    return x.real();
  } else {
    return x;
  }
}
template <class T>
SLUICE_SCALAR_HD real_t<T> imag_part(const T& x) {
  if constexpr (is_complex_v<T>) {
    return x.imag();
  } else {
    return T(0);
  }
}

template <class M, class T>
SLUICE_SCALAR_HD ScalarValue unary(const ScalarInstr& in, const T& x) {
  switch (in.op) {
    case ScalarOp::convert:
      return convert<M>(in.kind, x);
    case ScalarOp::neg:
      return put(negate(x));
    case ScalarOp::conj:
      return put(conjugate(x));
    case ScalarOp::real:
      return put(real_part(x));
    case ScalarOp::imag:
      return put(imag_part(x));
    default:
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    return in.op == ScalarOp::abs ? put(x < 0 ? negate(x) : x) : ScalarValue{};
  } else {
    switch (in.op) {
      case ScalarOp::abs:
        return put(M::abs(x));  // of a complex value, its modulus
      case ScalarOp::sqrt:
        return put(M::sqrt(x));
      case ScalarOp::exp:
        return put(M::exp(x));
      case ScalarOp::log:
        return put(M::log(x));
      case ScalarOp::sin:
        return put(M::sin(x));
      case ScalarOp::cos:
        return put(M::cos(x));
      case ScalarOp::tan:
        return put(M::tan(x));
      default:
        return ScalarValue{};
    }
  }
}

/// a == b as std::complex compares: a complex value equals a real one whose imaginary part is 0.
template <class A, class B>
SLUICE_SCALAR_HD bool equal(const A& a, const B& b) {
  if constexpr (is_complex_v<A> && is_complex_v<B>) {
    return a.real() == b.real() && a.imag() == b.imag();
  } else if constexpr (is_complex_v<A>) {
    return a.real() == b && a.imag() == B(0);
  } else if constexpr (is_complex_v<B>) {
    return a == b.real() && b.imag() == A(0);
  } else {
    return a == b;
  }
}

/// Wrapping arithmetic; x / 0 is 0 and MIN / -1 is MIN.
template <class T>
SLUICE_SCALAR_HD ScalarValue integer_arithmetic(ScalarOp op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  const U ua = static_cast<U>(a), ub = static_cast<U>(b);
  switch (op) {
    case ScalarOp::add:
      return put(static_cast<T>(ua + ub));
    case ScalarOp::sub:
      return put(static_cast<T>(ua - ub));
    case ScalarOp::mul:
      return put(static_cast<T>(ua * ub));
    case ScalarOp::div:
      if (b == 0) return put(T(0));
      if (b == T(-1)) return put(negate(a));  // wraps for MIN / -1
      return put(static_cast<T>(a / b));
    default:
      return ScalarValue{};
  }
}

// A and B form a pair_v.
template <class M, class A, class B>
SLUICE_SCALAR_HD ScalarValue binary(ScalarOp op, const A& a, const B& b) {
  switch (op) {
    case ScalarOp::eq:
      return boolean(equal(a, b));
    case ScalarOp::ne:
      return boolean(!equal(a, b));
    default:
      break;
  }
  if constexpr (!is_complex_v<A> && !is_complex_v<B>) {  // then A and B are one type
    switch (op) {
      case ScalarOp::lt:
        return boolean(a < b);
      case ScalarOp::le:
        return boolean(a <= b);
      case ScalarOp::gt:
        return boolean(a > b);
      case ScalarOp::ge:
        return boolean(a >= b);
      case ScalarOp::min:
        return put(b < a ? b : a);
      case ScalarOp::max:
        return put(a < b ? b : a);
      default:
        break;
    }
  }
  if constexpr (std::is_integral_v<A>) {
    return integer_arithmetic(op, a, b);
  } else {
    switch (op) {
      case ScalarOp::add:
        return put(M::add(a, b));
      case ScalarOp::sub:
        return put(M::sub(a, b));
      case ScalarOp::mul:
        return put(M::mul(a, b));
      case ScalarOp::div:
        return put(M::div(a, b));
      case ScalarOp::pow:
        return put(M::pow(a, b));
      default:
        return ScalarValue{};
    }
  }
}

/// The result of instruction `in` applied to operand values `a` and `b` (`b` is ignored by unary
/// operations). Load and constant read no operands: they give a zero value, as does an operand
/// kind or pair the compiler never emits.
template <class M>
SLUICE_SCALAR_HD ScalarValue apply(const ScalarInstr& in, const ScalarValue& a,
                                   const ScalarValue& b) {
  if (is_unary(in.op)) {
    return visit_kind<M>(in.ka, [&](auto ta) {
      using A = typename decltype(ta)::type;
      return unary<M>(in, get<A>(a));
    });
  }
  return visit_kind<M>(in.ka, [&](auto ta) {
    using A = typename decltype(ta)::type;
    return visit_kind<M>(in.kb, [&](auto tb) {
      using B = typename decltype(tb)::type;
      if constexpr (pair_v<A, B>) {
        return binary<M>(in.op, get<A>(a), get<B>(b));
      } else {
        return ScalarValue{};
      }
    });
  });
}

}  // namespace sluice::scalar_math
