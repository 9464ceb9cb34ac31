#pragma once
// Executable graphs destroyed on a thread of their own.
//
// cudaGraphExecDestroy is documented to free an executable in flight asynchronously, but it can
// wait for work on other streams: on an H100 with CUDA 13 it held the destroying thread for as
// long as a kernel spun on another context's stream (a re-instantiation in Replay::run, 20 memset,
// copy and batched kernel nodes, none in flight; a plain graph of the same kinds did not wait).
// And it holds a driver lock meanwhile: every CUDA call of every other thread waits with it.
// A re-instantiation, a cache eviction or a dropped GraphExec must never make the issuing thread
// wait for unrelated device work, and may not deadlock when that work waits for the thread. So
// the destroy happens on a worker, after a cudaDeviceSynchronize there (which waits for the work
// issued before, holding no lock that other threads' calls need); what the executable's launches
// use is kept by the graph's orphans until they completed, as before.

#include <cuda_runtime_api.h>

#include <vector>

namespace sluice::detail::cuda {

/// What a destroyed executable graph leaves: destroyed on the reaper's thread in this order
/// (the executable first: its event nodes name the events).
struct RetiredExec {
  int device = 0;
  cudaGraphExec_t exec = nullptr;
  cudaGraph_t source = nullptr;
  std::vector<cudaEvent_t> events;
};

/// Destroys `retired` on the reaper's thread (started on first use). Never throws; if the thread
/// cannot be had (out of memory, no threads, the process exiting), destroys it here.
void destroy_exec_later(RetiredExec retired) noexcept;

/// Blocks until every destroy handed over so far has finished: before unloading a library whose
/// kernels an executable handed over may name.
void drain_exec_reaper() noexcept;

}  // namespace sluice::detail::cuda
