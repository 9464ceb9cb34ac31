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
// the dist layer issues a multi-rank operation on a thread per local rank (CommState::each).
// Calls are not signature-checked here (`checked` is ignored): the dist layer's objects check
// their sizes when they are made.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_stream.hpp"
#include "core/context_impl.hpp"
#include "dist/cuda/nccl_engine.hpp"
#include "dist/process.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::dist {
namespace {

using sluice::detail::cuda::CudaStream;
using sluice::detail::cuda::DeviceGuard;

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

class NcclEngine final : public DistEngine {
 public:
  explicit NcclEngine(const DistEngineConfig& config) : contexts_(config.contexts) {
    if (config.unique_id.size() != sizeof(ncclUniqueId)) {
      throw Error(Errc::invalid_state, "dist: the NCCL communicator id did not arrive whole");
    }
    ncclUniqueId id;
    std::memcpy(&id, config.unique_id.data(), sizeof id);
    comms_.resize(config.ranks.size(), nullptr);
    // One thread initializes every local rank's communicator: inside a group.
    check_nccl(ncclGroupStart(), "ncclGroupStart", nullptr, std::source_location::current());
    for (std::size_t l = 0; l < comms_.size(); ++l) {
      DeviceGuard guard(config.contexts[l].device().index);
      const ncclResult_t r = ncclCommInitRank(&comms_[l], config.size, id, config.ranks[l]);
      if (r != ncclSuccess) {
        ncclGroupEnd();
        check_nccl(r, "ncclCommInitRank", nullptr, std::source_location::current());
      }
    }
    check_nccl(ncclGroupEnd(), "ncclCommInitRank", nullptr, std::source_location::current());
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclEngine() override {
    stop_.store(true);
    watchdog_.join();
    // Whatever is queued on the contexts first: NCCL frees buffers its kernels may still use.
    for (auto& c : contexts_) {
      try {
        c.synchronize();
      } catch (...) {
      }
    }
    if (aborted_.load()) return;  // the watchdog aborted (and so freed) them
    for (std::size_t l = 0; l < comms_.size(); ++l) {
      if (comms_[l] == nullptr) continue;
      DeviceGuard guard(contexts_[l].device().index, std::nothrow);
      ncclCommFinalize(comms_[l]);
      ncclCommDestroy(comms_[l]);
    }
  }

  std::string_view name() const noexcept override { return "nccl"; }

  void allreduce(Stream& stream, int local, const void* send, void* recv, std::size_t count,
                 DistType type, DistOp op, bool, const OpInfo& info) override {
    run_on(stream, info, [&](cudaStream_t s) {
      check_nccl(ncclAllReduce(send, recv, count, nccl_type(type), nccl_op(op), comm(local), s),
                 "ncclAllReduce", comm(local), info.where);
    });
  }

  void reduce(Stream& stream, int local, const void* send, void* recv, std::size_t count,
              DistType type, DistOp op, int root, bool, const OpInfo& info) override {
    run_on(stream, info, [&](cudaStream_t s) {
      check_nccl(ncclReduce(send, recv, count, nccl_type(type), nccl_op(op), root, comm(local), s),
                 "ncclReduce", comm(local), info.where);
    });
  }

  void broadcast(Stream& stream, int local, void* data, std::size_t count, DistType type, int root,
                 bool, const OpInfo& info) override {
    run_on(stream, info, [&](cudaStream_t s) {
      check_nccl(ncclBroadcast(data, data, count, nccl_type(type), root, comm(local), s),
                 "ncclBroadcast", comm(local), info.where);
    });
  }

  void allgather(Stream& stream, int local, const void* send, void* recv, std::size_t count,
                 DistType type, bool, const OpInfo& info) override {
    run_on(stream, info, [&](cudaStream_t s) {
      check_nccl(ncclAllGather(send, recv, count, nccl_type(type), comm(local), s), "ncclAllGather",
                 comm(local), info.where);
    });
  }

  void exchange(Stream& stream, int local, const void* send, std::span<const DistSegment> sends,
                void* recv, std::span<const DistSegment> recvs, DistType type,
                const OpInfo& info) override {
    const std::size_t elem = dist_type_size(type);
    run_on(stream, info, [&](cudaStream_t s) {
      ncclComm_t c = comm(local);
      check_nccl(ncclGroupStart(), "ncclGroupStart", c, info.where);
      ncclResult_t r = ncclSuccess;
      for (const auto& m : recvs) {
        if (m.count == 0 || r != ncclSuccess) continue;
        r = ncclRecv(static_cast<std::byte*>(recv) + m.offset * elem, m.count, nccl_type(type),
                     m.peer, c, s);
      }
      for (const auto& m : sends) {
        if (m.count == 0 || r != ncclSuccess) continue;
        r = ncclSend(static_cast<const std::byte*>(send) + m.offset * elem, m.count,
                     nccl_type(type), m.peer, c, s);
      }
      const ncclResult_t end = ncclGroupEnd();
      check_nccl(r, "ncclSend/ncclRecv", c, info.where);
      check_nccl(end, "ncclGroupEnd", c, info.where);
    });
  }

 private:
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
      poll_failure_notices();
      bool failed = process_failure().has_value();
      for (ncclComm_t c : comms_) {
        ncclResult_t async = ncclSuccess;
        if (c != nullptr && ncclCommGetAsyncError(c, &async) == ncclSuccess &&
            async != ncclSuccess && async != ncclInProgress) {
          fail_process(std::string("cuda: NCCL reported ") + ncclGetErrorString(async), true);
          failed = true;
        }
      }
      if (failed) {
        // NCCL allows an abort from another thread while a call hangs on the communicator.
        aborted_.store(true, std::memory_order_release);
        for (ncclComm_t c : comms_) {
          if (c != nullptr) ncclCommAbort(c);
        }
        // The aborted kernels end without an error of the stream's: the contexts carry the
        // failure, so that their next synchronize reports it.
        const std::string why =
            "dist: NCCL communication aborted: " + process_failure().value_or("an NCCL error");
        for (auto& c : contexts_) {
          auto& impl = c.impl();
          impl.failures()->fail(OpInfo{impl.issued(), "dist communication (NCCL)", {}}, why);
        }
        return;
      }
    }
  }

  std::vector<Context> contexts_;
  std::vector<ncclComm_t> comms_;
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
