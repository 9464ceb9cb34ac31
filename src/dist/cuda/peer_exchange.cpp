// Peer exchanges (peer_exchange.hpp): an exchange without multiprocessors.
//
// Each rank r holds an inbox on its device: per other rank q two slots (the parities of q's
// exchanges with messages for r) of SLUICE_DIST_PEER_INBOX bytes. The node's processes share one
// page of flags in host memory (POSIX shared memory, registered with CUDA by each process):
//   arrived[r][q]  the last of q's exchanges with messages for r whose bytes are in r's inbox
//                  (written by q's stream, waited on by r's);
//   acked[r][q]    the last of r's exchanges with messages for q that q has copied out of its
//                  inbox (written by q's stream, waited on by r's);
//   reached[r]     the last of r's peer exchanges its stream reached (for the deadline).
// Epochs count per pair and direction: r's e-th exchange that sends q messages is q's e-th that
// receives from r, as the routing (nccl_engine.cpp) decides alike on both sides from the sizes
// both pass. On rank r's stream, an exchange is, in order:
//   1. reached[r] = seq;
//   2. per peer q it sends to (epoch e): wait until acked[r][q] >= e - 2 (q emptied slot e % 2),
//      copy each message into slot e % 2 of q's inbox (cudaMemcpyAsync: a copy engine, over
//      NVLink or PCIe), arrived[q][r] = e (cuStreamWriteValue64, whose default memory barrier
//      orders it after the copies, as seen by any device);
//   3. the messages of the engine's path (NCCL), if any;
//   4. per peer q it receives from (epoch e): wait until arrived[r][q] >= e, copy slot e % 2
//      of its own inbox out into the messages, acked[q][r] = e.
// The waits are cuStreamWaitValue64 (cyclic >=), run by the stream's front end: no kernel, no
// multiprocessor. Flags only grow, so a sender one exchange ahead (arrived = e + 1) lets epoch
// e's wait pass too: slot e % 2 still holds e, as e + 2 waits for acked >= e.
//
// Deadlock. Sends wait only for acknowledgements of exchanges two back, which the peer wrote in
// its own earlier exchanges; receives wait for the peer's sends of the same exchange, which it
// issues before its own NCCL part and receives; a rank's communication runs in issue order (the
// dist layer's ordering object, as for NCCL), so nothing a peer needs is queued behind a wait.
//
// Failure. The flags sit in host memory so that the host can read and write them without a
// stream (a stream could share a hardware queue with the one that waits): the engine's watchdog
// reads `reached` and the flags a reached exchange waits on, and reports a wait older than
// SLUICE_DIST_TIMEOUT as the communicator's failure; on any failure it writes a value past every
// epoch into this process's flags (abort), again every 10 ms until the contexts are synchronized
// (a live peer's late write may lower one), so every wait in flight or to come passes.
//
// Captured exchanges take NCCL (nccl_engine.cpp): the epochs are the host's, which a graph's
// replays would repeat.

#include "dist/cuda/peer_exchange.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "dist/cuda/peer_common.hpp"
#include "dist/placement.hpp"
#include "dist/process.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::dist {
namespace {

using sluice::detail::cuda::DeviceGuard;

/// Default bytes of a slot: two 512^2 planes of doubles, one of each vector a CG product sends.
constexpr std::size_t kDefaultSlot = std::size_t{8} << 20;
/// Each flag on a cache line of its own.
constexpr std::size_t kFlagWords = 8;
/// Past any epoch (cyclic >= with every value a wait asks for).
constexpr std::uint64_t kReleased = std::uint64_t{1} << 62;

/// The stream memory operations, from the driver through the runtime (no libcuda link).
struct MemOps {
  CUresult (*wait)(CUstream, CUdeviceptr, cuuint64_t, unsigned) = nullptr;
  CUresult (*write)(CUstream, CUdeviceptr, cuuint64_t, unsigned) = nullptr;
  CUresult (*error_name)(CUresult, const char**) = nullptr;
  std::string missing;
};

const MemOps& mem_ops() {
  static const MemOps ops = [] {
    MemOps m;
    auto get = [&m](const char* name, auto& fn, unsigned version) {
      void* p = nullptr;
      cudaDriverEntryPointQueryResult found{};
      if (cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &found) !=
              cudaSuccess ||
          found != cudaDriverEntryPointSuccess || p == nullptr) {
        cuda::clear_error();
        m.missing += (m.missing.empty() ? "" : ", ") + std::string(name);
        return;
      }
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    get("cuStreamWaitValue64", m.wait, 12000);
    get("cuStreamWriteValue64", m.write, 12000);
    get("cuGetErrorName", m.error_name, 6000);
    return m;
  }();
  return ops;
}

std::string driver_text(CUresult r) {
  const char* name = nullptr;
  if (mem_ops().error_name != nullptr) (void)mem_ops().error_name(r, &name);
  return name != nullptr ? std::string(name) : "CUresult " + std::to_string(static_cast<int>(r));
}

/// SLUICE_DIST_PEER_INBOX: bytes (a k, M or G suffix multiplies by 2^10, 2^20, 2^30).
std::size_t slot_from_env() {
  const char* v = std::getenv("SLUICE_DIST_PEER_INBOX");
  if (v == nullptr || *v == '\0') return kDefaultSlot;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  std::size_t shift = 0;
  if (end != nullptr && (*end == 'k' || *end == 'K')) shift = 10, ++end;
  if (end != nullptr && (*end == 'm' || *end == 'M')) shift = 20, ++end;
  if (end != nullptr && (*end == 'g' || *end == 'G')) shift = 30, ++end;
  if (errno != 0 || end == v || *end != '\0' || n == 0 || n > (std::uint64_t{1} << (40 - shift))) {
    throw Error(Errc::invalid_argument,
                "dist::Comm: SLUICE_DIST_PEER_INBOX is '" + std::string(v) +
                    "'; it is the bytes of a peer exchange's slot, 1 to 2^40, with an optional "
                    "k, M or G suffix (default 8M)");
  }
  return ((static_cast<std::size_t>(n) << shift) + 255) / 256 * 256;
}

/// What a process tells the others of each of its ranks.
using Record = PeerRecord;

}  // namespace

