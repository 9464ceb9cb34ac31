#pragma once
/// @file
/// Host-backend specifics: fault injection and live-object counts for tests.
///
/// The fault-injection switch lets a test prove that a failure leaves no leak, no hang and no
/// corrupted state: arm it, run work, check that the failure surfaced once and that
/// `live_counts()` returns to what it was.

#include <cstddef>
#include <cstdint>

namespace sluice::host {

/// Makes the `n`-th host-backend allocation from now (1 = the next) throw OutOfMemory.
/// Counts device, pool and pinned allocations. 0 disarms.
void fail_nth_allocation(std::uint64_t n);
/// Makes the `n`-th host-backend operation executed from now (1 = the next) fail inside the
/// worker, as if the work itself had thrown. 0 disarms.
void fail_nth_operation(std::uint64_t n);
/// Disarms both switches.
void clear_faults();

/// Objects the host backend holds right now.
struct LiveCounts {
  std::size_t device_allocations = 0;  ///< blocks handed out by the pool and not yet returned
  std::size_t pinned_allocations = 0;
  std::size_t streams = 0;  ///< worker threads
  friend bool operator==(const LiveCounts&, const LiveCounts&) = default;
};
[[nodiscard]] LiveCounts live_counts();

}  // namespace sluice::host
