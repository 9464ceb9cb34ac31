#pragma once
/// @file
/// What a dataflow kernel sees: `nd_item` and `group` with a work-group barrier, and the sum and
/// max reduction operators (reference 004, "Kernel-level communication").

#include <cstddef>
#include <type_traits>

#include "sluice/dataflow/range.hpp"

namespace sluice::dataflow {

namespace detail {
/// Host backend: suspends the calling work-item (a fiber) until every work-item of its group
/// arrived. Throws Error when called outside an nd_range kernel's work-item.
void host_barrier();
/// Host backend: the work-group local memory of the group the calling work-item belongs to.
[[nodiscard]] std::byte* host_local_memory() noexcept;

SLUICE_HD inline void group_barrier_impl() {
#if defined(__CUDA_ARCH__)
  __syncthreads();
#else
  host_barrier();
#endif
}
}  // namespace detail

/// The work-group a work-item of an nd_range kernel belongs to.
template <int D = 1>
class group {
 public:
  SLUICE_HD constexpr group(id<D> g, range<D> groups, range<D> local) noexcept
      : id_(g), groups_(groups), local_(local) {}
  [[nodiscard]] SLUICE_HD constexpr id<D> get_group_id() const noexcept { return id_; }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_group_id(int d) const noexcept {
    return id_[d];
  }
  [[nodiscard]] SLUICE_HD constexpr range<D> get_group_range() const noexcept { return groups_; }
  [[nodiscard]] SLUICE_HD constexpr range<D> get_local_range() const noexcept { return local_; }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_group_linear_id() const noexcept {
    return detail::linearize<D>(id_, groups_);
  }

 private:
  id<D> id_;
  range<D> groups_;
  range<D> local_;
};

/// Waits until every work-item of `g` reached this call; local memory written before it is
/// visible to the whole group after it. Every work-item of the group must call it equally often.
template <int D>
SLUICE_HD inline void group_barrier(const group<D>& g) {
  (void)g;
  detail::group_barrier_impl();
}

/// A work-item of an nd_range kernel: global, local and group ids, and the group barrier.
template <int D = 1>
class nd_item {
 public:
  SLUICE_HD constexpr nd_item(id<D> group_id, id<D> local_id, range<D> groups,
                              range<D> local) noexcept
      : group_(group_id), local_id_(local_id), groups_(groups), local_(local) {}

  [[nodiscard]] SLUICE_HD constexpr id<D> get_global_id() const noexcept {
    id<D> g;
    for (int d = 0; d < D; ++d) g[d] = group_[d] * local_[d] + local_id_[d];
    return g;
  }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_global_id(int d) const noexcept {
    return group_[d] * local_[d] + local_id_[d];
  }
  [[nodiscard]] SLUICE_HD constexpr id<D> get_local_id() const noexcept { return local_id_; }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_local_id(int d) const noexcept {
    return local_id_[d];
  }
  [[nodiscard]] SLUICE_HD constexpr group<D> get_group() const noexcept {
    return {group_, groups_, local_};
  }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_group(int d) const noexcept {
    return group_[d];
  }
  [[nodiscard]] SLUICE_HD constexpr range<D> get_local_range() const noexcept { return local_; }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_local_range(int d) const noexcept {
    return local_[d];
  }
  [[nodiscard]] SLUICE_HD constexpr range<D> get_group_range() const noexcept { return groups_; }
  [[nodiscard]] SLUICE_HD constexpr range<D> get_global_range() const noexcept {
    range<D> g;
    for (int d = 0; d < D; ++d) g[d] = groups_[d] * local_[d];
    return g;
  }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_global_linear_id() const noexcept {
    return detail::linearize<D>(get_global_id(), get_global_range());
  }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_local_linear_id() const noexcept {
    return detail::linearize<D>(local_id_, local_);
  }
  /// The group barrier (`group_barrier(item.get_group())`).
  SLUICE_HD void barrier() const { detail::group_barrier_impl(); }

 private:
  id<D> group_;
  id<D> local_id_;
  range<D> groups_;
  range<D> local_;
};

/// Sum, as a reduction operator (SYCL's `sycl::plus`).
template <class T>
struct plus {
  SLUICE_HD constexpr T operator()(const T& a, const T& b) const { return a + b; }
};
/// Maximum, as a reduction operator (SYCL's `sycl::maximum`).
template <class T>
struct maximum {
  SLUICE_HD constexpr T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};

/// What a reduction kernel receives as its last argument: a private partial result that the
/// runtime combines with every other work-item's and with the destination's value.
template <class T, class Op>
class Reducer {
 public:
  SLUICE_HD constexpr explicit Reducer(T identity) noexcept : value_(identity) {}
  /// Combines `x` into this work-item's partial result.
  SLUICE_HD void combine(const T& x) { value_ = Op{}(value_, x); }
  /// `combine(x)`, for sums.
  SLUICE_HD Reducer& operator+=(const T& x) requires std::is_same_v<Op, plus<T>> {
    combine(x);
    return *this;
  }
  [[nodiscard]] SLUICE_HD const T& partial() const noexcept { return value_; }

 private:
  T value_;
};

}  // namespace sluice::dataflow
