#pragma once
/// @file
/// SYCL 2020's function objects (§4.17.2) and their known identities (§4.9.2.2), for reductions
/// and group algorithms: `plus`, `multiplies`, `bit_and`, `bit_or`, `bit_xor`, `logical_and`,
/// `logical_or`, `minimum`, `maximum`, each also transparent (`plus<>`).

#include <limits>
#include <type_traits>
#include <utility>

#include "sluice/dataflow/range.hpp"

namespace sluice::dataflow {

#define SLUICE_FUNCTION_OBJECT(name, expr)                                          \
  template <class T = void>                                                         \
  struct name {                                                                     \
    SLUICE_HD constexpr T operator()(const T& x, const T& y) const { return expr; } \
  };                                                                                \
  template <>                                                                       \
  struct name<void> {                                                               \
    using is_transparent = void;                                                    \
    template <class T, class U>                                                     \
    SLUICE_HD constexpr auto operator()(T&& x, U&& y) const -> decltype(expr) {     \
      return expr;                                                                  \
    }                                                                               \
  };
SLUICE_FUNCTION_OBJECT(plus, x + y)
SLUICE_FUNCTION_OBJECT(multiplies, x* y)
SLUICE_FUNCTION_OBJECT(bit_and, x& y)
SLUICE_FUNCTION_OBJECT(bit_or, x | y)
SLUICE_FUNCTION_OBJECT(bit_xor, x ^ y)
SLUICE_FUNCTION_OBJECT(logical_and, x&& y)
SLUICE_FUNCTION_OBJECT(logical_or, x || y)
#undef SLUICE_FUNCTION_OBJECT

/// The smaller of two values (`x` when neither is smaller).
template <class T = void>
struct minimum {
  SLUICE_HD constexpr T operator()(const T& x, const T& y) const { return y < x ? y : x; }
};
template <>
struct minimum<void> {
  using is_transparent = void;
  template <class T, class U>
  SLUICE_HD constexpr std::common_type_t<T, U> operator()(const T& x, const U& y) const {
    return y < x ? y : x;
  }
};
/// The larger of two values (`x` when neither is larger).
template <class T = void>
struct maximum {
  SLUICE_HD constexpr T operator()(const T& x, const T& y) const { return x < y ? y : x; }
};
template <>
struct maximum<void> {
  using is_transparent = void;
  template <class T, class U>
  SLUICE_HD constexpr std::common_type_t<T, U> operator()(const T& x, const U& y) const {
    return x < y ? y : x;
  }
};

namespace detail {
template <template <class> class Op, class BinaryOperation, class T>
inline constexpr bool is_op_v =
    std::is_same_v<BinaryOperation, Op<T>> || std::is_same_v<BinaryOperation, Op<void>>;
template <class T>
inline constexpr bool is_arith_v = std::is_arithmetic_v<T>;
template <class T>
inline constexpr bool is_int_v = std::is_integral_v<T>;
}  // namespace detail

/// Whether `BinaryOperation` on `T` has an identity the runtime knows (SYCL 2020 §4.9.2.2).
template <class BinaryOperation, class T>
struct has_known_identity
    : std::bool_constant<(detail::is_arith_v<T> &&
                          (detail::is_op_v<plus, BinaryOperation, T> ||
                           detail::is_op_v<multiplies, BinaryOperation, T> ||
                           detail::is_op_v<minimum, BinaryOperation, T> ||
                           detail::is_op_v<maximum, BinaryOperation, T> ||
                           detail::is_op_v<logical_and, BinaryOperation, T> ||
                           detail::is_op_v<logical_or, BinaryOperation, T>)) ||
                         (detail::is_int_v<T> && (detail::is_op_v<bit_and, BinaryOperation, T> ||
                                                  detail::is_op_v<bit_or, BinaryOperation, T> ||
                                                  detail::is_op_v<bit_xor, BinaryOperation, T>))> {
};
template <class BinaryOperation, class T>
inline constexpr bool has_known_identity_v = has_known_identity<BinaryOperation, T>::value;

/// The identity of `BinaryOperation` on `T`: 0 for plus, bit_or and bit_xor; 1 for multiplies;
/// all ones for bit_and; true for logical_and, false for logical_or; +infinity (or the largest
/// value) for minimum and -infinity (or the lowest value) for maximum.
template <class BinaryOperation, class T>
struct known_identity {
  static_assert(has_known_identity_v<BinaryOperation, T>,
                "known_identity: this operator has no known identity for this type; pass the "
                "identity explicitly (reduction(ptr, identity, op))");
  static constexpr T compute() {
    using L = std::numeric_limits<T>;
    if constexpr (detail::is_op_v<multiplies, BinaryOperation, T>) {
      return T(1);
    } else if constexpr (detail::is_op_v<bit_and, BinaryOperation, T>) {
      return static_cast<T>(~T(0));
    } else if constexpr (detail::is_op_v<logical_and, BinaryOperation, T>) {
      return T(true);
    } else if constexpr (detail::is_op_v<logical_or, BinaryOperation, T>) {
      return T(false);
    } else if constexpr (detail::is_op_v<minimum, BinaryOperation, T>) {
      if constexpr (L::has_infinity) {
        return L::infinity();
      } else {
        return L::max();
      }
    } else if constexpr (detail::is_op_v<maximum, BinaryOperation, T>) {
      if constexpr (L::has_infinity) {
        return -L::infinity();
      } else {
        return L::lowest();
      }
    } else {
      return T(0);
    }
  }
  static constexpr T value = compute();
};
template <class BinaryOperation, class T>
inline constexpr T known_identity_v = known_identity<BinaryOperation, T>::value;

}  // namespace sluice::dataflow
