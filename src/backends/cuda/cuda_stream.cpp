#include "backends/cuda/cuda_stream.hpp"

#include <cstring>
#include <string>
#include <typeinfo>
#include <utility>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_event.hpp"
#include "backends/cuda/cuda_graph.hpp"
#include "backends/cuda/cuda_host_callback.hpp"
#include "backends/cuda/cuda_memory.hpp"
#include "backends/cuda/cuda_reaper.hpp"
#include "backends/cuda/cuda_staging.hpp"
#include "backends/cuda/cuda_vendor.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::cuda {
namespace {

/// What a host function needs; owned by the runtime between enqueue and run.
struct HostCall {
  std::function<void()> fn;
  std::shared_ptr<FailureState> failures;
  std::uint64_t seq = 0;
  std::string what;  // a copy: OpInfo::what lives only during the issuing call
  std::source_location where;
  bool essential = false;
  std::function<void()> cleanup;  // runs even when `fn` is skipped (returns staging blocks)
};

// Runs the call's function unless its context skips it, recording what it throws. Nothing may
// escape: an exception crossing the runtime's thread would terminate the process.
void run_call(HostCall& call) noexcept {
  try {
    if (call.essential || !call.failures->skip(call.seq)) {
      const OpInfo op{call.seq, call.what, call.where};
      try {
        call.fn();
      } catch (const std::exception& e) {
        call.failures->fail(op, e.what());
      } catch (...) {
        call.failures->fail(op, "an exception not derived from std::exception");
      }
    }
  } catch (...) {
    // Recording the failure itself failed (out of memory): nothing better can be done here.
  }
}

// The trampoline CUDA calls. It runs with the thread marked, so that destructors of sluice
// objects released here defer their CUDA calls instead of making them.
void run_host_call(void* raw) noexcept {
  HostCallbackScope scope;
  std::unique_ptr<HostCall> call(static_cast<HostCall*>(raw));
  run_call(*call);
  if (call->cleanup) call->cleanup();  // cleanups are noexcept lambdas
  call.reset();                        // the captures die inside the scope
}

// As run_host_call for a host function inside a graph: it runs at every launch, so the call is
// owned by the recording, not consumed.
void run_kept_host_call(void* raw) noexcept {
  HostCallbackScope scope;
  run_call(*static_cast<HostCall*>(raw));
}

}  // namespace

CudaStream::CudaStream(const StreamConfig& config)
    : device_(config.device),
      priority_(config.priority),
      owned_(true),
      failures_(config.failures ? config.failures : std::make_shared<FailureState>()) {
  require_device(device_);
  DeviceGuard guard(device_);
  // sluice counts like CUDA: 0 is the least urgent, more negative is more urgent.
  check(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority_),
        "cudaStreamCreateWithPriority");
}

CudaStream::CudaStream(const StreamConfig& config, cudaStream_t native)
    : device_(config.device),
      priority_(0),
      owned_(false),
      stream_(native),
      failures_(config.failures ? config.failures : std::make_shared<FailureState>()) {
  require_device(device_);
  DeviceGuard guard(device_);
  int owner = -1;
  check(cudaStreamGetDevice(native, &owner), "cudaStreamGetDevice (is it a live cudaStream_t?)");
  if (owner != device_) {
    throw Error(Errc::invalid_argument,
                "Context::wrap: the stream belongs to cuda:" + std::to_string(owner) +
                    ", not cuda:" + std::to_string(device_) + "; wrap it with Device{\"cuda\", " +
                    std::to_string(owner) + "}");
  }
  int p = 0;
  check(cudaStreamGetPriority(native, &p), "cudaStreamGetPriority");
  priority_ = p;
}

CudaStream::~CudaStream() {
  auto release = [stream = stream_, owned = owned_, blas = blas_, sparse = sparse_,
                  device = device_] {
    DeviceGuard guard(device, std::nothrow);
    destroy_blas_handle(blas);
    destroy_sparse_handle(sparse);
    if (owned && cudaStreamDestroy(stream) != cudaSuccess) clear_error();
  };
  if (in_host_callback()) {
    defer(std::move(release));  // frees deferred earlier for this stream run before it
    return;
  }
  if (has_deferred()) run_deferred();
  release();
}

