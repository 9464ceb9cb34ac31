#pragma once
// Fences over every sluice stream of a device: what a release waits for instead of
// cudaDeviceSynchronize. A device synchronize while any stream of the device is being captured
// invalidates that capture, relaxed mode or not (under ctest -j10 a lazy product's recording and
// a KSP graph-mode capture failed so when the reaper synchronized); an event recorded on each
// stream that is not being captured, waited for on its own, touches no capture.

#include <cuda_runtime_api.h>

#include <memory>
#include <optional>
#include <vector>

namespace sluice::detail::cuda {

/// Streams of sluice (CudaStream) register themselves: their handle, device, and whether a
/// capture is under way on them (no fence is recorded on a stream then: it would join the
/// capture).
void register_stream(cudaStream_t stream, int device);
/// A stream about to be destroyed: a last fence is kept for the work still queued on it, until
/// it completes.
void unregister_stream(cudaStream_t stream) noexcept;
/// Marks a capture on `stream` begun or ended (set before cudaStreamBeginCapture, cleared after
/// cudaStreamEndCapture).
void set_capturing(cudaStream_t stream, bool capturing) noexcept;

using Fence = std::shared_ptr<CUevent_st>;
/// Events that complete once the work issued so far on every sluice stream of `device` has
/// (a stream under capture, by sluice or by its owner, is fenced once its capture ends: captures
/// record, they do not wait on the device). Nothing where an event could not be had.
[[nodiscard]] std::optional<std::vector<Fence>> fence_device(int device) noexcept;
/// fence_device, then waits for each fence; false if a fence could not be made or waited for
/// (the caller then synchronizes the device).
bool wait_for_streams(int device) noexcept;

}  // namespace sluice::detail::cuda
