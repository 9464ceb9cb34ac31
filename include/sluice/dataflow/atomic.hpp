#pragma once
/// @file
/// `atomic_ref` (SYCL 2020 §4.15.3): atomic operations on an object in global (buffer, USM) or
/// local (`local_accessor`) memory, with memory orders and scopes. On the host backend it is
/// `std::atomic_ref` (real atomics: work-items of a range kernel run on several threads); in
/// device code compiled through <sluice/dataflow_cuda.cuh> it is libcu++'s `cuda::atomic_ref`
/// with the matching thread scope.
///
/// @code
/// q.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) {
///   df::atomic_ref<int, df::memory_order::relaxed, df::memory_scope::device> count(*counter);
///   if (data[i] > 0) count.fetch_add(1);
/// });
/// @endcode

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "sluice/dataflow/range.hpp"

#if defined(__CUDACC__)
#include <cuda/atomic>
#endif

namespace sluice::dataflow {

/// SYCL 2020's memory orders (C++'s, without `consume`).
enum class memory_order : std::uint8_t { relaxed, acquire, release, acq_rel, seq_cst };
/// Which work-items an atomic operation or fence must be consistent with.
enum class memory_scope : std::uint8_t { work_item, sub_group, work_group, device, system };

namespace access {
/// Where the referenced object lives: a hint in SYCL; every space works the same here.
enum class address_space : std::uint8_t { global_space, local_space, generic_space };
}  // namespace access

namespace detail {
template <class T>
inline constexpr bool is_atomic_type_v =
    std::is_same_v<T, int> || std::is_same_v<T, unsigned int> || std::is_same_v<T, long> ||
    std::is_same_v<T, unsigned long> || std::is_same_v<T, long long> ||
    std::is_same_v<T, unsigned long long> || std::is_same_v<T, float> ||
    std::is_same_v<T, double> || std::is_pointer_v<T>;

/// The load order that a default order implies (SYCL: acq_rel loads acquire, stores release).
SLUICE_HD constexpr memory_order read_order(memory_order o) noexcept {
  return o == memory_order::acq_rel || o == memory_order::release ? memory_order::acquire : o;
}
SLUICE_HD constexpr memory_order write_order(memory_order o) noexcept {
  return o == memory_order::acq_rel || o == memory_order::acquire ? memory_order::release : o;
}
/// The order of a failed compare-exchange: no release part.
SLUICE_HD constexpr memory_order failure_order(memory_order o) noexcept {
  return o == memory_order::acq_rel   ? memory_order::acquire
         : o == memory_order::release ? memory_order::relaxed
                                      : o;
}

#if defined(__CUDA_ARCH__)
__device__ inline cuda::std::memory_order to_native(memory_order o) {
  switch (o) {
    case memory_order::relaxed:
      return cuda::std::memory_order_relaxed;
    case memory_order::acquire:
      return cuda::std::memory_order_acquire;
    case memory_order::release:
      return cuda::std::memory_order_release;
    case memory_order::acq_rel:
      return cuda::std::memory_order_acq_rel;
    case memory_order::seq_cst:
      return cuda::std::memory_order_seq_cst;
  }
  return cuda::std::memory_order_seq_cst;
}
/// Calls `f(cuda::atomic_ref<T, scope>)` with the libcu++ scope of `s`: work-items and
/// sub-groups are threads of one block, so both are block scope.
template <class T, class F>
__device__ inline decltype(auto) with_scope(T& obj, memory_scope s, F&& f) {
  switch (s) {
    case memory_scope::work_item:
    case memory_scope::sub_group:
    case memory_scope::work_group:
      return f(cuda::atomic_ref<T, cuda::thread_scope_block>(obj));
    case memory_scope::device:
      return f(cuda::atomic_ref<T, cuda::thread_scope_device>(obj));
    case memory_scope::system:
      break;
  }
  return f(cuda::atomic_ref<T, cuda::thread_scope_system>(obj));
}
#else
inline std::memory_order to_native(memory_order o) {
  switch (o) {
    case memory_order::relaxed:
      return std::memory_order_relaxed;
    case memory_order::acquire:
      return std::memory_order_acquire;
    case memory_order::release:
      return std::memory_order_release;
    case memory_order::acq_rel:
      return std::memory_order_acq_rel;
    case memory_order::seq_cst:
      return std::memory_order_seq_cst;
  }
  return std::memory_order_seq_cst;
}
#endif
}  // namespace detail

/// Orders memory accesses of the calling work-item as `order` does, for work-items in `scope`.
SLUICE_HD inline void atomic_fence(memory_order order, memory_scope scope) {
#if defined(__CUDA_ARCH__)
  if (order == memory_order::relaxed) return;
  switch (scope) {
    case memory_scope::work_item:
    case memory_scope::sub_group:
    case memory_scope::work_group:
      return cuda::atomic_thread_fence(detail::to_native(order), cuda::thread_scope_block);
    case memory_scope::device:
      return cuda::atomic_thread_fence(detail::to_native(order), cuda::thread_scope_device);
    case memory_scope::system:
      return cuda::atomic_thread_fence(detail::to_native(order), cuda::thread_scope_system);
  }
#else
  (void)scope;
  if (order != memory_order::relaxed) std::atomic_thread_fence(detail::to_native(order));
#endif
}

/// Atomic operations on `T` (int, unsigned int, long, unsigned long, long long, unsigned long
/// long, float, double, or a pointer) referenced in memory the kernel may touch. `DefaultOrder`
/// is relaxed, acq_rel or seq_cst: loads use its acquire part, stores its release part.
/// `DefaultScope` is the default of every operation's scope argument.
template <class T, memory_order DefaultOrder, memory_scope DefaultScope,
          access::address_space Space = access::address_space::generic_space>
class atomic_ref {
  static_assert(detail::is_atomic_type_v<T>,
                "atomic_ref<T>: T must be int, unsigned int, long, unsigned long, long long, "
                "unsigned long long, float, double or a pointer (SYCL 2020 4.15.3)");
  static_assert(DefaultOrder == memory_order::relaxed || DefaultOrder == memory_order::acq_rel ||
                    DefaultOrder == memory_order::seq_cst,
                "atomic_ref: the default order must be relaxed, acq_rel or seq_cst");
  static constexpr bool integral = std::is_integral_v<T>;
  static constexpr bool arithmetic = std::is_arithmetic_v<T>;

