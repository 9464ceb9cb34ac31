// Peer reductions: the mailboxes of dist_kernels.cu's fused gather, and where each rank's device
// reaches every other rank's (peer_reduce.hpp).
//
// Set-up, collective across the communicator's processes (the user's thread, in program order):
// every local rank allocates its mailbox (cudaMalloc: CUDA IPC exports no pool memory) and the
// processes exchange its CUDA IPC handle and node over the communicator's set-up channel. Each
// local rank then reaches every rank's mailbox: its own directly, another local rank's through
// peer access (cudaDeviceEnablePeerAccess), another process's through cudaIpcOpenMemHandle on
// its device. Every process then tells the others whether all of that worked, so that all take
// the same path: one reduction done by peer stores on one rank and by ncclAllGather on another
// would wait for ever.
//
// Why a waiting gather cannot deadlock. Every rank issues the same reductions in the same order
// (as NCCL requires of its allgather, which this replaces). A rank's communication, this gather
// included, runs in issue order: it reads and writes the rank's ordering object (CommState::
// order), so the gather starts only after the rank's earlier exchanges and gathers (on any of
// its streams) have completed, and its later ones wait for it. The gather waits for the peers'
// k-th gathers only. A peer reaches its k-th gather after its own earlier communication (which
// matches this rank's, already complete) and its local kernels (which wait for nothing of this
// rank): nothing it needs is ordered after this rank's spinning kernel. The kernel is one block
// of 32 threads, so the device runs other streams' work beside it (the next ghost exchange, on
// the exchange stream, is ordered after it and does not need a free SM before it ends). It is
// loaded with the module's kernels before a process's several GPUs start (kernel_preload.hpp),
// so its first launch never waits for a device. A peer that fails sets the process's failure
// state (its notice reaches this process); the engine's watchdog then sets `abort`, which the
// spinning kernel polls, and it returns; a peer that never comes and never fails is caught by
// the deadline (SLUICE_DIST_TIMEOUT seconds, measured on the GPU's clock), reported through the
// same watchdog as a failure of every process.

#include "dist/cuda/peer_reduce.hpp"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "dist/cuda/peer_common.hpp"
#include "dist/placement.hpp"
#include "dist/process.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::dist {
namespace {

using sluice::detail::cuda::DeviceGuard;

/// What a process tells the others of each of its ranks.
using Record = PeerRecord;

}  // namespace

