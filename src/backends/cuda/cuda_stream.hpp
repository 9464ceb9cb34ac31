#pragma once
// A cuda-backend stream: one non-blocking cudaStream_t (created, or wrapped without owning it).

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "backends/cuda/cuda_recent_ops.hpp"
#include "sluice/backend.hpp"

struct cublasContext;
struct cusparseContext;

namespace sluice::detail::cuda {

class CudaStream final : public Stream {
 public:
  /// A new non-blocking stream on `config.device` at `config.priority` (sluice scale).
  explicit CudaStream(const StreamConfig& config);
  /// Wraps `native` without owning it: it is never destroyed here. Throws if it belongs to
  /// another device than `config.device`.
  CudaStream(const StreamConfig& config, cudaStream_t native);
  ~CudaStream() override;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  void host_task(std::function<void()> fn, const OpInfo& op) override;
  void copy(void* dst, const void* src, std::size_t bytes, const OpInfo& op) override;
  void memset(void* dst, int value, std::size_t bytes, const OpInfo& op) override;
  void* allocate(std::size_t bytes, const OpInfo& op) override;
  void deallocate(void* ptr, std::size_t bytes) noexcept override;
  std::shared_ptr<EventImpl> record(bool timing, const OpInfo& op) override;
  void wait(const std::shared_ptr<EventImpl>& event, const OpInfo& op) override;
  bool query() override;
  void synchronize() override;
  void* native_handle() noexcept override { return stream_; }
  int priority() const noexcept override { return priority_; }
  void begin_capture(const OpInfo& op) override;
  std::shared_ptr<void> end_capture(const OpInfo& op) override;
  void abort_capture() noexcept override;
  bool can_record_as_node(const SimpleOp& op) const override;

  /// Launches a kernel (what sluice::cuda::launch issues).
  void launch(const void* func, dim3 grid, dim3 block, std::size_t shared_bytes, void** args,
              const OpInfo& op);

  /// Runs `fn(state, stream)` with this stream's device current, as operation `op` (what
  /// sluice::cuda::enqueue issues). Exceptions of `fn` propagate.
  void run_user(void (*fn)(void*, CUstream_st*), void* state, const OpInfo& op);

  /// The vendor handles, created on first use and bound to this stream for their whole life.
  [[nodiscard]] cublasContext* blas();
  [[nodiscard]] cusparseContext* sparse();

  [[nodiscard]] int device() const noexcept { return device_; }
  [[nodiscard]] cudaStream_t handle() const noexcept { return stream_; }

 private:
  /// Runs `fn` on CUDA's host-function thread once earlier work completed. Non-essential calls
  /// are skipped after a failure of this context; essential ones (waits) always run.
  /// `cleanup` runs after `fn` in any case, skipped or not.
  void enqueue_host(std::function<void()> fn, const OpInfo& op, bool essential,
                    std::function<void()> cleanup = {});
  /// Copies through a pinned staging block: see cuda_staging.hpp for why.
  void copy_from_pageable(void* dst, const void* src, std::size_t bytes, const OpInfo& op);
  void copy_to_pageable(void* dst, const void* src, std::size_t bytes, const OpInfo& op);
  [[noreturn]] void fault(cudaError_t err, const char* during);

  int device_;
  int priority_;
  bool owned_;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<FailureState> failures_;
  RecentOps recent_;
  std::mutex handles_mutex_;
  cublasContext* blas_ = nullptr;
  cusparseContext* sparse_ = nullptr;
  // Graph capture of one operation: host functions enqueued meanwhile stay alive with the
  // recording (a graph runs them at every launch) instead of being freed after one run.
  std::vector<std::shared_ptr<void>>* recording_ = nullptr;
  std::vector<std::shared_ptr<void>> recorded_;
  std::shared_lock<std::shared_mutex> capturing_;  // capture_exclusion, while capturing
};

/// `s` as a CudaStream; throws Error(unsupported) naming `what` if it is of another backend.
[[nodiscard]] CudaStream& as_cuda_stream(Stream& s, const char* what);

}  // namespace sluice::detail::cuda