std::unique_ptr<PeerExchange> PeerExchange::make(const DistEngineConfig& config) {
  // `automatic` takes the peer path where every rank reaches every other's memory (faster than
  // NCCL's kernels in async and sync mode on 2 GPUs; docs/dist.md, "Peer exchanges"), else falls
  // back to the engine's exchanges; `peer` refuses with the reason.
  if (config.exchange == ExchangePath::engine || config.size < 2) return nullptr;
  const auto* transport = static_cast<const HostTransport*>(config.transport.get());
  if (transport == nullptr || !transport->procs) return nullptr;
  const ProcComm& procs = *transport->procs;
  std::unique_ptr<PeerExchange> px(new PeerExchange);
  px->name_ = config.name;
  px->size_ = config.size;
  const double limit = timeout_seconds();
  px->timeout_ns_ = limit > 0 ? static_cast<std::int64_t>(std::ceil(limit * 1e9)) : 0;
  // Process 0's slot size (routing must decide alike on every process); a process whose
  // SLUICE_DIST_PEER_INBOX is wrong makes every process throw.
  std::uint64_t slot = 0;
  std::string bad;
  try {
    slot = slot_from_env();
  } catch (const Error& e) {
    bad = e.what();
  }
  for (const auto& b : gather_reasons(procs, bad)) {
    if (!b.empty()) throw Error(Errc::invalid_argument, b);
  }
  procs.broadcast(&slot, sizeof slot, 0);
  px->slot_ = static_cast<std::size_t>(slot);
  const std::string node = sluice::dist::detail::node_name();
  const int first = config.ranks.front();
  const int count = static_cast<int>(config.ranks.size());

  // Errors are kept, not thrown, until every process has said how it fared (peer_reduce.cpp).
  std::string reason;
  if (!mem_ops().missing.empty()) reason = "the CUDA driver lacks " + mem_ops().missing;

  // The flags: process 0 makes the shared memory and names it; each process maps and registers
  // it; process 0 unlinks it once every process has it open.
  px->shared_bytes_ =
      ((2 * static_cast<std::size_t>(config.size) + 1) * static_cast<std::size_t>(config.size) *
           kFlagWords * sizeof(std::uint64_t) +
       4095) /
      4096 * 4096;
  char shm_name[64] = {};
  if (procs.rank() == 0) {
    std::snprintf(shm_name, sizeof shm_name, "/sluice-peerx-%d-%p", static_cast<int>(getpid()),
                  static_cast<void*>(px.get()));
  }
  procs.broadcast(shm_name, sizeof shm_name, 0);
  int fd = -1;
  if (procs.rank() == 0 && reason.empty()) {
    fd = shm_open(shm_name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      reason = std::string("shm_open (peer exchange flags) failed: ") + std::strerror(errno);
    } else if (ftruncate(fd, static_cast<off_t>(px->shared_bytes_)) != 0) {
      reason = std::string("ftruncate (peer exchange flags) failed: ") + std::strerror(errno);
    }
  }
  // The others open it once process 0 made it.
  std::int32_t made = procs.rank() == 0 && reason.empty() ? 1 : 0;
  procs.broadcast(&made, sizeof made, 0);
  if (procs.rank() != 0 && reason.empty()) {
    if (made == 0) {
      reason = "process 0 could not make the peer exchange flags";
    } else if (fd = shm_open(shm_name, O_RDWR, 0600); fd < 0) {
      reason = std::string("shm_open (peer exchange flags) failed: ") + std::strerror(errno) +
               " (is every rank on one node?)";
    }
  }
  if (reason.empty()) {
    void* p = mmap(nullptr, px->shared_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      reason = std::string("mmap (peer exchange flags) failed: ") + std::strerror(errno);
    } else {
      px->shared_ = p;
    }
  }
  if (fd >= 0) close(fd);
  if (reason.empty()) {
    DeviceGuard guard(config.contexts.front().device().index);
    const int dev = config.contexts.front().device().index;
    if (reason = peer_why(cudaHostRegister(px->shared_, px->shared_bytes_,
                                           cudaHostRegisterMapped | cudaHostRegisterPortable),
                          "cudaHostRegister (peer exchange flags)", dev);
        reason.empty()) {
      px->registered_ = true;
      void* d = nullptr;
      reason = peer_why(cudaHostGetDevicePointer(&d, px->shared_, 0),
                        "cudaHostGetDevicePointer (peer exchange flags)", dev);
      px->device_flags_ = static_cast<std::uint64_t*>(d);
    }
  }

  std::vector<Record> mine(config.contexts.size());
  for (std::size_t l = 0; l < config.contexts.size(); ++l) {
    auto loc = std::make_unique<Local>();
    loc->device = config.contexts[l].device().index;
    loc->rank = config.ranks[l];
    loc->sent.assign(static_cast<std::size_t>(config.size), 0);
    loc->received.assign(static_cast<std::size_t>(config.size), 0);
    Record& r = mine[l];
    r.rank = loc->rank;
    r.device = loc->device;
    std::strncpy(r.node, node.c_str(), sizeof r.node - 1);
    px->locals_.push_back(std::move(loc));
    if (!reason.empty()) continue;
    Local& lr = *px->locals_.back();
    DeviceGuard guard(lr.device);
    const std::size_t bytes = 2 * static_cast<std::size_t>(config.size - 1) * px->slot_;
    cudaStream_t setup = nullptr;
    if (reason = peer_why(cudaMalloc(reinterpret_cast<void**>(&lr.inbox), bytes),
                          "cudaMalloc (peer exchange inbox)", lr.device);
        !reason.empty()) {
      lr.inbox = nullptr;
    } else if (reason = peer_why(cudaIpcGetMemHandle(&r.handle, lr.inbox),
                                 "cudaIpcGetMemHandle (peer exchange inbox)", lr.device);
               !reason.empty()) {
    } else if (reason = peer_why(cudaStreamCreateWithFlags(&setup, cudaStreamNonBlocking),
                                 "cudaStreamCreate (peer exchange set-up)", lr.device);
               !reason.empty()) {
      setup = nullptr;
    } else {
      // The stream memory operations on this device, on its own `reached` flag (zero).
      const auto flag =
          reinterpret_cast<CUdeviceptr>(px->device_flag(px->flag_index(2, lr.rank, 0)));
      CUresult c = mem_ops().write(setup, flag, 0, CU_STREAM_WRITE_VALUE_DEFAULT);
      if (c == CUDA_SUCCESS) c = mem_ops().wait(setup, flag, 0, CU_STREAM_WAIT_VALUE_GEQ);
      if (c != CUDA_SUCCESS) {
        reason = "cuStreamWriteValue64/cuStreamWaitValue64 on cuda:" + std::to_string(lr.device) +
                 " failed: " + driver_text(c);
      } else {
        reason = peer_why(cudaStreamSynchronize(setup), "peer exchange set-up", lr.device);
      }
    }
    if (setup != nullptr) cudaStreamDestroy(setup);
  }

  // Every rank's inbox and node, in rank order (ranks are numbered process by process).
  const auto all_bytes = procs.allgatherv(std::as_bytes(std::span(mine)));
  std::vector<Record> all(all_bytes.size() / sizeof(Record));
  std::memcpy(all.data(), all_bytes.data(), all.size() * sizeof(Record));
  if (reason.empty() && static_cast<int>(all.size()) != config.size) {
    reason = "the processes announced " + std::to_string(all.size()) + " ranks, not " +
             std::to_string(config.size);
  }
  for (std::size_t l = 0; l < px->locals_.size() && reason.empty(); ++l) {
    Local& loc = *px->locals_[l];
    loc.inboxes.assign(static_cast<std::size_t>(config.size), nullptr);
    DeviceGuard guard(loc.device);
    for (int q = 0; q < config.size && reason.empty(); ++q) {
      const Record& r = all[static_cast<std::size_t>(q)];
      const bool in_process = q >= first && q < first + count;
      const Local* other =
          in_process ? px->locals_[static_cast<std::size_t>(q - first)].get() : nullptr;
      loc.inboxes[static_cast<std::size_t>(q)] =
          reach_rank(loc.device, loc.rank, q, r, in_process, other ? other->inbox : nullptr,
                     other ? other->device : -1, node, "inbox", loc.opened, reason);
    }
  }

  // All take the peer path, or none; the shared memory's name goes once all have it open.
  const auto reasons = gather_reasons(procs, reason);
  if (procs.rank() == 0 && shm_name[0] != '\0') shm_unlink(shm_name);
  for (std::size_t p = 0; p < reasons.size(); ++p) {
    if (reasons[p].empty()) continue;
    px->release();
    if (config.exchange != ExchangePath::peer) return nullptr;
    throw Error(Errc::invalid_argument,
                "dist::Comm '" + config.name + "': peer exchanges were asked for " +
                    "(CommOptions::exchanges or SLUICE_DIST_EXCHANGE_PATH=peer), but on process " +
                    std::to_string(p) + " " + reasons[p] +
                    "; every rank's GPU must reach every other's memory (one node, peer "
                    "access): use SLUICE_DIST_EXCHANGE_PATH=nccl or auto");
  }
  return px;
}

