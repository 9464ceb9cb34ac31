#pragma once
/// @file
/// The type rules of scalar expressions (sluice/scalar.hpp): the value types and their kinds,
/// which host constants may appear, which conversions happen without asking, and the operand
/// and result types of binary operations (the mixing rules of the file comment of scalar.hpp).

// Private: only sluice's public headers include this file (they define
// SLUICE_IMPL_PUBLIC_INCLUDE around the include, as Kokkos does for its internals).
#ifndef SLUICE_IMPL_PUBLIC_INCLUDE
#error \
    "sluice/detail/scalar_type_rules.hpp is internal to sluice and may change without notice: include <sluice/scalar.hpp> instead"
#endif

#include <complex>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "sluice/detail/scalar_format.hpp"
#include "sluice/scalar/options.hpp"

namespace sluice::detail {

template <class T>
struct scalar_traits {
  static constexpr bool valid = false;
  static constexpr bool is_integer = false;
  static constexpr bool is_complex = false;
  static constexpr bool is_floating = false;
};
template <class T, ScalarKind K, bool Integer, bool Complex, class Real>
struct scalar_traits_base {
  static constexpr bool valid = true;
  static constexpr ScalarKind kind = K;
  static constexpr bool is_integer = Integer;
  static constexpr bool is_complex = Complex;
  static constexpr bool is_floating = !Integer && !Complex;
  using real_type = Real;
};
template <>
struct scalar_traits<std::int32_t>
    : scalar_traits_base<std::int32_t, ScalarKind::i32, true, false, std::int32_t> {};
template <>
struct scalar_traits<std::int64_t>
    : scalar_traits_base<std::int64_t, ScalarKind::i64, true, false, std::int64_t> {};
template <>
struct scalar_traits<float> : scalar_traits_base<float, ScalarKind::f32, false, false, float> {};
template <>
struct scalar_traits<double> : scalar_traits_base<double, ScalarKind::f64, false, false, double> {};
template <>
struct scalar_traits<std::complex<float>>
    : scalar_traits_base<std::complex<float>, ScalarKind::c32, false, true, float> {};
template <>
struct scalar_traits<std::complex<double>>
    : scalar_traits_base<std::complex<double>, ScalarKind::c64, false, true, double> {};

template <class T>
inline constexpr ScalarKind kind_v = scalar_traits<T>::kind;
template <class T>
using real_t = typename scalar_traits<T>::real_type;

template <class T>
ScalarValue to_scalar_value(const T& x) noexcept {
  ScalarValue v{};
  std::memcpy(v.bytes, &x, sizeof(T));
  return v;
}

template <class E>
struct expr_traits {
  static constexpr bool is_expr = false;
};
template <class T>
struct expr_traits<Managed<T>> {
  static constexpr bool is_expr = true;
  using value_type = T;
};
template <class N>
struct expr_traits<Expr<N>> {
  static constexpr bool is_expr = true;
  using value_type = typename N::value_type;
};
template <class T>
struct expr_traits<AnyExpr<T>> {
  static constexpr bool is_expr = true;
  using value_type = T;
};

template <class E>
inline constexpr bool is_expr_v = expr_traits<std::remove_cvref_t<E>>::is_expr;
template <class E>
using value_t = typename expr_traits<std::remove_cvref_t<E>>::value_type;

template <class C>
struct is_std_complex : std::false_type {};
template <class R>
struct is_std_complex<std::complex<R>> : std::true_type {};

/// Host values that may appear in expressions (they become constants of the program).
template <class C>
inline constexpr bool is_host_constant_v =
    (std::is_arithmetic_v<C> && !std::is_same_v<C, bool>) ||
    std::is_same_v<C, std::complex<float>> || std::is_same_v<C, std::complex<double>>;

template <class L, class R>
concept binary_operands = (is_expr_v<L> && (is_expr_v<R> || is_host_constant_v<R>)) ||
                          (is_host_constant_v<L> && is_expr_v<R>);

/// Conversions made without asking: they never lose the imaginary part or the fraction, and
/// never reduce precision.
template <class From, class To>
inline constexpr bool implicit_conversion_v =
    std::is_same_v<From, To> ||
    (scalar_traits<From>::is_integer &&
     (!scalar_traits<To>::is_integer || sizeof(To) >= sizeof(From))) ||
    (!scalar_traits<From>::is_integer && !scalar_traits<To>::is_integer &&
     (scalar_traits<To>::is_complex || !scalar_traits<From>::is_complex) &&
     sizeof(real_t<To>) >= sizeof(real_t<From>));

struct invalid_type {};

/// The type a host constant `C` takes next to an operand of type `Other`.
template <class C, class Other>
auto constant_type() {
  if constexpr (!scalar_traits<Other>::valid) {
    return std::type_identity<invalid_type>{};
  } else if constexpr (is_std_complex<C>::value) {
    if constexpr (scalar_traits<Other>::is_integer) {
      return std::type_identity<invalid_type>{};
    } else {
      return std::type_identity<std::complex<real_t<Other>>>{};
    }
  } else if constexpr (std::is_floating_point_v<C>) {
    if constexpr (scalar_traits<Other>::is_integer) {
      return std::type_identity<invalid_type>{};
    } else {
      return std::type_identity<real_t<Other>>{};
    }
  } else {  // an integer constant
    return std::type_identity<real_t<Other>>{};
  }
}

template <class X, class Other>
auto operand_type() {
  if constexpr (is_expr_v<X>) {
    return std::type_identity<value_t<X>>{};
  } else {
    return constant_type<X, value_t<Other>>();
  }
}
template <class X, class Other>
using operand_t = typename decltype(operand_type<X, Other>())::type;

template <class L, class R, class Res>
struct promotion {
  static constexpr bool ok = true;
  using lhs = L;
  using rhs = R;
  using result = Res;
};
struct no_promotion {
  static constexpr bool ok = false;
  using lhs = invalid_type;
  using rhs = invalid_type;
  using result = invalid_type;
};

/// Operand and result types of a binary operation on types A and B (the mixing rules of
/// sluice/scalar.hpp).
template <class A, class B>
auto promote() {
  if constexpr (!scalar_traits<A>::valid || !scalar_traits<B>::valid) {
    return no_promotion{};
  } else {
    using TA = scalar_traits<A>;
    using TB = scalar_traits<B>;
    if constexpr (std::is_same_v<A, B>) {
      return promotion<A, A, A>{};
    } else if constexpr (TA::is_complex && std::is_same_v<real_t<A>, B>) {
      return promotion<A, B, A>{};
    } else if constexpr (TB::is_complex && std::is_same_v<real_t<B>, A>) {
      return promotion<A, B, B>{};
    } else if constexpr (TA::is_integer && TB::is_integer) {
      return promotion<std::int64_t, std::int64_t, std::int64_t>{};
    } else if constexpr (TA::is_integer) {
      return promotion<std::conditional_t<TB::is_complex, real_t<B>, B>, B, B>{};
    } else if constexpr (TB::is_integer) {
      return promotion<A, std::conditional_t<TA::is_complex, real_t<A>, A>, A>{};
    } else {
      return no_promotion{};
    }
  }
}

template <class L, class R>
constexpr bool binary_types_ok() {
  using A = operand_t<L, R>;
  using B = operand_t<R, L>;
  if constexpr (std::is_same_v<A, invalid_type> || std::is_same_v<B, invalid_type>) {
    return false;
  } else {
    return decltype(promote<A, B>())::ok;
  }
}

/// Reports why operands do not combine (one message, then stops: returns no expression).
template <class L, class R>
invalid_type binary_type_error() {
  using A = operand_t<L, R>;
  using B = operand_t<R, L>;
  constexpr bool constant_ok = !std::is_same_v<A, invalid_type> && !std::is_same_v<B, invalid_type>;
  static_assert(constant_ok,
                "sluice: a floating-point or complex host constant cannot be combined with an "
                "integer expression; convert the expression first, e.g. sluice::cast<double>(n)");
  if constexpr (constant_ok) {
    static_assert(decltype(promote<A, B>())::ok,
                  "sluice: the operands mix float and double precision (e.g. Managed<float> with "
                  "Managed<double>); say which precision you mean with sluice::cast<double>(x) or "
                  "sluice::cast<float>(x)");
  }
  return {};
}

template <class L, class R>
using binary_result_t = typename decltype(promote<operand_t<L, R>, operand_t<R, L>>())::result;

template <class C>
auto canonical_constant_type() {
  if constexpr (is_std_complex<C>::value || std::is_floating_point_v<C>) {
    if constexpr (std::is_same_v<C, long double>) {
      return std::type_identity<double>{};
    } else {
      return std::type_identity<C>{};
    }
  } else if constexpr (std::is_signed_v<C> && sizeof(C) <= 4) {
    return std::type_identity<std::int32_t>{};
  } else {
    return std::type_identity<std::int64_t>{};
  }
}

}  // namespace sluice::detail