 public:
  using value_type = T;
  using difference_type = std::conditional_t<std::is_pointer_v<T>, std::ptrdiff_t, T>;
  static constexpr std::size_t required_alignment = alignof(T);
  static constexpr bool is_always_lock_free = true;
  static constexpr memory_order default_read_order = detail::read_order(DefaultOrder);
  static constexpr memory_order default_write_order = detail::write_order(DefaultOrder);
  static constexpr memory_order default_read_modify_write_order = DefaultOrder;
  static constexpr memory_scope default_scope = DefaultScope;
  static constexpr access::address_space address_space = Space;

  SLUICE_HD explicit atomic_ref(T& ref) noexcept : ptr_(&ref) {}
  atomic_ref(const atomic_ref&) noexcept = default;
  atomic_ref& operator=(const atomic_ref&) = delete;

  [[nodiscard]] SLUICE_HD bool is_lock_free() const noexcept { return true; }

  SLUICE_HD void store(T v, memory_order o = default_write_order,
                       memory_scope s = DefaultScope) const noexcept {
#if defined(__CUDA_ARCH__)
    detail::with_scope(*ptr_, s, [&](auto a) { a.store(v, detail::to_native(o)); });
#else
    (void)s;
    std::atomic_ref<T>(*ptr_).store(v, detail::to_native(o));
#endif
  }
  SLUICE_HD T operator=(T v) const noexcept {
    store(v);
    return v;
  }
  [[nodiscard]] SLUICE_HD T load(memory_order o = default_read_order,
                                 memory_scope s = DefaultScope) const noexcept {
#if defined(__CUDA_ARCH__)
    return detail::with_scope(*ptr_, s, [&](auto a) { return a.load(detail::to_native(o)); });
#else
    (void)s;
    return std::atomic_ref<T>(*ptr_).load(detail::to_native(o));
#endif
  }
  SLUICE_HD operator T() const noexcept {
    return load();
  }