void CudaStream::enqueue_host(std::function<void()> fn, const OpInfo& op, bool essential,
                              std::function<void()> cleanup) {
  auto call =
      std::make_unique<HostCall>(HostCall{std::move(fn), failures_, op.seq, std::string(op.what),
                                          op.where, essential, std::move(cleanup)});
  if (recording_ != nullptr) {
    std::shared_ptr<HostCall> kept(std::move(call));
    check(cudaLaunchHostFunc(stream_, &run_kept_host_call, kept.get()), "cudaLaunchHostFunc",
          op.where);
    recording_->push_back(std::move(kept));
    return;
  }
  check(cudaLaunchHostFunc(stream_, &run_host_call, call.get()), "cudaLaunchHostFunc", op.where);
  (void)call.release();  // run_host_call owns it now
}

void CudaStream::host_task(std::function<void()> fn, const OpInfo& op) {
  DeviceGuard guard(device_, op.where);
  enqueue_host(std::move(fn), op, /*essential=*/false);
  recent_.add(op);
}

void CudaStream::copy(void* dst, const void* src, std::size_t bytes, const OpInfo& op) {
  DeviceGuard guard(device_, op.where);
  const auto d = classify(dst);
  const auto s = classify(src);
  if (d.kind != MemoryKind::device && s.kind != MemoryKind::device) {
    // Host to host: CUDA would copy at once, synchronously; sluice copies in stream order.
    enqueue_host([=] { std::memmove(dst, src, bytes); }, op, /*essential=*/false);
  } else if (s.kind == MemoryKind::pageable) {
    copy_from_pageable(dst, src, bytes, op);
  } else if (d.kind == MemoryKind::pageable) {
    copy_to_pageable(dst, src, bytes, op);
  } else {
    // Device, pinned and peer memory: cudaMemcpyDefault lets unified addressing tell them apart.
    prepare_peer_copy(d.device, s.device);
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), "cudaMemcpyAsync",
          op.where);
  }
  recent_.add(op);
}

void CudaStream::copy_from_pageable(void* dst, const void* src, std::size_t bytes,
                                    const OpInfo& op) {
  auto& pool = staging_pool();
  void* block = pool.acquire(bytes);
  if (block == nullptr) {  // no pinned memory to be had: let the driver stage it, blocking
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), "cudaMemcpyAsync",
          op.where);
    return;
  }
  // The source is read when the stream gets there, as on every backend. If a later enqueue fails
  // the block stays referenced by the queued fill, so it is leaked rather than released.
  enqueue_host([=] { std::memcpy(block, src, bytes); }, op, /*essential=*/false);
  check(cudaMemcpyAsync(dst, block, bytes, cudaMemcpyDefault, stream_), "cudaMemcpyAsync",
        op.where);
  enqueue_host([] {}, op, /*essential=*/true,
               [&pool, block, bytes] { pool.release(block, bytes); });
}

void CudaStream::copy_to_pageable(void* dst, const void* src, std::size_t bytes, const OpInfo& op) {
  auto& pool = staging_pool();
  void* block = pool.acquire(bytes);
  if (block == nullptr) {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), "cudaMemcpyAsync",
          op.where);
    return;
  }
  check(cudaMemcpyAsync(block, src, bytes, cudaMemcpyDefault, stream_), "cudaMemcpyAsync",
        op.where);
  enqueue_host([=] { std::memcpy(dst, block, bytes); }, op, /*essential=*/false,
               [&pool, block, bytes] { pool.release(block, bytes); });
}

void CudaStream::memset(void* dst, int value, std::size_t bytes, const OpInfo& op) {
  DeviceGuard guard(device_, op.where);
  if (classify(dst).kind == MemoryKind::pageable) {
    // The device cannot write pageable memory; the host backend accepts it, so set it on the
    // host, in stream order.
    enqueue_host([=] { std::memset(dst, value, bytes); }, op, /*essential=*/false);
  } else {
    check(cudaMemsetAsync(dst, value, bytes, stream_), "cudaMemsetAsync", op.where);
  }
  recent_.add(op);
}

