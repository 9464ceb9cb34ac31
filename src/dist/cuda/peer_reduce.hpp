#pragma once
// Peer reductions (sluice/ext/dist.hpp's ReducePath::peer): the distributed solvers' small
// gathers as one kernel per rank that stores its partial sums into every other rank's device
// memory (dist_kernels.cu's peer_gather_kernel), where every rank's GPU reaches every other's:
// peer access between the GPUs of one process, CUDA IPC between processes of one node. This
// file makes the mailboxes and the table of where each rank's device reaches them; the NCCL
// engine uses it for its fused gathers. No CUDA header here.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/cuda/dist_kernels.hpp"
#include "sluice/ext/dist.hpp"

struct CUstream_st;

namespace sluice::detail::dist {

class PeerReduce {
 public:
  /// The peer path for `config`'s ranks of this process, or null where it is not taken (one
  /// rank, the engine's path asked for, or `automatic` where some rank's GPU cannot reach
  /// another's). Collective across the communicator's processes, which all decide alike; throws
  /// the same Error on every process where `peer` was asked for and is impossible.
  [[nodiscard]] static std::unique_ptr<PeerReduce> make(const DistEngineConfig& config);
  ~PeerReduce();
  PeerReduce(const PeerReduce&) = delete;
  PeerReduce& operator=(const PeerReduce&) = delete;

  /// Enqueues local rank `local`'s fused gather of `count` (<= kPeerCapacity) doubles on
  /// `stream` (of its device), then `fin` on what it gathered if set.
  void launch(CUstream_st* stream, int local, const double* send, double* recv, std::size_t count,
              const DistFinalizeArgs* fin) const;
  /// The text of a gather that gave up waiting for a peer (its deadline), if one did.
  [[nodiscard]] std::optional<std::string> failure() const;
  /// Makes every gather in flight or to come leave at once (the communicator failed).
  void abort() noexcept;

 private:
  struct Local {
    int device = 0;
    int rank = 0;
    char* mailbox = nullptr;         // this rank's, on its device
    std::uint64_t* epoch = nullptr;  // device
    char** table = nullptr;          // device: every rank's mailbox as this device reaches it
    PeerStatus* status = nullptr;    // pinned, mapped
    std::vector<void*> opened;       // other processes' mailboxes opened through CUDA IPC
    CUstream_st* setup = nullptr;    // the set-up's own stream
  };
  PeerReduce() = default;
  void release() noexcept;

  std::string name_;
  int size_ = 1;
  std::int64_t timeout_ns_ = 0;
  std::int32_t* abort_ = nullptr;  // pinned, mapped, shared by the local ranks
  std::vector<Local> locals_;
};

}  // namespace sluice::detail::dist
