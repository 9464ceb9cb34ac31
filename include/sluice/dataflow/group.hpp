#pragma once
/// @file
/// What an nd_range work-item sees of its groups (SYCL 2020 §4.9.1.6–4.9.1.8): `nd_item`, its
/// work-group (`group`) and sub-group (`sub_group`), and `group_barrier`.
///
/// Sub-groups are `sub_group_size` (32) consecutive work-items by local linear id (the last one of
/// a work-group whose size is not a multiple of 32 is smaller): a warp on cuda (SYCL dimension D-1
/// is cuda's x, so linear ids are the same), and 32 fibers of one thread on the host, so that a
/// kernel computes the same on both backends.

#include <cstddef>
#include <cstdint>

#include "sluice/dataflow/range.hpp"

namespace sluice::dataflow {

/// Work-items per sub-group on every backend (the warp size on cuda).
inline constexpr std::uint32_t sub_group_size = 32;

namespace detail {
/// Host backend: suspends the calling work-item (a fiber) until every work-item of its group
/// arrived. Throws Error when called outside an nd_range kernel's work-item.
void host_barrier();
/// Host backend: the work-group local memory of the group the calling work-item belongs to.
[[nodiscard]] std::byte* host_local_memory() noexcept;

/// Which work-items meet at a host collective.
enum class CollectiveScope : std::uint8_t { work_group, sub_group };
/// Bytes of a work-item's collective slot: the largest value a group algorithm takes.
inline constexpr std::size_t kCollectiveSlotBytes = 64;
/// Runs once every work-item of the scope arrived: `slots` is the work-group's slot array (slot l
/// at slots + l * kCollectiveSlotBytes), [first, first + count) the scope's work-items.
using CollectiveFn = void (*)(std::byte* slots, std::size_t first, std::size_t count,
                              const void* arg);
/// Host backend: the calling work-item's slot (valid inside an nd_range work-item only).
[[nodiscard]] std::byte* host_collective_slot();
/// Host backend: suspends the calling work-item until every work-item of its work-group (or
/// sub-group) arrived at a collective, runs `complete(slots, first, count, arg)` once for them,
/// and resumes them. A work-item reads its result from its own slot afterwards.
void host_collective(CollectiveScope scope, CollectiveFn complete, const void* arg);

SLUICE_HD inline void group_barrier_impl() {
#if defined(__CUDA_ARCH__)
  __syncthreads();
#else
  host_barrier();
#endif
}
}  // namespace detail

/// The work-group a work-item of an nd_range kernel belongs to, seen from that work-item.
template <int D = 1>
class group {
 public:
  static constexpr int dimensions = D;
  SLUICE_HD constexpr group(id<D> g, id<D> local_id, range<D> groups, range<D> local) noexcept
      : id_(g), local_id_(local_id), groups_(groups), local_(local) {}
  [[nodiscard]] SLUICE_HD constexpr id<D> get_group_id() const noexcept { return id_; }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_group_id(int d) const noexcept {
    return id_[d];
  }
  /// The calling work-item's id in the group.
  [[nodiscard]] SLUICE_HD constexpr id<D> get_local_id() const noexcept { return local_id_; }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_local_id(int d) const noexcept {
    return local_id_[d];
  }
  [[nodiscard]] SLUICE_HD constexpr range<D> get_group_range() const noexcept { return groups_; }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_group_range(int d) const noexcept {
    return groups_[d];
  }
  [[nodiscard]] SLUICE_HD constexpr range<D> get_local_range() const noexcept { return local_; }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_local_range(int d) const noexcept {
    return local_[d];
  }
  [[nodiscard]] SLUICE_HD constexpr range<D> get_max_local_range() const noexcept { return local_; }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_group_linear_id() const noexcept {
    return detail::linearize<D>(id_, groups_);
  }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_local_linear_id() const noexcept {
    return detail::linearize<D>(local_id_, local_);
  }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_group_linear_range() const noexcept {
    return groups_.size();
  }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_local_linear_range() const noexcept {
    return local_.size();
  }
  /// True for the work-item of local id 0.
  [[nodiscard]] SLUICE_HD constexpr bool leader() const noexcept {
    return get_local_linear_id() == 0;
  }
  [[nodiscard]] SLUICE_HD constexpr std::size_t operator[](int d) const noexcept { return id_[d]; }

 private:
  id<D> id_;
  id<D> local_id_;
  range<D> groups_;
  range<D> local_;
};

/// The sub-group a work-item of an nd_range kernel belongs to, seen from that work-item.
class sub_group {
 public:
  using id_type = id<1>;
  using range_type = range<1>;
  using linear_id_type = std::uint32_t;
  static constexpr int dimensions = 1;

  /// The sub-group of the work-item with local linear id `local_linear` in a work-group of
  /// `group_items` work-items.
  SLUICE_HD constexpr sub_group(std::size_t local_linear, std::size_t group_items) noexcept
      : lane_(static_cast<std::uint32_t>(local_linear % sub_group_size)),
        id_(static_cast<std::uint32_t>(local_linear / sub_group_size)),
        groups_(static_cast<std::uint32_t>((group_items + sub_group_size - 1) / sub_group_size)),
        size_(static_cast<std::uint32_t>(group_items - id_ * std::size_t{sub_group_size} <
                                                 sub_group_size
                                             ? group_items - id_ * std::size_t{sub_group_size}
                                             : sub_group_size)) {}