void* CudaStream::allocate(std::size_t bytes, const OpInfo& op) {
  DeviceGuard guard(device_, op.where);
  void* p = pool_allocate(device_, stream_, bytes, op);
  recent_.add(op);
  return p;
}

void CudaStream::deallocate(void* ptr, std::size_t) noexcept {
  if (in_host_callback()) {
    // The stream outlives this deferral: its destructor runs deferred work first.
    defer([ptr, stream = stream_, device = device_] {
      DeviceGuard guard(device, std::nothrow);
      if (cudaFreeAsync(ptr, stream) != cudaSuccess) clear_error();
    });
    return;
  }
  if (has_deferred()) run_deferred();
  DeviceGuard guard(device_, std::nothrow);
  if (cudaFreeAsync(ptr, stream_) != cudaSuccess) clear_error();  // a broken context only leaks
}

std::shared_ptr<EventImpl> CudaStream::record(bool timing, const OpInfo& op) {
  DeviceGuard guard(device_, op.where);
  auto e = std::make_shared<CudaEvent>(device_, timing);
  check(cudaEventRecord(e->handle(), stream_), "cudaEventRecord", op.where);
  return e;
}

void CudaStream::wait(const std::shared_ptr<EventImpl>& event, const OpInfo& op) {
  DeviceGuard guard(device_, op.where);
  auto mine = failures_;
  const auto seq = op.seq;
  const EventImpl& any = *event;
  if (typeid(any) == typeid(CudaEvent)) {
    // On the device, across devices too; costs the host nothing more.
    const auto& e = static_cast<const CudaEvent&>(any);
    check(cudaStreamWaitEvent(stream_, e.handle(), 0), "cudaStreamWaitEvent", op.where);
    // Failures of host tasks cross contexts on the host: only where the other side can fail.
    if (event->failures && event->failures->may_fail()) {
      enqueue_host(
          [theirs = event->failures, upto = event->seq, mine, seq] {
            if (auto f = theirs->at_or_before(upto)) mine->adopt(std::move(f), seq);
          },
          op, /*essential=*/true);
    }
  } else {
    // An event of another backend (e.g. host): CUDA cannot wait for it on the device, so a host
    // function blocks until it completes. It occupies CUDA's host-function thread meanwhile, which
    // delays host tasks of other CUDA contexts of this process until the event completes.
    enqueue_host(
        [event, mine, seq] {
          event->synchronize();
          if (event->failures) {
            if (auto f = event->failures->at_or_before(event->seq)) mine->adopt(std::move(f), seq);
          }
        },
        op, /*essential=*/true);
  }
  recent_.add(op);
}

void CudaStream::begin_capture(const OpInfo& op) {
  DeviceGuard guard(device_, op.where);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(stream_, &status), "cudaStreamIsCapturing", op.where);
  if (status != cudaStreamCaptureStatusNone) {
    throw Error(Errc::invalid_state,
                "the context's cudaStream_t is already being captured by code outside sluice",
                op.where);
  }
  // Relaxed: other threads' unrelated CUDA calls stay legal while this operation is recorded;
  // the reaper's device synchronize waits for it to end.
  std::shared_lock capturing(capture_exclusion());
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture",
        op.where);
  capturing_ = std::move(capturing);
  recorded_.clear();
  recording_ = &recorded_;
}

std::shared_ptr<void> CudaStream::end_capture(const OpInfo& op) {
  DeviceGuard guard(device_, op.where);
  recording_ = nullptr;
  auto r = std::make_shared<CudaRecording>();
  r->keep_alive = std::move(recorded_);
  recorded_.clear();
  const auto err = cudaStreamEndCapture(stream_, &r->graph);
  if (capturing_.owns_lock()) capturing_.unlock();
  if (err != cudaSuccess) {
    clear_error();
    throw Error(Errc::invalid_state,
                "the CUDA stream capture was invalidated (" + describe(err) +
                    "): a call that cannot be captured (one that synchronizes, or work a foreign "
                    "library put on the stream) ran during the operation",
                op.where);
  }
  std::size_t nodes = 0;
  check(cudaGraphGetNodes(r->graph, nullptr, &nodes), "cudaGraphGetNodes", op.where);
  if (nodes == 0) return nullptr;
  return r;
}

