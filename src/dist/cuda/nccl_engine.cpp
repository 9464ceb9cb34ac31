// The cuda backend's engine (sluice/ext/dist.hpp): one NCCL communicator per local rank, its
// collectives and point-to-point groups enqueued on the issuing context's stream, so a GPU's
// communication is ordered with its kernels by the stream and with other contexts' work by the
// tracker, and the host never waits for it. Captured like any other stream work (NCCL supports
// CUDA graph capture).
//
// A watchdog thread per engine watches the process's failure state (dist/process.hpp: a failed
// rank's notice, or this process's own failure) and NCCL's asynchronous errors, and aborts the
// communicators on either, so that kernels waiting for a rank that will never come return
// instead of hanging; the failure then surfaces at the next synchronize of the contexts.
//
// NCCL ranks of one process must be driven from one thread each (or inside ncclGroupStart/End):
// the dist layer issues a multi-rank operation on a thread per local rank (CommState::each), and
// the engine makes (and destroys) each rank's communicator on a thread of its own. Those threads
// issue their NCCL calls under the tracker's one lock (deps/issue.hpp), so a call must never wait
// for another rank's: NCCL's set-up of connections on a first use does (a bootstrap exchange
// with the peers' calling threads), and rank 0's thread waiting there holds the lock that rank
// 1's thread needs to reach its call (one process driving several GPUs hung). So every
// connection is made while the communicators are made, on the set-up threads: collective ones
// by NCCL_RUNTIME_CONNECT=0 (set unless the user set it), point-to-point ones by an exchange
// with every peer there when some process holds several ranks (which also turns off NCCL's
// registration of captured buffers, NCCL_GRAPH_REGISTER=0, for the same reason).
//
// For the same reason every kernel of the module is loaded on each GPU before a process's
// several ranks start (preload): under CUDA's lazy loading a kernel's first launch may wait for
// the device, where an NCCL kernel waits for another local rank's call.
//
// A `checked` collective (the public calls; the dist layer's own objects check their sizes when
// they are made) first gathers every rank's signature on the stream (a kernel writes this rank's
// into device memory, ncclAllGather, a copy to pinned memory) and a host function in stream
// order compares them: every rank sees every signature, so every rank finds a mismatch itself,
// records the failure on its contexts (their synchronize reports it) and the process's failure
// state, and the watchdog then aborts the communicators, ending the mismatched collective that
// follows whether it hangs or not. No host thread waits for any of it.
//
// Where every rank's GPU reaches every other's memory, the solvers' small reductions do not use
// NCCL: peer_reduce.cpp's fused gather (one kernel per rank, stores into the peers' memory) runs
// them (fused_gather_capacity, gather_finalize); the watchdog also reports a gather that gave
// up for its deadline and, on any failure, makes the gathers in flight leave.
//
// There too, the exchanges need no NCCL kernel: peer_exchange.cpp moves each message that fits
// an inbox slot by the copy engines (routed per peer and direction in exchange_parts, alike on
// both sides as both pass the same sizes); the rest, and every exchange issued while a graph is
// captured, goes through NCCL in the same operation. The watchdog reports a peer exchange's wait
// past its deadline and, on any failure, releases every such wait (and keeps them released
// until the destructor has synchronized the contexts).

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_stream.hpp"
#include "backends/cuda/kernel_preload.hpp"
#include "core/context_impl.hpp"
#include "dist/cuda/dist_kernels.hpp"
#include "dist/cuda/nccl_engine.hpp"
#include "dist/cuda/peer_exchange.hpp"
#include "dist/cuda/peer_reduce.hpp"
#include "dist/process.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::dist {
namespace {

using sluice::detail::cuda::CudaStream;
using sluice::detail::cuda::DeviceGuard;

/// Multiprocessors a product overlapping a ghost exchange leaves to NCCL's kernels by default.
constexpr int kExchangeSms = 16;

ncclDataType_t nccl_type(DistType t) {
  switch (t) {
    case DistType::u8:
      return ncclUint8;
    case DistType::i32:
      return ncclInt32;
    case DistType::i64:
      return ncclInt64;
    case DistType::f32:
      return ncclFloat32;
    case DistType::f64:
      return ncclFloat64;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(DistOp op) {
  switch (op) {
    case DistOp::sum:
      return ncclSum;
    case DistOp::max:
      return ncclMax;
    case DistOp::min:
      return ncclMin;
  }
  return ncclSum;
}

[[noreturn]] void throw_nccl(ncclResult_t r, const char* what, ncclComm_t comm,
                             std::source_location where) {
  std::string text = std::string("cuda: ") + what + " failed: " + ncclGetErrorString(r);
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0') {
    text += " (" + std::string(last) + ")";
  }
  // A peer that failed first makes NCCL report an internal or remote error here; its notice (sent
  // over MPI as it failed) says why, so wait briefly for it and name it.
  for (int i = 0; i < 100 && !process_failure(); ++i) {
    poll_failure_notices();
    if (!process_failure()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (auto first = process_failure()) text += ", after " + *first;
  fail_process(text, true);
  throw Error(Errc::backend_failure, text, where);
}

void check_nccl(ncclResult_t r, const char* what, ncclComm_t comm, std::source_location where) {
  if (r != ncclSuccess && r != ncclInProgress) [[unlikely]]
    throw_nccl(r, what, comm, where);
}

/// Runs `f(stream)` as operation `op` on `s`, its device current.
template <class F>
void run_on(Stream& s, const OpInfo& op, F&& f) {
  auto call = [](void* state, CUstream_st* stream) { (*static_cast<F*>(state))(stream); };
  static_cast<CudaStream&>(s).run_user(call, static_cast<void*>(&f), op);
}

const char* call_name(std::uint64_t call) {
  return dist_call_name(static_cast<DistCall>(call));
}

/// The text of the first difference between rank 0's signature and another rank's, or empty.
std::string signature_mismatch(const std::uint64_t* all, int ranks) {
  static constexpr const char* kFields[] = {"operation", "element type", "reduction", "root",
                                            "count"};
  for (int r = 1; r < ranks; ++r) {
    for (std::size_t f = 0; f < kSignatureWords; ++f) {
      const std::uint64_t a = all[f], b = all[static_cast<std::size_t>(r) * kSignatureWords + f];
      if (a == b) continue;
      auto value = [f](std::uint64_t v) {
        return f == 0 ? std::string(call_name(v)) : std::to_string(v);
      };
      return std::string("dist ") + call_name(all[0]) + " (NCCL): rank " + std::to_string(r) +
             " called it with " + kFields[f] + " " + value(b) + " and rank 0 with " + value(a) +
             "; every rank must make the same collective call";
    }
  }
  return {};
}

class NcclEngine final : public DistEngine {
 public:
  explicit NcclEngine(const DistEngineConfig& config)
      : contexts_(config.contexts), ranks_(config.ranks), size_(config.size) {
    if (config.unique_id.size() != sizeof(ncclUniqueId)) {
      throw Error(Errc::invalid_state, "dist: the NCCL communicator id did not arrive whole");
    }
    ncclUniqueId id;
    std::memcpy(&id, config.unique_id.data(), sizeof id);
    comms_.resize(config.ranks.size(), nullptr);
    // Each local rank's communicator is made on a fresh thread of its own with only its device
    // ever current there. NCCL takes the device that its own (static) CUDA runtime sees as
    // current at ncclCommInitRank; one thread setting several devices in turn inside a group,
    // or a thread on which NCCL's runtime already settled on another device, left every rank of
    // a process on one GPU ("Duplicate GPU detected" on a 4-GPU machine).
    // Every connection now (see the top of the file). NCCL reads it once, at its first set-up.
    setenv("NCCL_RUNTIME_CONNECT", "0", 0);
    const bool connect_peers = config.max_local > 1 && config.size > 1;
    // Registering a captured collective's buffers may also exchange with the peers (NCCL reads
    // this at its first capture): off where a process drives several GPUs.
    if (config.max_local > 1) setenv("NCCL_GRAPH_REGISTER", "0", 0);
    if (comms_.size() > 1) preload(config);
    // Before NCCL: a failure here (peer reductions asked for and impossible) leaves nothing to
    // destroy, and every process decides alike.
    peer_ = PeerReduce::make(config);
    peerx_ = PeerExchange::make(config);
    std::vector<ncclResult_t> results(comms_.size(), ncclSuccess);
    std::vector<std::string> errors(comms_.size());
    {
      std::vector<std::thread> init;
      for (std::size_t l = 0; l < comms_.size(); ++l) {
        init.emplace_back([&, l] {
          try {
            DeviceGuard guard(config.contexts[l].device().index);
            results[l] = ncclCommInitRank(&comms_[l], config.size, id, config.ranks[l]);
            if (results[l] == ncclSuccess && connect_peers) connect_all_peers(l, errors[l]);
          } catch (const std::exception& e) {
            errors[l] = e.what();
          }
        });
      }
      for (auto& t : init) t.join();
    }
    for (std::size_t l = 0; l < comms_.size(); ++l) {
      if (errors[l].empty() && results[l] == ncclSuccess) continue;
      destroy_comms(config);
      if (!errors[l].empty()) throw Error(Errc::backend_failure, errors[l]);
      check_nccl(results[l], "ncclCommInitRank", nullptr, std::source_location::current());
    }
    // NCCL takes the device current at ncclCommInitRank (our guard's): make sure it did, as a
    // rank on another GPU than its context's would fail later and obscurely.
    for (std::size_t l = 0; l < comms_.size(); ++l) {
      int dev = -1;
      const int want = config.contexts[l].device().index;
      if (ncclCommCuDevice(comms_[l], &dev) == ncclSuccess && dev == want) continue;
      destroy_comms(config);
      throw Error(Errc::invalid_state,
                  "dist::Comm '" + config.name + "': NCCL placed rank " +
                      std::to_string(config.ranks[l]) + " on cuda:" + std::to_string(dev) +
                      " but its context is on cuda:" + std::to_string(want) +
                      "; the CUDA runtime NCCL was built with did not see the device sluice made "
                      "current (link NCCL against the same CUDA runtime)");
    }
    // Per local rank: room for the signatures on its device, and pinned memory they are copied
    // to for the host function that compares them.
    for (std::size_t l = 0; l < comms_.size(); ++l) {
      auto c = std::make_unique<Checker>();
      c->engine = this;
      DeviceGuard guard(config.contexts[l].device().index);
      const std::size_t words = kSignatureWords * static_cast<std::size_t>(size_ + 1);
      cuda::check(cudaMalloc(reinterpret_cast<void**>(&c->device), words * sizeof(std::uint64_t)),
                  "cudaMalloc (dist signatures)", std::source_location::current());
      cuda::check(cudaMallocHost(reinterpret_cast<void**>(&c->host), words * sizeof(std::uint64_t)),
                  "cudaMallocHost (dist signatures)", std::source_location::current());
      checkers_.push_back(std::move(c));
    }
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclEngine() override {
    // Destroyed while an exception leaves this rank's program (or after the process failed): the
    // other ranks may be waiting in a collective or a peer gather for this one, so the finalize
    // below (collective) would wait for them and this process would send its failure notice only
    // after their deadline. Abort instead: local, and it ends this rank's own kernels in flight.
    if (std::uncaught_exceptions() > 0 || process_failure().has_value()) abort_all();
    // Whatever is queued on the contexts first: NCCL frees buffers its kernels may still use.
    // The watchdog still runs: it fails and aborts on a failure met here, and keeps the peer
    // exchanges' waits released after an abort.
    for (auto& c : contexts_) {
      try {
        c.synchronize();
      } catch (...) {
      }
    }
    stop_.store(true);
    watchdog_.join();
    for (std::size_t l = 0; l < checkers_.size(); ++l) {
      DeviceGuard guard(contexts_[l].device().index, std::nothrow);
      cudaFree(checkers_[l]->device);
      cudaFreeHost(checkers_[l]->host);
    }
    if (aborted_.load()) return;  // abort_all freed them
    // A thread per rank, as at the set-up: a finalize may wait for the other ranks'.
    std::vector<std::thread> done;
    for (std::size_t l = 0; l < comms_.size(); ++l) {
      if (comms_[l] == nullptr) continue;
      done.emplace_back([this, l] {
        DeviceGuard guard(contexts_[l].device().index, std::nothrow);
        ncclCommFinalize(comms_[l]);
        ncclCommDestroy(comms_[l]);
      });
    }
    for (auto& t : done) t.join();
  }

  std::string_view name() const noexcept override { return "nccl"; }

  std::size_t fused_gather_capacity() const noexcept override { return peer_ ? kPeerCapacity : 0; }

  /// NCCL's send/receive kernels run a block per channel; SLUICE_DIST_EXCHANGE_SMS overrides the
  /// count left to them (0: products take every multiprocessor, as before). The peer path takes
  /// none (a message larger than its slot then meets a product that holds every multiprocessor).
  int exchange_sms(bool captured) const noexcept override {
    if (peerx_ && !captured) return 0;
    static const int sms = [] {
      const char* v = std::getenv("SLUICE_DIST_EXCHANGE_SMS");
      if (v == nullptr || *v == '\0') return kExchangeSms;
      return std::clamp(std::atoi(v), 0, 64);
    }();
    return sms;
  }

  std::string_view reduce_path() const noexcept override { return peer_ ? "peer" : "nccl"; }

  std::string_view exchange_path() const noexcept override { return peerx_ ? "peer" : "nccl"; }

  void gather_finalize(Stream& stream, int local, const double* send, double* recv,
                       std::size_t count, const DistFinalizeArgs* fin,
                       const OpInfo& info) override {
    if (!peer_) DistEngine::gather_finalize(stream, local, send, recv, count, fin, info);
    run_on(stream, info, [&](cudaStream_t s) {
      (void)comm(local);  // throws once the communication failed
      peer_->launch(s, local, send, recv, count, fin);
    });
  }

  void allreduce(Stream& stream, int local, const void* send, void* recv, std::size_t count,
                 DistType type, DistOp op, bool checked, const OpInfo& info) override {
    run_on(stream, info, [&](cudaStream_t s) {
      if (checked) check_signature(s, local, {DistCall::allreduce, type, op, 0, count}, info);
      check_nccl(ncclAllReduce(send, recv, count, nccl_type(type), nccl_op(op), comm(local), s),
                 "ncclAllReduce", comm(local), info.where);
    });
  }

  void reduce(Stream& stream, int local, const void* send, void* recv, std::size_t count,
              DistType type, DistOp op, int root, bool checked, const OpInfo& info) override {
    run_on(stream, info, [&](cudaStream_t s) {
      if (checked) check_signature(s, local, {DistCall::reduce, type, op, root, count}, info);
      check_nccl(ncclReduce(send, recv, count, nccl_type(type), nccl_op(op), root, comm(local), s),
                 "ncclReduce", comm(local), info.where);
    });
  }

  void broadcast(Stream& stream, int local, void* data, std::size_t count, DistType type, int root,
                 bool checked, const OpInfo& info) override {
    run_on(stream, info, [&](cudaStream_t s) {
      if (checked)
        check_signature(s, local, {DistCall::broadcast, type, DistOp::sum, root, count}, info);
      check_nccl(ncclBroadcast(data, data, count, nccl_type(type), root, comm(local), s),
                 "ncclBroadcast", comm(local), info.where);
    });
  }

  void allgather(Stream& stream, int local, const void* send, void* recv, std::size_t count,
                 DistType type, bool checked, const OpInfo& info) override {
    run_on(stream, info, [&](cudaStream_t s) {
      if (checked)
        check_signature(s, local, {DistCall::allgather, type, DistOp::sum, 0, count}, info);
      check_nccl(ncclAllGather(send, recv, count, nccl_type(type), comm(local), s), "ncclAllGather",
                 comm(local), info.where);
    });
  }

  void exchange(Stream& stream, int local, const void* send, std::span<const DistSegment> sends,
                void* recv, std::span<const DistSegment> recvs, DistType type,
                const OpInfo& info) override {
    const DistExchangePart part{send, sends, recv, recvs};
    exchange_parts(stream, local, {&part, 1}, type, info);
  }

  /// Each peer's messages in both directions go through the peer path where it is on, the
  /// stream is not capturing and their bytes fit a slot (both sides see the same sizes, so both
  /// route alike), the rest through one NCCL group; see peer_exchange.cpp for the order.
  void exchange_parts(Stream& stream, int local, std::span<const DistExchangePart> parts,
                      DistType type, const OpInfo& info) override {
    const std::size_t elem = dist_type_size(type);
    run_on(stream, info, [&](cudaStream_t s) {
      ncclComm_t c = comm(local);
      const int me = ranks_[static_cast<std::size_t>(local)];
      // Per peer: its messages' bytes each way, and whether they take the peer path.
      std::vector<std::size_t> out(static_cast<std::size_t>(size_), 0),
          in(static_cast<std::size_t>(size_), 0);
      for (const auto& p : parts) {
        for (const auto& m : p.sends) out.at(static_cast<std::size_t>(m.peer)) += m.count * elem;
        for (const auto& m : p.recvs) in.at(static_cast<std::size_t>(m.peer)) += m.count * elem;
      }
      bool peer_path = peerx_ != nullptr;
      if (peer_path) {
        cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
        cuda::check(cudaStreamIsCapturing(s, &capture), "cudaStreamIsCapturing", info.where);
        peer_path = capture == cudaStreamCaptureStatusNone;
      }
      auto by_peer = [&](const std::vector<std::size_t>& bytes, int q) {
        const auto b = bytes[static_cast<std::size_t>(q)];
        return peer_path && q != me && b > 0 && b <= peerx_->slot_bytes();
      };
      std::vector<PeerExchange::Piece> pieces;
      auto pieces_of = [&](int q, bool sending) {
        pieces.clear();
        for (const auto& p : parts) {
          for (const auto& m : sending ? p.sends : p.recvs) {
            if (m.peer != q || m.count == 0) continue;
            auto* base = static_cast<std::byte*>(sending ? const_cast<void*>(p.send) : p.recv);
            pieces.push_back({base + m.offset * elem, m.count * elem});
          }
        }
        return std::span<const PeerExchange::Piece>(pieces);
      };
      bool any_peer = false, any_nccl = false;
      for (int q = 0; q < size_; ++q) {
        const bool o = out[static_cast<std::size_t>(q)] > 0,
                   i = in[static_cast<std::size_t>(q)] > 0;
        any_peer = any_peer || by_peer(out, q) || by_peer(in, q);
        any_nccl = any_nccl || (o && !by_peer(out, q)) || (i && !by_peer(in, q));
      }
      if (any_peer) {
        peerx_->begin(s, local);
        for (int q = 0; q < size_; ++q) {
          if (by_peer(out, q)) peerx_->send(s, local, q, pieces_of(q, true));
        }
      }
      if (any_nccl) {
        check_nccl(ncclGroupStart(), "ncclGroupStart", c, info.where);
        ncclResult_t r = ncclSuccess;
        for (const auto& p : parts) {
          for (const auto& m : p.recvs) {
            if (m.count == 0 || r != ncclSuccess || by_peer(in, m.peer)) continue;
            r = ncclRecv(static_cast<std::byte*>(p.recv) + m.offset * elem, m.count,
                         nccl_type(type), m.peer, c, s);
          }
        }
        for (const auto& p : parts) {
          for (const auto& m : p.sends) {
            if (m.count == 0 || r != ncclSuccess || by_peer(out, m.peer)) continue;
            r = ncclSend(static_cast<const std::byte*>(p.send) + m.offset * elem, m.count,
                         nccl_type(type), m.peer, c, s);
          }
        }
        const ncclResult_t end = ncclGroupEnd();
        check_nccl(r, "ncclSend/ncclRecv", c, info.where);
        check_nccl(end, "ncclGroupEnd", c, info.where);
      }
      if (any_peer) {
        for (int q = 0; q < size_; ++q) {
          if (by_peer(in, q)) peerx_->recv(s, local, q, pieces_of(q, false));
        }
        peerx_->end(local);
      }
    });
  }

 private:
  /// Several GPUs in this process: every kernel of the module and cuSPARSE's SpMV loaded on each
  /// (backends/cuda/kernel_preload.hpp), before any NCCL kernel of this engine is in flight, so
  /// that no first launch under the tracker's lock waits for a device whose NCCL kernel waits for
  /// another local rank. A thread per device, as NCCL's set-up (no device is made current on
  /// this thread). SLUICE_DIST_PRELOAD=0 skips it (to check that it is what prevents the hang).
  void preload(const DistEngineConfig& config) {
    if (const char* v = std::getenv("SLUICE_DIST_PRELOAD"); v != nullptr && std::string(v) == "0") {
      return;
    }
    std::vector<cuda::PreloadReport> reports(config.contexts.size());
    {
      std::vector<std::thread> threads;
      for (std::size_t l = 0; l < config.contexts.size(); ++l) {
        threads.emplace_back(
            [&, l] { reports[l] = cuda::preload_kernels(config.contexts[l].device().index); });
      }
      for (auto& t : threads) t.join();
    }
    for (std::size_t l = 0; l < reports.size(); ++l) {
      const auto& r = reports[l];
      if (r.failure.empty() && r.loaded == r.functions) continue;
      // Not fatal: with lazy loading off, or where no first launch meets a running NCCL kernel,
      // the run works; said at each set-up of a communicator that meets it.
      std::fprintf(stderr,
                   "sluice: dist::Comm '%s': loaded %zu of %zu kernels ahead on cuda:%d (%s); "
                   "one process driving several GPUs may hang at a kernel's first launch: set "
                   "CUDA_MODULE_LOADING=EAGER\n",
                   config.name.c_str(), r.loaded, r.functions, config.contexts[l].device().index,
                   r.failure.empty() ? "no failure reported" : r.failure.c_str());
    }
  }

  /// On local rank l's set-up thread (its device current): a point-to-point exchange with every
  /// other rank, so that NCCL connects them all now and no later call waits for a peer's thread.
  /// Leaves the reason in `error` if it failed.
  void connect_all_peers(std::size_t l, std::string& error) {
    const int me = ranks_[l];
    cudaStream_t s = nullptr;
    std::uint64_t* buf = nullptr;  // one word sent, one received from each rank
    auto fail = [&](const char* what, const char* why) {
      if (error.empty()) error = std::string("cuda: ") + what + " failed: " + why;
    };
    if (const auto r = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); r != cudaSuccess) {
      fail("cudaStreamCreate (NCCL peer connections)", cudaGetErrorString(r));
      return;
    }
    const auto words = static_cast<std::size_t>(size_ + 1);
    if (const auto m = cudaMalloc(reinterpret_cast<void**>(&buf), words * sizeof *buf);
        m != cudaSuccess) {
      fail("cudaMalloc (NCCL peer connections)", cudaGetErrorString(m));
    } else {
      ncclResult_t r = ncclGroupStart();
      for (int q = 0; q < size_ && r == ncclSuccess; ++q) {
        if (q == me) continue;
        r = ncclRecv(buf + 1 + q, 1, ncclUint64, q, comms_[l], s);
        if (r == ncclSuccess) r = ncclSend(buf, 1, ncclUint64, q, comms_[l], s);
      }
      const ncclResult_t end = ncclGroupEnd();
      if (r == ncclSuccess) r = end;
      if (r != ncclSuccess) {
        fail("ncclSend/ncclRecv (NCCL peer connections)", ncclGetErrorString(r));
      } else if (const auto e = cudaStreamSynchronize(s); e != cudaSuccess) {
        fail("cudaStreamSynchronize (NCCL peer connections)", cudaGetErrorString(e));
      }
      cudaFree(buf);
    }
    cudaStreamDestroy(s);
  }

  /// Destroys the communicators made so far (a failed set-up).
  void destroy_comms(const DistEngineConfig& config) noexcept {
    for (std::size_t k = 0; k < comms_.size(); ++k) {
      if (comms_[k] == nullptr) continue;
      DeviceGuard guard(config.contexts[k].device().index, std::nothrow);
      ncclCommDestroy(comms_[k]);
      comms_[k] = nullptr;
    }
  }

  /// Where local rank `local`'s signatures are gathered and compared. A rank's collectives run
  /// one after the other (the dist layer orders them), so one set of buffers serves them all.
  struct Checker {
    NcclEngine* engine = nullptr;
    std::uint64_t* device = nullptr;  // this rank's signature, then every rank's
    std::uint64_t* host = nullptr;    // every rank's, pinned
  };

  /// Enqueues the signature exchange and comparison before a collective of local rank `local`.
  void check_signature(cudaStream_t s, int local, const DistSignature& sig, const OpInfo& info) {
    Checker& c = *checkers_[static_cast<std::size_t>(local)];
    const SignatureWords words{
        {static_cast<std::uint64_t>(sig.call), static_cast<std::uint64_t>(sig.type),
         static_cast<std::uint64_t>(sig.op),
         static_cast<std::uint64_t>(static_cast<std::uint32_t>(sig.root)), sig.count}};
    write_signature(s, c.device, words);
    std::uint64_t* all = c.device + kSignatureWords;
    check_nccl(ncclAllGather(c.device, all, kSignatureWords, ncclUint64, comm(local), s),
               "ncclAllGather (signatures)", comm(local), info.where);
    const std::size_t bytes = kSignatureWords * static_cast<std::size_t>(size_) * sizeof *all;
    cuda::check(cudaMemcpyAsync(c.host, all, bytes, cudaMemcpyDeviceToHost, s),
                "cudaMemcpyAsync (dist signatures)", info.where);
    cuda::check(cudaLaunchHostFunc(s, &NcclEngine::compare_signatures, &c),
                "cudaLaunchHostFunc (dist signatures)", info.where);
  }

  /// A host function in stream order (no CUDA call allowed here): on a mismatch, records the
  /// failure on the contexts and the process; the watchdog then aborts the communicators.
  static void compare_signatures(void* data) noexcept {
    auto& c = *static_cast<Checker*>(data);
    try {
      const std::string why = signature_mismatch(c.host, c.engine->size_);
      if (why.empty()) return;
      fail_process(why, false);  // every rank finds it: no notice needed
      for (auto& ctx : c.engine->contexts_) {
        auto& impl = ctx.impl();
        impl.failures()->fail(OpInfo{impl.issued(), "dist communication (NCCL)", {}}, why);
      }
    } catch (...) {
      fail_process("dist: comparing the collectives' signatures failed", false);
    }
  }

  /// Local rank `local`'s communicator; throws once the watchdog aborted them (a failed rank).
  [[nodiscard]] ncclComm_t comm(int local) const {
    if (aborted_.load(std::memory_order_acquire)) {
      throw Error(Errc::work_failed, "dist: NCCL communication was aborted: " +
                                         process_failure().value_or("an NCCL error"));
    }
    return comms_[static_cast<std::size_t>(local)];
  }

  /// Aborts the communicators when the process's communication failed or NCCL reports an error:
  /// kernels waiting for a rank that will never come then return.
  void watch() {
    while (!stop_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (aborted_.load(std::memory_order_acquire)) {
        // A live peer's late flag write may hold a released wait again.
        if (peerx_) peerx_->hold_released();
        continue;
      }
      poll_failure_notices();
      if (peer_) {
        if (auto why = peer_->failure()) fail_process(*why, true);
      }
      if (peerx_) {
        if (auto why = peerx_->failure()) fail_process(*why, true);
      }
      bool failed = process_failure().has_value();
      for (ncclComm_t c : comms_) {
        ncclResult_t async = ncclSuccess;
        if (c != nullptr && ncclCommGetAsyncError(c, &async) == ncclSuccess &&
            async != ncclSuccess && async != ncclInProgress) {
          fail_process(std::string("cuda: NCCL reported ") + ncclGetErrorString(async), true);
          failed = true;
        }
      }
      if (!failed) continue;
      // The aborted kernels end without an error of the stream's: the contexts carry the
      // failure, so that their next synchronize reports it. Recorded before the kernels are
      // let go, so that no synchronize sees them end without it.
      const std::string why =
          "dist: NCCL communication aborted: " + process_failure().value_or("an NCCL error");
      for (auto& c : contexts_) {
        auto& impl = c.impl();
        impl.failures()->fail(OpInfo{impl.issued(), "dist communication (NCCL)", {}}, why);
      }
      abort_all();
    }
  }

  /// Ends every communication of this engine's ranks in flight or to come, once (the watchdog or
  /// the destructor): later calls throw (comm), the fused gathers and the peer exchanges' waits
  /// leave, and the NCCL communicators are aborted (NCCL allows that from another thread while
  /// a call hangs on one).
  void abort_all() noexcept {
    if (aborted_.exchange(true, std::memory_order_acq_rel)) return;
    if (peer_) peer_->abort();
    if (peerx_) peerx_->abort();
    for (ncclComm_t c : comms_) {
      if (c != nullptr) ncclCommAbort(c);
    }
  }

  std::vector<Context> contexts_;
  std::vector<int> ranks_;
  int size_ = 1;
  std::vector<ncclComm_t> comms_;
  std::vector<std::unique_ptr<Checker>> checkers_;
  std::unique_ptr<PeerReduce> peer_;     // null: the small reductions go through NCCL
  std::unique_ptr<PeerExchange> peerx_;  // null: the exchanges go through NCCL
  std::atomic<bool> stop_{false};
  std::atomic<bool> aborted_{false};
  std::thread watchdog_;
};

}  // namespace

std::vector<std::byte> nccl_unique_id() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    throw Error(Errc::backend_failure,
                std::string("cuda: ncclGetUniqueId failed: ") + ncclGetErrorString(r));
  }
  std::vector<std::byte> bytes(sizeof id);
  std::memcpy(bytes.data(), &id, sizeof id);
  return bytes;
}

std::shared_ptr<DistEngine> make_nccl_engine(const DistEngineConfig& config) {
  return std::make_shared<NcclEngine>(config);
}

}  // namespace sluice::detail::dist