std::unique_ptr<PeerReduce> PeerReduce::make(const DistEngineConfig& config) {
  if (config.reduce == ReducePath::engine || config.size < 2) return nullptr;
  const auto* transport = static_cast<const HostTransport*>(config.transport.get());
  if (transport == nullptr || !transport->procs) return nullptr;
  const ProcComm& procs = *transport->procs;
  std::unique_ptr<PeerReduce> pr(new PeerReduce);
  pr->name_ = config.name;
  pr->size_ = config.size;
  const double limit = timeout_seconds();
  pr->timeout_ns_ = limit > 0 ? static_cast<std::int64_t>(std::ceil(limit * 1e9)) : 0;
  const std::size_t bytes = peer_mailbox_bytes(config.size);
  const std::string node = sluice::dist::detail::node_name();

  // Errors are kept, not thrown, until every process has said how it fared: a process that
  // threw here would leave the others waiting in the exchange.
  std::string reason;
  if (auto e = cudaHostAlloc(reinterpret_cast<void**>(&pr->abort_), sizeof(std::int32_t),
                             cudaHostAllocMapped | cudaHostAllocPortable);
      e != cudaSuccess) {
    reason = peer_why(e, "cudaHostAlloc (peer reductions)", config.contexts.front().device().index);
    pr->abort_ = nullptr;
  } else {
    *pr->abort_ = 0;
  }
  std::vector<Record> mine(config.contexts.size());
  pr->locals_.resize(config.contexts.size());
  for (std::size_t l = 0; l < config.contexts.size(); ++l) {
    Local& loc = pr->locals_[l];
    loc.device = config.contexts[l].device().index;
    loc.rank = config.ranks[l];
    Record& r = mine[l];
    r.rank = loc.rank;
    r.device = loc.device;
    std::strncpy(r.node, node.c_str(), sizeof r.node - 1);
    if (!reason.empty()) continue;
    DeviceGuard guard(loc.device);
    void* status = nullptr;
    if (reason = peer_why(cudaMalloc(reinterpret_cast<void**>(&loc.mailbox), bytes),
                          "cudaMalloc (peer mailbox)", loc.device);
        !reason.empty()) {
      loc.mailbox = nullptr;
    } else if (reason = peer_why(cudaStreamCreateWithFlags(&loc.setup, cudaStreamNonBlocking),
                                 "cudaStreamCreate (peer set-up)", loc.device);
               !reason.empty()) {
      loc.setup = nullptr;
    } else if (reason = peer_why(cudaMemsetAsync(loc.mailbox, 0, bytes, loc.setup),
                                 "cudaMemset (peer mailbox)", loc.device);
               !reason.empty()) {
    } else if (reason = peer_why(cudaIpcGetMemHandle(&r.handle, loc.mailbox),
                                 "cudaIpcGetMemHandle (peer mailbox)", loc.device);
               !reason.empty()) {
    } else if (reason =
                   peer_why(cudaMalloc(reinterpret_cast<void**>(&loc.epoch), sizeof(std::uint64_t)),
                            "cudaMalloc (peer epoch)", loc.device);
               !reason.empty()) {
      loc.epoch = nullptr;
    } else if (reason = peer_why(cudaMemsetAsync(loc.epoch, 0, sizeof(std::uint64_t), loc.setup),
                                 "cudaMemset (peer epoch)", loc.device);
               !reason.empty()) {
    } else if (reason = peer_why(cudaMalloc(reinterpret_cast<void**>(&loc.table),
                                            sizeof(char*) * static_cast<std::size_t>(config.size)),
                                 "cudaMalloc (peer table)", loc.device);
               !reason.empty()) {
      loc.table = nullptr;
    } else if (reason = peer_why(cudaHostAlloc(&status, sizeof(PeerStatus),
                                               cudaHostAllocMapped | cudaHostAllocPortable),
                                 "cudaHostAlloc (peer status)", loc.device);
               !reason.empty()) {
    } else {
      loc.status = new (status) PeerStatus{};
    }
    // A stream of its own: a device-wide synchronize could wait for another communicator's
    // collective, whose peers may be making this one.
    if (reason.empty())
      reason = peer_why(cudaStreamSynchronize(loc.setup), "peer set-up", loc.device);
  }

  // Every rank's mailbox and node, in rank order (ranks are numbered process by process).
  const auto all_bytes = procs.allgatherv(std::as_bytes(std::span(mine)));
  std::vector<Record> all(all_bytes.size() / sizeof(Record));
  std::memcpy(all.data(), all_bytes.data(), all.size() * sizeof(Record));
  const int first = config.ranks.front();
  const int count = static_cast<int>(config.ranks.size());
  if (reason.empty() && static_cast<int>(all.size()) != config.size) {
    reason = "the processes announced " + std::to_string(all.size()) + " ranks, not " +
             std::to_string(config.size);
  }
  for (std::size_t l = 0; l < pr->locals_.size() && reason.empty(); ++l) {
    Local& loc = pr->locals_[l];
    std::vector<char*> table(static_cast<std::size_t>(config.size), nullptr);
    DeviceGuard guard(loc.device);
    for (int q = 0; q < config.size && reason.empty(); ++q) {
      const Record& r = all[static_cast<std::size_t>(q)];
      const bool in_process = q >= first && q < first + count;
      const Local* other = in_process ? &pr->locals_[static_cast<std::size_t>(q - first)] : nullptr;
      table[static_cast<std::size_t>(q)] =
          reach_rank(loc.device, loc.rank, q, r, in_process, other ? other->mailbox : nullptr,
                     other ? other->device : -1, node, "memory", loc.opened, reason);
    }
    if (reason.empty()) {
      reason = peer_why(cudaMemcpyAsync(loc.table, table.data(), table.size() * sizeof(char*),
                                        cudaMemcpyHostToDevice, loc.setup),
                        "cudaMemcpy (peer table)", loc.device);
    }
    if (reason.empty())
      reason = peer_why(cudaStreamSynchronize(loc.setup), "peer set-up", loc.device);
  }

  for (auto& loc : pr->locals_) {
    if (loc.setup == nullptr) continue;
    DeviceGuard guard(loc.device, std::nothrow);
    cudaStreamDestroy(loc.setup);
    loc.setup = nullptr;
  }
  // All take the peer path, or none.
  const auto reasons = gather_reasons(procs, reason);
  for (std::size_t p = 0; p < reasons.size(); ++p) {
    if (reasons[p].empty()) continue;
    pr->release();
    if (config.reduce != ReducePath::peer) return nullptr;
    throw Error(Errc::invalid_argument,
                "dist::Comm '" + config.name + "': peer reductions were asked for " +
                    "(CommOptions::reductions or SLUICE_DIST_REDUCE=peer), but on process " +
                    std::to_string(p) + " " + reasons[p] +
                    "; every rank's GPU must reach every other's memory (one node, peer "
                    "access): use SLUICE_DIST_REDUCE=nccl or auto");
  }
  return pr;
}