PeerExchange::~PeerExchange() {
  release();
}

void PeerExchange::release() noexcept {
  for (auto& lp : locals_) {
    Local& loc = *lp;
    DeviceGuard guard(loc.device, std::nothrow);
    for (void* p : loc.opened) cudaIpcCloseMemHandle(p);
    loc.opened.clear();
    if (loc.inbox != nullptr) cudaFree(loc.inbox);
    loc.inbox = nullptr;
    cuda::clear_error();
  }
  locals_.clear();
  if (registered_) {
    cudaHostUnregister(shared_);
    cuda::clear_error();
    registered_ = false;
  }
  if (shared_ != nullptr) munmap(shared_, shared_bytes_);
  shared_ = nullptr;
  device_flags_ = nullptr;
}

std::size_t PeerExchange::flag_index(int kind, int owner, int peer) const noexcept {
  // kind 0: arrived[owner][peer], 1: acked[owner][peer], 2: reached[owner] (peer 0).
  const auto n = static_cast<std::size_t>(size_);
  return (static_cast<std::size_t>(kind) * n + static_cast<std::size_t>(owner)) * n +
         static_cast<std::size_t>(peer);
}

std::uint64_t* PeerExchange::device_flag(std::size_t index) const noexcept {
  return device_flags_ + index * kFlagWords;
}