  /// The calling work-item's index in the sub-group.
  [[nodiscard]] SLUICE_HD constexpr id<1> get_local_id() const noexcept { return lane_; }
  [[nodiscard]] SLUICE_HD constexpr linear_id_type get_local_linear_id() const noexcept {
    return lane_;
  }
  /// Work-items in this sub-group (32, or fewer for the last one of the work-group).
  [[nodiscard]] SLUICE_HD constexpr range<1> get_local_range() const noexcept { return size_; }
  [[nodiscard]] SLUICE_HD constexpr linear_id_type get_local_linear_range() const noexcept {
    return size_;
  }
  [[nodiscard]] SLUICE_HD constexpr range<1> get_max_local_range() const noexcept {
    return sub_group_size;
  }
  /// This sub-group's index in the work-group.
  [[nodiscard]] SLUICE_HD constexpr id<1> get_group_id() const noexcept { return id_; }
  [[nodiscard]] SLUICE_HD constexpr linear_id_type get_group_linear_id() const noexcept {
    return id_;
  }
  /// Sub-groups in the work-group.
  [[nodiscard]] SLUICE_HD constexpr range<1> get_group_range() const noexcept { return groups_; }
  [[nodiscard]] SLUICE_HD constexpr linear_id_type get_group_linear_range() const noexcept {
    return groups_;
  }
  [[nodiscard]] SLUICE_HD constexpr bool leader() const noexcept { return lane_ == 0; }

 private:
  std::uint32_t lane_;
  std::uint32_t id_;
  std::uint32_t groups_;
  std::uint32_t size_;
};

/// Waits until every work-item of `g` reached this call; local memory written before it is
/// visible to the whole group after it. Every work-item of the group must call it equally often.
template <int D>
SLUICE_HD inline void group_barrier(const group<D>& g) {
  (void)g;
  detail::group_barrier_impl();
}

/// Waits until every work-item of the sub-group reached this call.
SLUICE_HD inline void group_barrier(const sub_group& g) {
#if defined(__CUDA_ARCH__)
  const unsigned n = g.get_local_linear_range();
  __syncwarp(n == 32u ? 0xffffffffu : (1u << n) - 1u);
#else
  (void)g;
  detail::host_collective(detail::CollectiveScope::sub_group, nullptr, nullptr);
#endif
}

/// A work-item of an nd_range kernel: global, local and group ids, its groups and the barrier.
template <int D = 1>
class nd_item {
 public:
  static constexpr int dimensions = D;
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
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_global_linear_id() const noexcept {
    return detail::linearize<D>(get_global_id(), get_global_range());
  }
  [[nodiscard]] SLUICE_HD constexpr id<D> get_local_id() const noexcept { return local_id_; }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_local_id(int d) const noexcept {
    return local_id_[d];
  }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_local_linear_id() const noexcept {
    return detail::linearize<D>(local_id_, local_);
  }
  [[nodiscard]] SLUICE_HD constexpr group<D> get_group() const noexcept {
    return {group_, local_id_, groups_, local_};
  }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_group(int d) const noexcept {
    return group_[d];
  }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_group_linear_id() const noexcept {
    return detail::linearize<D>(group_, groups_);
  }
  [[nodiscard]] SLUICE_HD constexpr sub_group get_sub_group() const noexcept {
    return {get_local_linear_id(), local_.size()};
  }
  [[nodiscard]] SLUICE_HD constexpr range<D> get_global_range() const noexcept {
    range<D> g;
    for (int d = 0; d < D; ++d) g[d] = groups_[d] * local_[d];
    return g;
  }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_global_range(int d) const noexcept {
    return groups_[d] * local_[d];
  }
  [[nodiscard]] SLUICE_HD constexpr range<D> get_local_range() const noexcept { return local_; }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_local_range(int d) const noexcept {
    return local_[d];
  }
  [[nodiscard]] SLUICE_HD constexpr range<D> get_group_range() const noexcept { return groups_; }
  [[nodiscard]] SLUICE_HD constexpr std::size_t get_group_range(int d) const noexcept {
    return groups_[d];
  }
  [[nodiscard]] SLUICE_HD constexpr nd_range<D> get_nd_range() const noexcept {
    return {get_global_range(), local_};
  }
  /// Always zero (no offsets; SYCL 2020 deprecated them).
  [[nodiscard]] SLUICE_HD constexpr id<D> get_offset() const noexcept { return id<D>{}; }
  /// The group barrier (`group_barrier(item.get_group())`).
  SLUICE_HD void barrier() const { detail::group_barrier_impl(); }

 private:
  id<D> group_;
  id<D> local_id_;
  range<D> groups_;
  range<D> local_;
};

}  // namespace sluice::dataflow
