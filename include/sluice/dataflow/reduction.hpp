#pragma once
/// @file
/// Reductions in kernels (SYCL 2020 §4.9.2): `reduction(...)` names a destination, an operator
/// and its identity; `parallel_for(range or nd_range, reduction..., f)` hands `f` one `Reducer`
/// per reduction, and the partial results combined with the operator land in the destinations
/// when the command group completes.
///
/// @code
/// int* sum = df::malloc_shared<int>(1, q);
/// int* big = df::malloc_shared<int>(1, q);
/// q.submit([&](df::Handler& h) {
///   h.parallel_for(df::range<1>(n), df::reduction(sum, df::plus<>()),
///                  df::reduction(big, df::maximum<>(),
///                  df::property::reduction::initialize_to_identity{}),
///                  [=](df::id<1> i, auto& s, auto& m) { s += x[i]; m.combine(x[i]); });
/// }).wait();
/// @endcode

#include <cstddef>
#include <type_traits>
#include <utility>

#include "sluice/dataflow/functional.hpp"
#include "sluice/dataflow/range.hpp"

namespace sluice::dataflow {

/// Properties of a reduction.
struct ReductionOptions {
  /// Ignore the destination's value instead of combining the result with it.
  bool initialize_to_identity = false;
};

namespace property::reduction {
/// SYCL 2020's spelling of `ReductionOptions{.initialize_to_identity = true}`.
struct initialize_to_identity {};
}  // namespace property::reduction

namespace detail {
constexpr ReductionOptions options_of(ReductionOptions o) noexcept {
  return o;
}
constexpr ReductionOptions options_of(property::reduction::initialize_to_identity) noexcept {
  return {true};
}
template <class P>
concept ReductionProperty = std::is_same_v<P, ReductionOptions> ||
    std::is_same_v<P, property::reduction::initialize_to_identity>;
}  // namespace detail

/// What a reduction kernel receives for each reduction: a private partial result that the
/// runtime combines with every other work-item's and with the destination's value.
template <class T, class BinaryOperation>
class Reducer {
 public:
  using value_type = T;
  using binary_operation = BinaryOperation;

  SLUICE_HD constexpr Reducer(T identity, BinaryOperation op) noexcept
      : value_(identity), identity_(identity), op_(op) {}
  /// Combines `x` into this work-item's partial result.
  SLUICE_HD Reducer& combine(const T& x) {
    value_ = static_cast<T>(op_(value_, x));
    return *this;
  }
  /// The identity of the reduction's operator.
  [[nodiscard]] SLUICE_HD T identity() const noexcept { return identity_; }
  [[nodiscard]] SLUICE_HD const T& partial() const noexcept { return value_; }

  SLUICE_HD Reducer& operator+=(const T& x) requires detail::is_op_v<plus, BinaryOperation, T> {
    return combine(x);
  }
  SLUICE_HD Reducer& operator*=(
      const T& x) requires detail::is_op_v<multiplies, BinaryOperation, T> {
    return combine(x);
  }
  SLUICE_HD Reducer& operator&=(const T& x) requires detail::is_op_v<bit_and, BinaryOperation, T> {
    return combine(x);
  }
  SLUICE_HD Reducer& operator|=(const T& x) requires detail::is_op_v<bit_or, BinaryOperation, T> {
    return combine(x);
  }
  SLUICE_HD Reducer& operator^=(const T& x) requires detail::is_op_v<bit_xor, BinaryOperation, T> {
    return combine(x);
  }
  SLUICE_HD Reducer& operator++() requires(
      detail::is_op_v<plus, BinaryOperation, T>&& std::is_integral_v<T>) {
    return combine(T(1));
  }
  SLUICE_HD void operator++(int) requires(
      detail::is_op_v<plus, BinaryOperation, T>&& std::is_integral_v<T>) {
    combine(T(1));
  }

 private:
  T value_;
  T identity_;
  BinaryOperation op_;
};

/// A reduction into `*out` (SYCL 2020's reduction object); see `reduction`.
template <class T, class BinaryOperation>
struct Reduction {
  /// What the kernel receives (nvcc's device lambdas cannot be generic: name this type there).
  using reducer_type = Reducer<T, BinaryOperation>;
  using value_type = T;
  T* out = nullptr;
  T identity{};
  BinaryOperation op{};
  bool initialize_to_identity = false;
};

/// A reduction into `*out`, USM memory of the queue's device (or host memory on the host
/// device), with an operator whose identity is known (`plus`, `multiplies`, `minimum`, `maximum`,
/// `bit_and`, `bit_or`, `bit_xor`, `logical_and`, `logical_or`, typed or transparent). The
/// result is combined with the value there unless `initialize_to_identity`.
template <class T, class BinaryOperation, class Props = ReductionOptions>
requires detail::ReductionProperty<Props> Reduction<T, BinaryOperation> reduction(
    T* out, BinaryOperation op, Props props = {}) {
  static_assert(has_known_identity_v<BinaryOperation, T>,
                "reduction(out, op): this operator has no known identity for this type; pass one "
                "with reduction(out, identity, op)");
  return {out, known_identity_v<BinaryOperation, T>, op,
          detail::options_of(props).initialize_to_identity};
}
/// A reduction with any associative operator and its `identity` (op(identity, x) == x).
template <class T, class BinaryOperation, class Props = ReductionOptions>
requires detail::ReductionProperty<Props> Reduction<T, BinaryOperation> reduction(
    T* out, const T& identity, BinaryOperation op, Props props = {}) {
  return {out, identity, op, detail::options_of(props).initialize_to_identity};
}

namespace detail {
/// A heterogeneous list that device code can hold (std::tuple is not usable there).
template <class... Ts>
struct Pack;
template <>
struct Pack<> {
  static constexpr std::size_t size = 0;
};
template <class H, class... Ts>
struct Pack<H, Ts...> {
  static constexpr std::size_t size = 1 + sizeof...(Ts);
  H head;
  Pack<Ts...> tail;
};
template <std::size_t I, class P>
SLUICE_HD constexpr auto& pack_get(P& p) noexcept {
  if constexpr (I == 0) {
    return p.head;
  } else {
    return pack_get<I - 1>(p.tail);
  }
}
template <class H, class... Ts>
SLUICE_HD constexpr Pack<H, Ts...> make_pack(const H& h, const Ts&... ts) {
  if constexpr (sizeof...(Ts) == 0) {
    return {h, {}};
  } else {
    return {h, make_pack(ts...)};
  }
}
template <class... T, class... Op, std::size_t... I>
SLUICE_HD constexpr Pack<Reducer<T, Op>...> make_reducers_from(const Pack<Reduction<T, Op>...>& r,
                                                               std::index_sequence<I...>) {
  return make_pack(Reducer<T, Op>(pack_get<I>(r).identity, pack_get<I>(r).op)...);
}
/// One fresh Reducer per reduction.
template <class... T, class... Op>
SLUICE_HD constexpr Pack<Reducer<T, Op>...> make_reducers(const Pack<Reduction<T, Op>...>& r) {
  if constexpr (sizeof...(T) == 0) {
    return {};
  } else {
    return make_reducers_from(r, std::index_sequence_for<T...>{});
  }
}
template <class R>
struct is_reduction : std::false_type {};
template <class T, class Op>
struct is_reduction<Reduction<T, Op>> : std::true_type {};
template <class R>
concept ReductionObject = is_reduction<std::remove_cvref_t<R>>::value;
}  // namespace detail

}  // namespace sluice::dataflow