PeerReduce::~PeerReduce() {
  release();
}

void PeerReduce::release() noexcept {
  for (auto& loc : locals_) {
    DeviceGuard guard(loc.device, std::nothrow);
    for (void* p : loc.opened) cudaIpcCloseMemHandle(p);
    loc.opened.clear();
    if (loc.mailbox != nullptr) cudaFree(loc.mailbox);
    if (loc.epoch != nullptr) cudaFree(loc.epoch);
    if (loc.table != nullptr) cudaFree(loc.table);
    if (loc.status != nullptr) cudaFreeHost(loc.status);
    loc = Local{};
    cuda::clear_error();
  }
  locals_.clear();
  if (abort_ != nullptr) cudaFreeHost(abort_);
  abort_ = nullptr;
}

void PeerReduce::launch(CUstream_st* stream, int local, const double* send, double* recv,
                        std::size_t count, const DistFinalizeArgs* fin) const {
  const Local& loc = locals_.at(static_cast<std::size_t>(local));
  if (count > kPeerCapacity) {
    throw Error(Errc::invalid_argument, "dist peer gather: " + std::to_string(count) +
                                            " doubles a rank, more than the " +
                                            std::to_string(kPeerCapacity) + " a slot holds");
  }
  PeerGatherArgs a;
  a.mail = loc.table;
  a.epoch = loc.epoch;
  a.abort = abort_;
  a.status = loc.status;
  a.timeout_ns = timeout_ns_;
  a.rank = loc.rank;
  a.size = size_;
  a.send = send;
  a.recv = recv;
  a.count = static_cast<std::int32_t>(count);
  if (fin != nullptr) {
    a.finalize = true;
    a.fin = *fin;
    a.fin.gathered = recv;
  }
  launch_peer_gather(stream, a);
}

std::optional<std::string> PeerReduce::failure() const {
  for (const auto& loc : locals_) {
    const volatile PeerStatus* s = loc.status;
    if (s == nullptr || s->reason != kPeerDeadline) continue;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.3g", static_cast<double>(timeout_ns_) / 1e9);
    return "dist::Comm '" + name_ + "': rank " + std::to_string(loc.rank) + " waited " + seconds +
           " s (SLUICE_DIST_TIMEOUT) for rank " + std::to_string(s->peer) +
           "'s partial sums of its peer reduction #" + std::to_string(s->epoch) +
           "; that rank never reached it";
  }
  return std::nullopt;
}

void PeerReduce::abort() noexcept {
  if (abort_ != nullptr) *static_cast<volatile std::int32_t*>(abort_) = 1;
}

}  // namespace sluice::detail::dist
