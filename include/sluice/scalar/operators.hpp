#pragma once
/// @file
/// What builds scalar expressions (sluice/scalar.hpp): host constants, conversions, arithmetic,
/// comparisons and the math functions.

#include <cstdint>
#include <type_traits>

#include "sluice/scalar/expression.hpp"

namespace sluice {

/// A host value as an expression (useful to start an expression from constants).
template <class C>
requires detail::is_host_constant_v<C>
[[nodiscard]] auto constant(const C& value) {
  using T = typename decltype(detail::canonical_constant_type<C>())::type;
  return Expr<detail::ConstNode<T>>({static_cast<T>(value)});
}

/// `e` converted to U. Converting complex to real (use real/imag/abs) or floating-point to
/// integer is not supported.
template <class U, class E>
requires detail::is_expr_v<E>
[[nodiscard]] auto cast(const E& e) {
  using T = detail::value_t<E>;
  static_assert(is_managed_type_v<U>,
                "sluice::cast<U>: U must be float, double, std::complex<float>, "
                "std::complex<double>, std::int32_t or std::int64_t");
  static_assert(!(detail::scalar_traits<T>::is_complex && !detail::scalar_traits<U>::is_complex),
                "sluice::cast cannot drop an imaginary part; use sluice::real(z), sluice::imag(z) "
                "or sluice::abs(z)");
  static_assert(!(!detail::scalar_traits<T>::is_integer && detail::scalar_traits<U>::is_integer),
                "sluice::cast from floating-point or complex to an integer type is not supported");
  return detail::convert_node<U>(e);
}

// ---- operators ---------------------------------------------------------------------------------

#define SLUICE_SCALAR_ARITHMETIC(symbol, opcode)                        \
  template <class L, class R>                                           \
  requires detail::binary_operands<L, R>                                \
  [[nodiscard]] auto operator symbol(const L& l, const R& r) {          \
    if constexpr (detail::binary_types_ok<L, R>()) {                    \
      return detail::make_binary<detail::ScalarOp::opcode, void>(l, r); \
    } else {                                                            \
      return detail::binary_type_error<L, R>();                         \
    }                                                                   \
  }
SLUICE_SCALAR_ARITHMETIC(+, add)
SLUICE_SCALAR_ARITHMETIC(-, sub)
SLUICE_SCALAR_ARITHMETIC(*, mul)
SLUICE_SCALAR_ARITHMETIC(/, div)
#undef SLUICE_SCALAR_ARITHMETIC

#define SLUICE_SCALAR_EQUALITY(symbol, opcode)                                  \
  template <class L, class R>                                                   \
  requires detail::binary_operands<L, R>                                        \
  [[nodiscard]] auto operator symbol(const L& l, const R& r) {                  \
    if constexpr (detail::binary_types_ok<L, R>()) {                            \
      return detail::make_binary<detail::ScalarOp::opcode, std::int32_t>(l, r); \
    } else {                                                                    \
      return detail::binary_type_error<L, R>();                                 \
    }                                                                           \
  }
SLUICE_SCALAR_EQUALITY(==, eq)
SLUICE_SCALAR_EQUALITY(!=, ne)
#undef SLUICE_SCALAR_EQUALITY

#define SLUICE_SCALAR_ORDERING(symbol, opcode)                                              \
  template <class L, class R>                                                               \
  requires detail::binary_operands<L, R>                                                    \
  [[nodiscard]] auto operator symbol(const L& l, const R& r) {                              \
    if constexpr (!detail::binary_types_ok<L, R>()) {                                       \
      return detail::binary_type_error<L, R>();                                             \
    } else {                                                                                \
      static_assert(!detail::scalar_traits<detail::binary_result_t<L, R>>::is_complex,      \
                    "sluice: complex numbers have no ordering; compare sluice::real(z) or " \
                    "sluice::abs(z) instead");                                              \
      return detail::make_binary<detail::ScalarOp::opcode, std::int32_t>(l, r);             \
    }                                                                                       \
  }
SLUICE_SCALAR_ORDERING(<, lt)
SLUICE_SCALAR_ORDERING(<=, le)
SLUICE_SCALAR_ORDERING(>, gt)
SLUICE_SCALAR_ORDERING(>=, ge)
#undef SLUICE_SCALAR_ORDERING

template <class E>
requires detail::is_expr_v<E>
[[nodiscard]] auto operator-(const E& e) {
  return detail::make_unary<detail::ScalarOp::neg, detail::value_t<E>>(e);
}

/// min(a, b) = b < a ? b : a and max(a, b) = a < b ? b : a, as std::min and std::max.
template <class L, class R>
requires detail::binary_operands<L, R>
[[nodiscard]] auto min(const L& l, const R& r) {
  if constexpr (!detail::binary_types_ok<L, R>()) {
    return detail::binary_type_error<L, R>();
  } else {
    static_assert(!detail::scalar_traits<detail::binary_result_t<L, R>>::is_complex,
                  "sluice::la::min: complex numbers have no ordering");
    return detail::make_binary<detail::ScalarOp::min, void>(l, r);
  }
}
template <class L, class R>
requires detail::binary_operands<L, R>
[[nodiscard]] auto max(const L& l, const R& r) {
  if constexpr (!detail::binary_types_ok<L, R>()) {
    return detail::binary_type_error<L, R>();
  } else {
    static_assert(!detail::scalar_traits<detail::binary_result_t<L, R>>::is_complex,
                  "sluice::la::max: complex numbers have no ordering");
    return detail::make_binary<detail::ScalarOp::max, void>(l, r);
  }
}
/// std::pow on the operand types.
template <class L, class R>
requires detail::binary_operands<L, R>
[[nodiscard]] auto pow(const L& l, const R& r) {
  if constexpr (!detail::binary_types_ok<L, R>()) {
    return detail::binary_type_error<L, R>();
  } else {
    static_assert(!detail::scalar_traits<detail::binary_result_t<L, R>>::is_integer,
                  "sluice::pow needs a floating-point or complex operand; convert integers with "
                  "sluice::cast<double>(n)");
    return detail::make_binary<detail::ScalarOp::pow, void>(l, r);
  }
}

/// |x|; of a complex number, its modulus (a real value).
template <class E>
requires detail::is_expr_v<E>
[[nodiscard]] auto abs(const E& e) {
  return detail::make_unary<detail::ScalarOp::abs, detail::real_t<detail::value_t<E>>>(e);
}

#define SLUICE_SCALAR_FUNCTION(name)                                          \
  template <class E>                                                          \
  requires detail::is_expr_v<E>                                               \
  [[nodiscard]] auto name(const E& e) {                                       \
    static_assert(!detail::scalar_traits<detail::value_t<E>>::is_integer,     \
                  "sluice::" #name                                            \
                  " needs a floating-point or complex operand; convert "      \
                  "integers with sluice::cast<double>(n)");                   \
    return detail::make_unary<detail::ScalarOp::name, detail::value_t<E>>(e); \
  }
SLUICE_SCALAR_FUNCTION(sqrt)
SLUICE_SCALAR_FUNCTION(exp)
SLUICE_SCALAR_FUNCTION(log)
SLUICE_SCALAR_FUNCTION(sin)
SLUICE_SCALAR_FUNCTION(cos)
SLUICE_SCALAR_FUNCTION(tan)
#undef SLUICE_SCALAR_FUNCTION

/// The complex conjugate; of a real value, the value itself.
template <class E>
requires detail::is_expr_v<E>
[[nodiscard]] auto conj(const E& e) {
  if constexpr (detail::scalar_traits<detail::value_t<E>>::is_complex) {
    return detail::make_unary<detail::ScalarOp::conj, detail::value_t<E>>(e);
  } else {
    return detail::as_node(e);
  }
}
/// The real part; of a real value, the value itself.
template <class E>
requires detail::is_expr_v<E>
[[nodiscard]] auto real(const E& e) {
  if constexpr (detail::scalar_traits<detail::value_t<E>>::is_complex) {
    return detail::make_unary<detail::ScalarOp::real, detail::real_t<detail::value_t<E>>>(e);
  } else {
    return detail::as_node(e);
  }
}
/// The imaginary part; of a real value, 0.
template <class E>
requires detail::is_expr_v<E>
[[nodiscard]] auto imag(const E& e) {
  using T = detail::value_t<E>;
  if constexpr (detail::scalar_traits<T>::is_complex) {
    return detail::make_unary<detail::ScalarOp::imag, detail::real_t<T>>(e);
  } else {
    return Expr<detail::ConstNode<T>>({T(0)});
  }
}

}  // namespace sluice
