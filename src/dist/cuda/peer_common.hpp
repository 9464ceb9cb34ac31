#pragma once
// What the peer paths' set-ups share (peer_reduce.cpp, peer_exchange.cpp): a CUDA call's failure
// as a reason that turns the path off, and every process's reason, so that all decide alike.

#include <cuda_runtime_api.h>

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
