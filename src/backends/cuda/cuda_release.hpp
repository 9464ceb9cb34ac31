#pragma once
// Releases that wait for the whole device.
//
// cudaFreeHost, cudaFree and cudaLibraryUnload (with the cudaDeviceSynchronize before an unload)
// return only once every stream of the device is idle. While sluice's own work is held back on
// the host (a dataflow HostAccessor's gate kernel spins until the accessor goes), such a call on
// the holding thread never returns. And inside a host function CUDA forbids them. So they go
// through here: run at once where both are ruled out, otherwise kept and run when the last hold
// ends (sluice::detail::run_when_unheld) or after the host function (cuda_host_callback.hpp).
// Unloads and executables go to the reaper's thread instead (cuda_reaper.hpp), which comes back
// here only where it cannot start.

#include <functional>

namespace sluice::detail::cuda {

/// Runs `release` now, or later where waiting for the device now could deadlock or is illegal.
void release_device_wide(std::function<void()> release) noexcept;

}  // namespace sluice::detail::cuda
