#pragma once
// Fault injection and live-object counters of the host backend (see sluice/host.hpp).

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace sluice::detail::host {

struct Counters {
  std::atomic<std::size_t> device_allocations{0};
  std::atomic<std::size_t> pinned_allocations{0};
  std::atomic<std::size_t> streams{0};
};
Counters& counters();

/// Throws OutOfMemory if the armed allocation fault fires now.
void maybe_fail_allocation(std::size_t bytes);
/// Throws if the armed operation fault fires now (called by a worker before each operation).
void maybe_fail_operation();

}  // namespace sluice::detail::host