  SLUICE_HD T exchange(T v, memory_order o = DefaultOrder,
                       memory_scope s = DefaultScope) const noexcept {
#if defined(__CUDA_ARCH__)
    return detail::with_scope(*ptr_, s,
                              [&](auto a) { return a.exchange(v, detail::to_native(o)); });
#else
    (void)s;
    return std::atomic_ref<T>(*ptr_).exchange(v, detail::to_native(o));
#endif
  }

  /// Replaces the value with `desired` if it equals `expected` (true); otherwise loads it into
  /// `expected` (false). The weak form may fail spuriously.
  SLUICE_HD bool compare_exchange_strong(T& expected, T desired, memory_order success,
                                         memory_order failure,
                                         memory_scope s = DefaultScope) const noexcept {
#if defined(__CUDA_ARCH__)
    return detail::with_scope(*ptr_, s, [&](auto a) {
      return a.compare_exchange_strong(expected, desired, detail::to_native(success),
                                       detail::to_native(failure));
    });
#else
    (void)s;
    return std::atomic_ref<T>(*ptr_).compare_exchange_strong(
        expected, desired, detail::to_native(success), detail::to_native(failure));
#endif
  }
  SLUICE_HD bool compare_exchange_strong(T& expected, T desired, memory_order o = DefaultOrder,
                                         memory_scope s = DefaultScope) const noexcept {
    return compare_exchange_strong(expected, desired, o, detail::failure_order(o), s);
  }
  SLUICE_HD bool compare_exchange_weak(T& expected, T desired, memory_order success,
                                       memory_order failure,
                                       memory_scope s = DefaultScope) const noexcept {
#if defined(__CUDA_ARCH__)
    return detail::with_scope(*ptr_, s, [&](auto a) {
      return a.compare_exchange_weak(expected, desired, detail::to_native(success),
                                     detail::to_native(failure));
    });
#else
    (void)s;
    return std::atomic_ref<T>(*ptr_).compare_exchange_weak(
        expected, desired, detail::to_native(success), detail::to_native(failure));
#endif
  }
  SLUICE_HD bool compare_exchange_weak(T& expected, T desired, memory_order o = DefaultOrder,
                                       memory_scope s = DefaultScope) const noexcept {
    return compare_exchange_weak(expected, desired, o, detail::failure_order(o), s);
  }

