#pragma once
// Host holds: sluice's own device work that the host keeps back until a thread lets go (a
// dataflow HostAccessor's gate). While one is held, nothing may wait for the whole device (cuda's
// cudaFreeHost, cudaFree, library unloads, a context's or a graph's teardown do), since the
// holder may be the thread that waits. Counted process-wide.

// Private: only sluice's own sources include this file (they define SLUICE_IMPL_PUBLIC_INCLUDE
// around the include).
#ifndef SLUICE_IMPL_PUBLIC_INCLUDE
#error "sluice/detail/contract_holds.hpp is internal to sluice and may change without notice"
#endif

#include <functional>

namespace sluice::detail {

void begin_host_hold() noexcept;
/// Ends a hold; when the last one ends, the releases kept meanwhile run on this thread.
void end_host_hold() noexcept;
[[nodiscard]] bool host_holds_active() noexcept;
/// Runs `release` now if no hold is active, else keeps it until the last hold ends. Releases
/// that may wait for the whole device go through here. Never throws (one that cannot be kept
/// for want of memory is dropped: a leak, never a hang).
void run_when_unheld(std::function<void()> release) noexcept;

}  // namespace sluice::detail