volatile std::uint64_t* PeerExchange::host_flag(std::size_t index) const noexcept {
  return static_cast<volatile std::uint64_t*>(static_cast<std::uint64_t*>(shared_)) +
         index * kFlagWords;
}

std::size_t PeerExchange::slot_offset(int owner, int sender, std::uint64_t epoch) const noexcept {
  const auto peer = static_cast<std::size_t>(sender < owner ? sender : sender - 1);
  return (peer * 2 + static_cast<std::size_t>(epoch & 1)) * slot_;
}

void PeerExchange::write(CUstream_st* stream, std::size_t flag, std::uint64_t value) const {
  const CUresult r = mem_ops().write(stream, reinterpret_cast<CUdeviceptr>(device_flag(flag)),
                                     value, CU_STREAM_WRITE_VALUE_DEFAULT);
  if (r != CUDA_SUCCESS) {
    throw Error(Errc::backend_failure,
                "cuda: cuStreamWriteValue64 (peer exchange) failed: " + driver_text(r));
  }
}

void PeerExchange::wait(CUstream_st* stream, Local& loc, std::size_t flag, std::uint64_t value,
                        int peer, bool ack) {
  loc.building.waits.push_back({host_flag(flag), value, peer, ack});
  const CUresult r = mem_ops().wait(stream, reinterpret_cast<CUdeviceptr>(device_flag(flag)), value,
                                    CU_STREAM_WAIT_VALUE_GEQ);
  if (r != CUDA_SUCCESS) {
    throw Error(Errc::backend_failure,
                "cuda: cuStreamWaitValue64 (peer exchange) failed: " + driver_text(r));
  }
}

