#include "scalar/host_interpreter.hpp"

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <type_traits>

namespace sluice::detail {
namespace {

template <class T>
struct is_complex : std::false_type {};
template <class R>
struct is_complex<std::complex<R>> : std::true_type {};
template <class T>
constexpr bool is_complex_v = is_complex<T>::value;

template <class T>
T get(const ScalarValue& v) noexcept {
  T x;
  std::memcpy(&x, v.bytes, sizeof(T));
  return x;
}

template <class T>
ScalarValue put(const T& x) noexcept {
  ScalarValue v{};
  std::memcpy(v.bytes, &x, sizeof(T));
  return v;
}

ScalarValue boolean(bool b) noexcept {
  return put(static_cast<std::int32_t>(b));
}

template <class F>
ScalarValue visit_kind(ScalarKind k, F&& f) {
  switch (k) {
    case ScalarKind::i32:
      return f(std::type_identity<std::int32_t>{});
    case ScalarKind::i64:
      return f(std::type_identity<std::int64_t>{});
    case ScalarKind::f32:
      return f(std::type_identity<float>{});
    case ScalarKind::f64:
      return f(std::type_identity<double>{});
    case ScalarKind::c32:
      return f(std::type_identity<std::complex<float>>{});
    case ScalarKind::c64:
      return f(std::type_identity<std::complex<double>>{});
  }
  return ScalarValue{};
}

template <class From, class To>
constexpr bool convertible_v = !(is_complex_v<From> && !is_complex_v<To>)&&!(
    std::is_floating_point_v<From> && std::is_integral_v<To>);

template <class From>
ScalarValue convert(ScalarKind to, const From& x) {
  return visit_kind(to, [&]<class To>(std::type_identity<To>) {
    if constexpr (!convertible_v<From, To>) {
      return ScalarValue{};
    } else if constexpr (is_complex_v<To>) {
      using R = typename To::value_type;
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

template <class T>
ScalarValue unary(const ScalarInstr& in, const T& x) {
  if (in.op == ScalarOp::convert) return convert(in.kind, x);
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (in.op) {
      case ScalarOp::neg:
        return put(static_cast<T>(U(0) - static_cast<U>(x)));
      case ScalarOp::abs:
        return put(x < 0 ? static_cast<T>(U(0) - static_cast<U>(x)) : x);
      case ScalarOp::conj:
      case ScalarOp::real:
        return put(x);
      case ScalarOp::imag:
        return put(T(0));
      default:
        return ScalarValue{};
    }
  } else if constexpr (is_complex_v<T>) {
    switch (in.op) {
      case ScalarOp::neg:
        return put(-x);
      case ScalarOp::abs:
        return put(std::abs(x));
      case ScalarOp::sqrt:
        return put(std::sqrt(x));
      case ScalarOp::exp:
        return put(std::exp(x));
      case ScalarOp::log:
        return put(std::log(x));
      case ScalarOp::sin:
        return put(std::sin(x));
      case ScalarOp::cos:
        return put(std::cos(x));
      case ScalarOp::tan:
        return put(std::tan(x));
      case ScalarOp::conj:
        return put(std::conj(x));
      case ScalarOp::real:
        return put(x.real());
      case ScalarOp::imag:
        return put(x.imag());
      default:
        return ScalarValue{};
    }
  } else {
    switch (in.op) {
      case ScalarOp::neg:
        return put(-x);
      case ScalarOp::abs:
        return put(std::abs(x));
      case ScalarOp::sqrt:
        return put(std::sqrt(x));
      case ScalarOp::exp:
        return put(std::exp(x));
      case ScalarOp::log:
        return put(std::log(x));
      case ScalarOp::sin:
        return put(std::sin(x));
      case ScalarOp::cos:
        return put(std::cos(x));
      case ScalarOp::tan:
        return put(std::tan(x));
      case ScalarOp::conj:
      case ScalarOp::real:
        return put(x);
      case ScalarOp::imag:
        return put(T(0));
      default:
        return ScalarValue{};
    }
  }
}

template <class T>
ScalarValue integer_binary(ScalarOp op, T a, T b) {
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
      if (a == std::numeric_limits<T>::min() && b == -1) return put(a);
      return put(static_cast<T>(a / b));
    case ScalarOp::min:
      return put(b < a ? b : a);
    case ScalarOp::max:
      return put(a < b ? b : a);
    default:
      return ScalarValue{};
  }
}

// A and B are equal, or a complex type and its real type in either order.
template <class A, class B>
ScalarValue binary(ScalarOp op, const A& a, const B& b) {
  switch (op) {
    case ScalarOp::eq:
      return boolean(a == b);
    case ScalarOp::ne:
      return boolean(a != b);
    default:
      break;
  }
  if constexpr (!is_complex_v<A> && !is_complex_v<B>) {
    switch (op) {
      case ScalarOp::lt:
        return boolean(a < b);
      case ScalarOp::le:
        return boolean(a <= b);
      case ScalarOp::gt:
        return boolean(a > b);
      case ScalarOp::ge:
        return boolean(a >= b);
      default:
        break;
    }
  }
  if constexpr (std::is_integral_v<A>) {
    return integer_binary(op, a, b);
  } else {
    switch (op) {
      case ScalarOp::add:
        return put(a + b);
      case ScalarOp::sub:
        return put(a - b);
      case ScalarOp::mul:
        return put(a * b);
      case ScalarOp::div:
        return put(a / b);
      case ScalarOp::pow:
        return put(std::pow(a, b));
      default:
        break;
    }
    if constexpr (!is_complex_v<A> && !is_complex_v<B>) {
      switch (op) {
        case ScalarOp::min:
          return put(b < a ? b : a);
        case ScalarOp::max:
          return put(a < b ? b : a);
        default:
          break;
      }
    }
    return ScalarValue{};
  }
}

template <class T>
struct real_of {
  using type = T;
};
template <class R>
struct real_of<std::complex<R>> {
  using type = R;
};

template <class A, class B>
constexpr bool pair_v = std::is_same_v<A, B> ||
                        (is_complex_v<A> && std::is_same_v<typename real_of<A>::type, B>) ||
                        (is_complex_v<B> && std::is_same_v<typename real_of<B>::type, A>);

}  // namespace

ScalarValue scalar_apply(const ScalarInstr& in, const ScalarValue& a,
                         const ScalarValue& b) noexcept {
  switch (in.op) {
    case ScalarOp::load:
    case ScalarOp::constant:
      return ScalarValue{};
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
      return visit_kind(in.ka,
                        [&]<class A>(std::type_identity<A>) { return unary(in, get<A>(a)); });
    default:
      return visit_kind(in.ka, [&]<class A>(std::type_identity<A>) {
        return visit_kind(in.kb, [&]<class B>(std::type_identity<B>) {
          if constexpr (pair_v<A, B>) {
            return binary(in.op, get<A>(a), get<B>(b));
          } else {
            return ScalarValue{};
          }
        });
      });
  }
}

void scalar_interpret(const ScalarInstr* code, std::uint32_t size, const ScalarValue* constants,
                      void* const* inputs, void* output) noexcept {
  ScalarValue regs[kScalarMaxInstructions];
  for (std::uint32_t i = 0; i < size; ++i) {
    const ScalarInstr& in = code[i];
    switch (in.op) {
      case ScalarOp::load:
        regs[i] = ScalarValue{};
        std::memcpy(regs[i].bytes, inputs[in.a], scalar_kind_size(in.kind));
        break;
      case ScalarOp::constant:
        regs[i] = constants[in.a];
        break;
      default:
        regs[i] = scalar_apply(in, regs[in.a], regs[in.b]);
        break;
    }
  }
  if (size > 0) std::memcpy(output, regs[size - 1].bytes, scalar_kind_size(code[size - 1].kind));
}

}  // namespace sluice::detail