bool CudaStream::can_record_as_node(const SimpleOp& op) const {
  // A memcpy or memset node does what cudaMemcpyAsync / cudaMemsetAsync do on device memory of
  // this device and pinned memory; pageable memory needs staging, and copies between pinned
  // blocks or to a peer take other paths in `copy` (a host function, peer access set-up).
  // sluice's registry says where its own buffers lie; the runtime is asked about the others.
  auto reachable = [this](const void* p, SimpleOp::Place place, int index, bool& device) {
    PointerInfo info;
    switch (place) {
      case SimpleOp::Place::device:
        info = {MemoryKind::device, index};
        break;
      case SimpleOp::Place::pinned:
        info = {MemoryKind::pinned, -1};
        break;
      case SimpleOp::Place::pageable:
        break;
      case SimpleOp::Place::unknown:
        info = classify(p);
        break;
    }
    device = info.kind == MemoryKind::device;
    return info.kind == MemoryKind::pinned || (device && info.device == device_);
  };
  bool dst_device = false;
  if (!reachable(op.dst, op.dst_place, op.dst_device, dst_device)) return false;
  if (op.kind == SimpleOp::Kind::memset) return dst_device;
  bool src_device = false;
  return reachable(op.src, op.src_place, op.src_device, src_device) && (dst_device || src_device);
}

void CudaStream::abort_capture() noexcept {
  recording_ = nullptr;
  recorded_.clear();
  DeviceGuard guard(device_, std::nothrow);
  cudaGraph_t g = nullptr;
  if (cudaStreamEndCapture(stream_, &g) == cudaSuccess && g != nullptr) (void)cudaGraphDestroy(g);
  if (capturing_.owns_lock()) capturing_.unlock();
  clear_error();
}

bool CudaStream::query() {
  refuse_in_host_callback();
  auto err = cudaStreamQuery(stream_);
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) return false;
  fault(err, "cudaStreamQuery");
}

void CudaStream::synchronize() {
  refuse_in_host_callback();
  if (auto err = cudaStreamSynchronize(stream_); err != cudaSuccess) {
    fault(err, "cudaStreamSynchronize");
  }
  recent_.clear();
}

void CudaStream::fault(cudaError_t err, const char* during) {
  clear_error();
  std::string message = "cuda:" + std::to_string(device_) + ": " + during + " reported " +
                        describe(err) +
                        "; operations in flight on this context since the last synchronize "
                        "(oldest first): " +
                        recent_.describe();
  if (const char* a = advice(err); *a != '\0') message.append(". ").append(a);
  throw Error(Errc::backend_failure, message, recent_.newest());
}

void CudaStream::launch(const void* func, dim3 grid, dim3 block, std::size_t shared_bytes,
                        void** args, const OpInfo& op) {
  DeviceGuard guard(device_, op.where);
  check(cudaLaunchKernel(func, grid, block, args, shared_bytes, stream_), "cudaLaunchKernel",
        op.where);
  recent_.add(op);
}

void CudaStream::run_user(void (*fn)(void*, CUstream_st*), void* state, const OpInfo& op) {
  DeviceGuard guard(device_, op.where);
  fn(state, stream_);
  recent_.add(op);
}

cublasContext* CudaStream::blas() {
  std::lock_guard lock(handles_mutex_);
  if (blas_ == nullptr) {
    DeviceGuard guard(device_);
    blas_ = create_blas_handle(stream_);
  }
  return blas_;
}

cusparseContext* CudaStream::sparse() {
  std::lock_guard lock(handles_mutex_);
  if (sparse_ == nullptr) {
    DeviceGuard guard(device_);
    sparse_ = create_sparse_handle(stream_);
  }
  return sparse_;
}

CudaStream& as_cuda_stream(Stream& s, const char* what) {
  // typeid, not dynamic_cast: this sits on the kernel-launch path.
  if (typeid(s) != typeid(CudaStream)) [[unlikely]] {
    throw Error(Errc::unsupported, std::string(what) +
                                       " needs a context on a cuda device; this context is on "
                                       "another backend (create it with Device{\"cuda\", 0})");
  }
  return static_cast<CudaStream&>(s);
}

}  // namespace sluice::detail::cuda
