#pragma once
// What the peer paths' set-ups share (peer_reduce.cpp, peer_exchange.cpp): each rank's record of
// its buffer, how a rank reaches another's, a CUDA call's failure as a reason that turns the path
// off, and every process's reason, so that all decide alike.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.hpp"
#include "dist/process.hpp"

namespace sluice::detail::dist {

/// Empty, or why `err` of `what` on cuda:`device` stops the peer path (the error cleared).
inline std::string peer_why(cudaError_t err, const char* what, int device) {
  if (err == cudaSuccess) return {};
  cuda::clear_error();
  return std::string(what) + " on cuda:" + std::to_string(device) +
         " failed: " + cuda::describe(err);
}

/// What each rank tells the others of its buffer (sent over MPI as bytes).
struct PeerRecord {
  std::int32_t rank = 0;
  std::int32_t device = 0;
  char node[64] = {};
  cudaIpcMemHandle_t handle{};
};

/// How local rank `rank` on cuda:`device` reaches rank q's buffer (`what`, for the reasons): a
/// rank of this process (`in_process`) by its pointer `local` on cuda:`local_device`, with peer
/// access turned on where the devices differ; another process's of this node through CUDA IPC
/// from its record `r` (the mapping added to `opened`). Sets `reason` where it cannot; the
/// result is null where nothing was opened.
inline char* reach_rank(int device, int rank, int q, const PeerRecord& r, bool in_process,
                        char* local, int local_device, const std::string& node, const char* what,
                        std::vector<void*>& opened, std::string& reason) {
  if (in_process) {
    if (local_device == device) return local;
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, device, local_device) != cudaSuccess || can == 0) {
      cuda::clear_error();
      reason = "cuda:" + std::to_string(device) +
               " cannot reach the memory of cuda:" + std::to_string(local_device) +
               " (no peer access)";
      return local;
    }
    const cudaError_t e = cudaDeviceEnablePeerAccess(local_device, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      cuda::clear_error();
    } else {
      reason = peer_why(e, "cudaDeviceEnablePeerAccess", device);
    }
    return local;
  }
  if (std::strncmp(r.node, node.c_str(), sizeof r.node - 1) != 0) {
    reason = "rank " + std::to_string(q) + " runs on node " + std::string(r.node) + " and rank " +
             std::to_string(rank) + " on " + node;
    return nullptr;
  }
  void* mapped = nullptr;
  const cudaError_t e = cudaIpcOpenMemHandle(&mapped, r.handle, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    reason = peer_why(e, "cudaIpcOpenMemHandle", device) + " (rank " + std::to_string(rank) +
             " opening rank " + std::to_string(q) + "'s " + what +
             ", on cuda:" + std::to_string(r.device) + " of its process)";
    return nullptr;
  }
  opened.push_back(mapped);
  return static_cast<char*>(mapped);
}

/// Process p's reason (empty: none) from the concatenation of every process's text.
inline std::vector<std::string> gather_reasons(const ProcComm& procs, const std::string& mine) {
  const auto bytes = procs.allgatherv(std::as_bytes(std::span(mine.data(), mine.size() + 1)));
  std::vector<std::string> out;
  const char* p = reinterpret_cast<const char*>(bytes.data());
  const char* end = p + bytes.size();
  while (p < end) {
    out.emplace_back(p);
    p += out.back().size() + 1;
  }
  return out;
}

}  // namespace sluice::detail::dist
