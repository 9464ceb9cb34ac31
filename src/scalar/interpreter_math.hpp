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

#include "sluice/ext/scalar_kernels.hpp"

#if defined(__CUDACC__)
#define SLUICE_SCALAR_HD __host__ __device__ __forceinline__
#else
#define SLUICE_SCALAR_HD inline
#endif

namespace sluice::detail::scalar_math {

/// The operations of one operand; the others but load and constant take two.
SLUICE_SCALAR_HD constexpr bool is_unary(ScalarOp op) {
  switch (op) {
    case ScalarOp::convert:
    case ScalarOp::neg:
    case ScalarOp::abs:
    case ScalarOp::sqrt:
    case ScalarOp::exp:
    case ScalarOp::log:
    case ScalarOp::sin:
    case ScalarOp::cos:
    case ScalarOp::tan:
    case ScalarOp::conj:
    case ScalarOp::real:
    case ScalarOp::imag:
      return true;
    case ScalarOp::load:
    case ScalarOp::constant:
    case ScalarOp::add:
    case ScalarOp::sub:
    case ScalarOp::mul:
    case ScalarOp::div:
    case ScalarOp::pow:
    case ScalarOp::min:
    case ScalarOp::max:
    case ScalarOp::eq:
    case ScalarOp::ne:
    case ScalarOp::lt:
    case ScalarOp::le:
    case ScalarOp::gt:
    case ScalarOp::ge:
      return false;
  }
  return false;
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

// The switches below name every operation, so that a new one fails to compile (-Wswitch) until
// each interpreter says what it computes. What an operation does not define for its operand
// types is a zero value (the builder never emits it).

template <class M, class T>
SLUICE_SCALAR_HD ScalarValue unary(const ScalarInstr& in, const T& x) {
  constexpr bool integral = std::is_integral_v<T>;
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
    case ScalarOp::abs:  // of a complex value, its modulus
      if constexpr (integral) {
        return put(x < 0 ? negate(x) : x);
      } else {
        return put(M::abs(x));
      }
    case ScalarOp::sqrt:
      if constexpr (integral) {
        break;
      } else {
        return put(M::sqrt(x));
      }
    case ScalarOp::exp:
      if constexpr (integral) {
        break;
      } else {
        return put(M::exp(x));
      }
    case ScalarOp::log:
      if constexpr (integral) {
        break;
      } else {
        return put(M::log(x));
      }
    case ScalarOp::sin:
      if constexpr (integral) {
        break;
      } else {
        return put(M::sin(x));
      }
    case ScalarOp::cos:
      if constexpr (integral) {
        break;
      } else {
        return put(M::cos(x));
      }
    case ScalarOp::tan:
      if constexpr (integral) {
        break;
      } else {
        return put(M::tan(x));
      }
    case ScalarOp::load:  // not unary
    case ScalarOp::constant:
    case ScalarOp::add:
    case ScalarOp::sub:
    case ScalarOp::mul:
    case ScalarOp::div:
    case ScalarOp::pow:
    case ScalarOp::min:
    case ScalarOp::max:
    case ScalarOp::eq:
    case ScalarOp::ne:
    case ScalarOp::lt:
    case ScalarOp::le:
    case ScalarOp::gt:
    case ScalarOp::ge:
      break;
  }
  return ScalarValue{};
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

/// The unsigned type of an integer, whose arithmetic wraps.
template <class T>
SLUICE_SCALAR_HD std::make_unsigned_t<T> wrapping(T x) {
  return static_cast<std::make_unsigned_t<T>>(x);
}

/// Integer division: x / 0 is 0 and MIN / -1 is MIN.
template <class T>
SLUICE_SCALAR_HD T integer_divide(T a, T b) {
  if (b == 0) return T(0);
  if (b == T(-1)) return negate(a);  // wraps for MIN / -1
  return static_cast<T>(a / b);
}

// A and B form a pair_v; when neither is complex they are one type.
template <class M, class A, class B>
SLUICE_SCALAR_HD ScalarValue binary(ScalarOp op, const A& a, const B& b) {
  constexpr bool integral = std::is_integral_v<A>;
  constexpr bool ordered = !is_complex_v<A> && !is_complex_v<B>;
  switch (op) {
    case ScalarOp::eq:
      return boolean(equal(a, b));
    case ScalarOp::ne:
      return boolean(!equal(a, b));
    case ScalarOp::lt:
      if constexpr (ordered) {
        return boolean(a < b);
      } else {
        break;
      }
    case ScalarOp::le:
      if constexpr (ordered) {
        return boolean(a <= b);
      } else {
        break;
      }
    case ScalarOp::gt:
      if constexpr (ordered) {
        return boolean(a > b);
      } else {
        break;
      }
    case ScalarOp::ge:
      if constexpr (ordered) {
        return boolean(a >= b);
      } else {
        break;
      }
    case ScalarOp::min:
      if constexpr (ordered) {
        return put(b < a ? b : a);
      } else {
        break;
      }
    case ScalarOp::max:
      if constexpr (ordered) {
        return put(a < b ? b : a);
      } else {
        break;
      }
    case ScalarOp::add:
      if constexpr (integral) {
        return put(static_cast<A>(wrapping(a) + wrapping(b)));
      } else {
        return put(M::add(a, b));
      }
    case ScalarOp::sub:
      if constexpr (integral) {
        return put(static_cast<A>(wrapping(a) - wrapping(b)));
      } else {
        return put(M::sub(a, b));
      }
    case ScalarOp::mul:
      if constexpr (integral) {
        return put(static_cast<A>(wrapping(a) * wrapping(b)));
      } else {
        return put(M::mul(a, b));
      }
    case ScalarOp::div:
      if constexpr (integral) {
        return put(integer_divide(a, b));
      } else {
        return put(M::div(a, b));
      }
    case ScalarOp::pow:
      if constexpr (integral) {
        break;
      } else {
        return put(M::pow(a, b));
      }
    case ScalarOp::load:  // not binary
    case ScalarOp::constant:
    case ScalarOp::convert:
    case ScalarOp::neg:
    case ScalarOp::abs:
    case ScalarOp::sqrt:
    case ScalarOp::exp:
    case ScalarOp::log:
    case ScalarOp::sin:
    case ScalarOp::cos:
    case ScalarOp::tan:
    case ScalarOp::conj:
    case ScalarOp::real:
    case ScalarOp::imag:
      break;
  }
  return ScalarValue{};
}

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

}  // namespace sluice::detail::scalar_math
