#pragma once
// Releases that must wait for the device's earlier work, done on a thread of their own.
//
// cudaGraphExecDestroy is documented to free an executable in flight asynchronously, but it can
// wait for work on other streams: on an H100 with CUDA 13 it held the destroying thread for as
// long as a kernel spun on another context's stream (a re-instantiation in Replay::run, 20 memset,
// copy and batched kernel nodes, none in flight; a plain graph of the same kinds did not wait).
// And it holds a driver lock meanwhile: every CUDA call of every other thread waits with it. A
// library's unload must wait for the launches that may still run its code (cudaDeviceSynchronize).
// Dropping a program, a kernel or an executable must never make the dropping thread wait for
// unrelated device work, nor deadlock when that work waits for the thread (a held accessor, a
// test's gate). So these go to a worker that first waits with cudaDeviceSynchronize, which holds
// no lock other threads' calls need, for the work issued before they were handed over (only that:
// later work cannot starve it), then runs them in the order they were handed over. An executable
// is handed over before the kernels it names can be (its graph keeps them alive), so it is
// destroyed before their library is unloaded.

#include <cuda_runtime_api.h>

#include <functional>
#include <shared_mutex>
#include <vector>

namespace sluice::detail::cuda {

/// A stream capture invalidates when any thread synchronizes the device meanwhile (even in
/// relaxed mode): sluice's captures hold this shared from begin to end, the reaper's
/// cudaDeviceSynchronize holds it exclusive (a capture may then wait for the device's work).
[[nodiscard]] std::shared_mutex& capture_exclusion() noexcept;

/// Runs `release` on the reaper's thread (started on first use), with `device` current, once the
/// device's work issued before this call has completed. Never throws; where the thread cannot be
/// had (out of memory, no threads, the process exiting), runs it after a cudaDeviceSynchronize
/// through release_device_wide (cuda_release.hpp), as every such release ran before the reaper.
void after_device_work(int device, std::function<void()> release) noexcept;

/// What a destroyed executable graph leaves: destroyed in this order (the executable first: its
/// event nodes name the events).
struct RetiredExec {
  int device = 0;
  cudaGraphExec_t exec = nullptr;
  cudaGraph_t source = nullptr;
  std::vector<cudaEvent_t> events;
};

/// Destroys `retired` through after_device_work.
void destroy_exec_later(RetiredExec retired) noexcept;

/// Unloads `libraries` of `device` through after_device_work: after the launches that may still
/// run their code and the executables handed over before (whose kernel nodes may name them).
void unload_libraries_later(int device, std::vector<cudaLibrary_t> libraries) noexcept;

}  // namespace sluice::detail::cuda
