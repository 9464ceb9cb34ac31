#pragma once
// The cuda backend's DistKernels (sluice/ext/dist.hpp): NCCL for communication, two small kernels
// for the distributed solvers. No CUDA or NCCL header here: included by host-compiled code.

#include <cstdint>

#include "sluice/ext/dist.hpp"

struct CUstream_st;

namespace sluice::detail::dist {

[[nodiscard]] DistKernels& cuda_dist_kernels();

/// The words of a collective's signature that every rank compares (call, type, op, root, count).
inline constexpr std::size_t kSignatureWords = 5;
struct SignatureWords {
  std::uint64_t w[kSignatureWords];
};

/// Writes `words` to device memory `dst` on `stream` (passed by value: no host memory has to
/// outlive the call, and a captured graph replays the same values). Checks the launch.
void write_signature(CUstream_st* stream, std::uint64_t* dst, const SignatureWords& words);

}  // namespace sluice::detail::dist