  /// Adds `v` (for a pointer: `v` elements); returns the previous value.
  SLUICE_HD T fetch_add(difference_type v, memory_order o = DefaultOrder,
                        memory_scope s = DefaultScope) const noexcept {
#if defined(__CUDA_ARCH__)
    return detail::with_scope(*ptr_, s,
                              [&](auto a) { return a.fetch_add(v, detail::to_native(o)); });
#else
    (void)s;
    return std::atomic_ref<T>(*ptr_).fetch_add(v, detail::to_native(o));
#endif
  }
  SLUICE_HD T fetch_sub(difference_type v, memory_order o = DefaultOrder,
                        memory_scope s = DefaultScope) const noexcept {
#if defined(__CUDA_ARCH__)
    return detail::with_scope(*ptr_, s,
                              [&](auto a) { return a.fetch_sub(v, detail::to_native(o)); });
#else
    (void)s;
    return std::atomic_ref<T>(*ptr_).fetch_sub(v, detail::to_native(o));
#endif
  }
  /// Stores the smaller of the value and `v`; returns the previous value.
  SLUICE_HD T fetch_min(T v, memory_order o = DefaultOrder,
                        memory_scope s = DefaultScope) const noexcept requires arithmetic {
#if defined(__CUDA_ARCH__)
    return detail::with_scope(*ptr_, s,
                              [&](auto a) { return a.fetch_min(v, detail::to_native(o)); });
#else
    return update(o, s, [v](T old) { return v < old ? v : old; });
#endif
  }
  /// Stores the larger of the value and `v`; returns the previous value.
  SLUICE_HD T fetch_max(T v, memory_order o = DefaultOrder,
                        memory_scope s = DefaultScope) const noexcept requires arithmetic {
#if defined(__CUDA_ARCH__)
    return detail::with_scope(*ptr_, s,
                              [&](auto a) { return a.fetch_max(v, detail::to_native(o)); });
#else
    return update(o, s, [v](T old) { return old < v ? v : old; });
#endif
  }
  SLUICE_HD T fetch_and(T v, memory_order o = DefaultOrder,
                        memory_scope s = DefaultScope) const noexcept requires integral {
#if defined(__CUDA_ARCH__)
    return detail::with_scope(*ptr_, s,
                              [&](auto a) { return a.fetch_and(v, detail::to_native(o)); });
#else
    (void)s;
    return std::atomic_ref<T>(*ptr_).fetch_and(v, detail::to_native(o));
#endif
  }
  SLUICE_HD T fetch_or(T v, memory_order o = DefaultOrder,
                       memory_scope s = DefaultScope) const noexcept requires integral {
#if defined(__CUDA_ARCH__)
    return detail::with_scope(*ptr_, s,
                              [&](auto a) { return a.fetch_or(v, detail::to_native(o)); });
#else
    (void)s;
    return std::atomic_ref<T>(*ptr_).fetch_or(v, detail::to_native(o));
#endif
  }
  SLUICE_HD T fetch_xor(T v, memory_order o = DefaultOrder,
                        memory_scope s = DefaultScope) const noexcept requires integral {
#if defined(__CUDA_ARCH__)
    return detail::with_scope(*ptr_, s,
                              [&](auto a) { return a.fetch_xor(v, detail::to_native(o)); });
#else
    (void)s;
    return std::atomic_ref<T>(*ptr_).fetch_xor(v, detail::to_native(o));
#endif
  }

  SLUICE_HD T operator+=(difference_type v) const noexcept {
    return fetch_add(v) + v;
  }
  SLUICE_HD T operator-=(difference_type v) const noexcept {
    return fetch_sub(v) - v;
  }
  SLUICE_HD T operator++() const noexcept requires(!std::is_floating_point_v<T>) {
    return fetch_add(1) + 1;
  }
  SLUICE_HD T operator++(int) const noexcept requires(!std::is_floating_point_v<T>) {
    return fetch_add(1);
  }
  SLUICE_HD T operator--() const noexcept requires(!std::is_floating_point_v<T>) {
    return fetch_sub(1) - 1;
  }
  SLUICE_HD T operator--(int) const noexcept requires(!std::is_floating_point_v<T>) {
    return fetch_sub(1);
  }
  SLUICE_HD T operator&=(T v) const noexcept requires integral {
    return fetch_and(v) & v;
  }
  SLUICE_HD T operator|=(T v) const noexcept requires integral {
    return fetch_or(v) | v;
  }
  SLUICE_HD T operator^=(T v) const noexcept requires integral {
    return fetch_xor(v) ^ v;
  }

 private:
#if !defined(__CUDA_ARCH__)
  /// A compare-exchange loop applying `next(old)`; returns the value it replaced.
  template <class F>
  T update(memory_order o, memory_scope, F next) const noexcept {
    std::atomic_ref<T> a(*ptr_);
    T old = a.load(std::memory_order_relaxed);
    while (!a.compare_exchange_weak(old, next(old), detail::to_native(o),
                                    detail::to_native(detail::failure_order(o)))) {
    }
    return old;
  }
#endif
  T* ptr_;
};

}  // namespace sluice::dataflow
