#pragma once
/// @file
/// Unified shared memory (reference 004): allocations addressed by plain pointers, ordered by
/// events as in SYCL, or by the tracker when a command group declares them with `Handler::use`.

#include <cstddef>
#include <cstdint>
#include <source_location>

#include "sluice/dataflow/queue.hpp"
#include "sluice/error.hpp"

namespace sluice::dataflow {

/// Where a USM allocation lives.
enum class UsmKind : std::uint8_t {
  device,  ///< device memory: kernels only
  host,    ///< page-locked host memory the device reads over the bus
  shared,  ///< managed memory that migrates on demand (host memory on the host device)
};

namespace detail {
void* usm_allocate(const Queue& q, std::size_t bytes, UsmKind kind, std::source_location loc);
void usm_free(void* ptr, std::source_location loc);
}  // namespace detail

/// `count` elements of device memory of `q`'s device; OutOfMemory beyond what it has.
template <class T>
[[nodiscard]] T* malloc_device(std::size_t count, const Queue& q,
                               std::source_location loc = std::source_location::current()) {
  return static_cast<T*>(detail::usm_allocate(q, count * sizeof(T), UsmKind::device, loc));
}
/// `count` elements of page-locked host memory that `q`'s device can read and write.
template <class T>
[[nodiscard]] T* malloc_host(std::size_t count, const Queue& q,
                             std::source_location loc = std::source_location::current()) {
  return static_cast<T*>(detail::usm_allocate(q, count * sizeof(T), UsmKind::host, loc));
}
/// `count` elements of memory both the host and `q`'s device may touch (cuda managed memory;
/// never more than the device has free).
template <class T>
[[nodiscard]] T* malloc_shared(std::size_t count, const Queue& q,
                               std::source_location loc = std::source_location::current()) {
  return static_cast<T*>(detail::usm_allocate(q, count * sizeof(T), UsmKind::shared, loc));
}
/// Frees USM memory. As in SYCL, work that uses it must have completed (wait for its events) —
/// except for work that declared it with `Handler::use`, which the free waits for itself.
inline void free(void* ptr, const Queue& q,
                 std::source_location loc = std::source_location::current()) {
  (void)q;
  detail::usm_free(ptr, loc);
}

}  // namespace sluice::dataflow
