#pragma once
// The cuda backend's DistKernels (sluice/ext/dist.hpp): NCCL for communication, two small kernels
// for the distributed solvers. No CUDA or NCCL header here: included by host-compiled code.

#include <cstdint>

#include "la/kernel_math.hpp"  // SLUICE_HD
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

// ---- peer reductions (peer_reduce.cpp sets them up) ----

/// Doubles a rank's slot of a peer mailbox holds: the most a fused gather takes per rank.
inline constexpr std::size_t kPeerCapacity = 32;
/// A rank's mailbox on its device: `flags[2][size]` (the epoch each rank's sums carry, by
/// parity), then, 256-byte aligned, `slots[2][size][kPeerCapacity]` doubles.
[[nodiscard]] SLUICE_HD constexpr std::size_t peer_slots_offset(int size) noexcept {
  return (2 * static_cast<std::size_t>(size) * sizeof(std::uint64_t) + 255) / 256 * 256;
}
[[nodiscard]] constexpr std::size_t peer_mailbox_bytes(int size) noexcept {
  return peer_slots_offset(size) + 2 * static_cast<std::size_t>(size) * kPeerCapacity * 8;
}

/// What a peer gather kernel leaves in pinned host memory when it gives up waiting.
struct PeerStatus {
  std::uint64_t epoch = 0;  ///< the rank's reduction (1, 2, ...) that gave up
  std::int32_t peer = -1;   ///< the rank whose sums did not come
  std::int32_t reason = 0;  ///< 0: none; kPeerDeadline: its deadline passed
};
inline constexpr std::int32_t kPeerDeadline = 2;

/// One rank's fused gather (peer_gather_kernel in dist_kernels.cu).
struct PeerGatherArgs {
  char* const* mail = nullptr;          ///< device: every rank's mailbox as this device reaches it
  std::uint64_t* epoch = nullptr;       ///< device: this rank's count of fused gathers
  const std::int32_t* abort = nullptr;  ///< pinned, mapped: non-zero once communication failed
  PeerStatus* status = nullptr;         ///< pinned, mapped: this rank's
  std::int64_t timeout_ns = 0;          ///< 0: wait until the peers come or `abort` is set
  std::int32_t rank = 0;
  std::int32_t size = 1;
  const double* send = nullptr;  ///< `count` doubles
  double* recv = nullptr;        ///< `count` doubles of every rank, in rank order
  std::int32_t count = 0;
  bool finalize = false;  ///< then `fin` on recv (fin.gathered == recv)
  DistFinalizeArgs fin;
};

/// Enqueues the fused gather on `stream` (a stream of the rank's device) and checks the launch.
void launch_peer_gather(CUstream_st* stream, const PeerGatherArgs& args);

}  // namespace sluice::detail::dist