void PeerExchange::begin(CUstream_st* stream, int local) {
  Local& loc = *locals_.at(static_cast<std::size_t>(local));
  const std::uint64_t seq = ++loc.seq;
  loc.building = Pending{seq, {}};
  write(stream, flag_index(2, loc.rank, 0), seq);
}

void PeerExchange::end(int local) {
  Local& loc = *locals_.at(static_cast<std::size_t>(local));
  // The stream may have passed `reached = seq` already: the watchdog then finds this exchange
  // at the front and checks its waits from then on.
  std::lock_guard lock(loc.mutex);
  loc.pending.push_back(std::move(loc.building));
  loc.building = Pending{};
}

void PeerExchange::send(CUstream_st* stream, int local, int peer, std::span<const Piece> pieces) {
  Local& loc = *locals_.at(static_cast<std::size_t>(local));
  const std::uint64_t e = ++loc.sent.at(static_cast<std::size_t>(peer));
  if (e > 2) wait(stream, loc, flag_index(1, loc.rank, peer), e - 2, peer, true);
  char* slot = loc.inboxes[static_cast<std::size_t>(peer)] + slot_offset(peer, loc.rank, e);
  std::size_t at = 0;
  for (const Piece& p : pieces) {
    if (p.bytes == 0) continue;
    cuda::check(cudaMemcpyAsync(slot + at, p.data, p.bytes, cudaMemcpyDeviceToDevice, stream),
                "cudaMemcpyAsync (peer exchange send)", std::source_location::current());
    at += p.bytes;
  }
  write(stream, flag_index(0, peer, loc.rank), e);
}

void PeerExchange::recv(CUstream_st* stream, int local, int peer, std::span<const Piece> pieces) {
  Local& loc = *locals_.at(static_cast<std::size_t>(local));
  const std::uint64_t e = ++loc.received.at(static_cast<std::size_t>(peer));
  wait(stream, loc, flag_index(0, loc.rank, peer), e, peer, false);
  const char* slot = loc.inbox + slot_offset(loc.rank, peer, e);
  std::size_t at = 0;
  for (const Piece& p : pieces) {
    if (p.bytes == 0) continue;
    cuda::check(cudaMemcpyAsync(p.data, slot + at, p.bytes, cudaMemcpyDeviceToDevice, stream),
                "cudaMemcpyAsync (peer exchange receive)", std::source_location::current());
    at += p.bytes;
  }
  write(stream, flag_index(1, peer, loc.rank), e);
}

std::optional<std::string> PeerExchange::failure() {
  if (aborted_.load()) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  for (auto& lp : locals_) {
    Local& loc = *lp;
    const std::uint64_t reached = *host_flag(flag_index(2, loc.rank, 0));
    std::lock_guard lock(loc.mutex);
    while (!loc.pending.empty()) {
      const Pending& p = loc.pending.front();
      if (p.seq > reached) break;  // the stream is not there yet
      const Wait* open = nullptr;
      for (const Wait& w : p.waits) {
        if (static_cast<std::int64_t>(*w.flag - w.value) < 0) {
          open = &w;
          break;
        }
      }
      if (open == nullptr || p.seq < reached) {  // passed
        loc.pending.pop_front();
        continue;
      }
      if (timeout_ns_ <= 0) break;  // no deadline: waits as long as it takes
      if (loc.watched != p.seq) {
        loc.watched = p.seq;
        loc.since = now;
        break;
      }
      const auto waited =
          std::chrono::duration_cast<std::chrono::nanoseconds>(now - loc.since).count();
      if (waited <= timeout_ns_) break;
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%.3g", static_cast<double>(timeout_ns_) / 1e9);
      return "dist::Comm '" + name_ + "': rank " + std::to_string(loc.rank) + " waited " + seconds +
             " s (SLUICE_DIST_TIMEOUT) in a peer exchange for rank " + std::to_string(open->peer) +
             (open->ack ? " to empty its inbox of exchange #" : "'s messages of exchange #") +
             std::to_string(open->value) + "; that rank never reached it";
    }
  }
  return std::nullopt;
}

void PeerExchange::abort() noexcept {
  aborted_.store(true);
  hold_released();
}

void PeerExchange::hold_released() noexcept {
  if (!aborted_.load() || shared_ == nullptr) return;
  for (const auto& lp : locals_) {
    for (int q = 0; q < size_; ++q) {
      *host_flag(flag_index(0, lp->rank, q)) = kReleased;
      *host_flag(flag_index(1, lp->rank, q)) = kReleased;
    }
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace sluice::detail::dist
