// Matrix products of lazy programs on cuda: one cuBLAS call captured into a CUDA graph, the
// recording of a captured node (the format the backend's own stream capture makes). A cuBLAS
// call cannot be a kernel node whose addresses change in place, so a new binding records the call
// again and the program updates the node in place (cudaGraphExecChildGraphNodeSetParams: the same
// sizes give the same kernels, the same topology).
//
// One handle and one stream per device, used under a lock only to record. The handle has no
// workspace: the products of one program may run at once in independent branches of its graph,
// and a workspace of the handle would be shared by all of them.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_graph.hpp"
#include "backends/cuda/cuda_reaper.hpp"
#include "lazy/cuda/lazy_kernels.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::cuda {
namespace {

struct Recorder {
  std::mutex mutex;
  cudaStream_t stream = nullptr;
  cublasHandle_t handle = nullptr;
};

[[noreturn]] void blas_failed(const char* call, cublasStatus_t st, std::source_location loc) {
  throw Error(Errc::backend_failure,
              std::string("sluice::lazy: ") + call + " failed (" + cublasGetStatusName(st) +
                  ") while recording a matrix product",
              loc);
}

/// The recorder of `device`, made at first use. Never destroyed: the CUDA runtime may be gone
/// by the time static objects are.
Recorder& recorder(int device, std::source_location loc) {
  static std::mutex mutex;
  static auto* all = new std::unordered_map<int, std::unique_ptr<Recorder>>();
  std::lock_guard lock(mutex);
  auto& r = (*all)[device];
  if (r) return *r;
  auto made = std::make_unique<Recorder>();
  DeviceGuard guard(device, loc);
  check(cudaStreamCreateWithFlags(&made->stream, cudaStreamNonBlocking),
        "cudaStreamCreateWithFlags (lazy matrix products)", loc);
  if (auto st = cublasCreate(&made->handle); st != CUBLAS_STATUS_SUCCESS) {
    (void)cudaStreamDestroy(made->stream);
    blas_failed("cublasCreate", st, loc);
  }
  auto fail = [&](const char* call, cublasStatus_t st) {
    (void)cublasDestroy(made->handle);
    (void)cudaStreamDestroy(made->stream);
    blas_failed(call, st, loc);
  };
  if (auto st = cublasSetStream(made->handle, made->stream); st != CUBLAS_STATUS_SUCCESS)
    fail("cublasSetStream", st);
  if (auto st = cublasSetWorkspace(made->handle, nullptr, 0); st != CUBLAS_STATUS_SUCCESS)
    fail("cublasSetWorkspace", st);
  if (auto st = cublasSetPointerMode(made->handle, CUBLAS_POINTER_MODE_HOST);
      st != CUBLAS_STATUS_SUCCESS)
    fail("cublasSetPointerMode", st);
  r = std::move(made);
  return *r;
}

cublasOperation_t op(bool t) {
  return t ? CUBLAS_OP_T : CUBLAS_OP_N;
}

/// Issues the call on the handle's stream (being captured).
cublasStatus_t issue(cublasHandle_t h, const BlasGemmArgs& a) {
  const auto i = [](std::int64_t v) { return static_cast<int>(v); };  // checked when planned
  if (a.precision == Precision::f32) {
    const float alpha = static_cast<float>(a.alpha), beta = static_cast<float>(a.beta);
    const auto* A = static_cast<const float*>(a.a);
    const auto* B = static_cast<const float*>(a.b);
    auto* C = static_cast<float*>(a.c);
    if (a.batch == 1) {
      return cublasSgemm(h, op(a.trans_a), op(a.trans_b), i(a.m), i(a.n), i(a.k), &alpha, A,
                         i(a.lda), B, i(a.ldb), &beta, C, i(a.ldc));
    }
    return cublasSgemmStridedBatched(h, op(a.trans_a), op(a.trans_b), i(a.m), i(a.n), i(a.k),
                                     &alpha, A, i(a.lda), a.stride_a, B, i(a.ldb), a.stride_b,
                                     &beta, C, i(a.ldc), a.stride_c, i(a.batch));
  }
  const auto* A = static_cast<const double*>(a.a);
  const auto* B = static_cast<const double*>(a.b);
  auto* C = static_cast<double*>(a.c);
  if (a.batch == 1) {
    return cublasDgemm(h, op(a.trans_a), op(a.trans_b), i(a.m), i(a.n), i(a.k), &a.alpha, A,
                       i(a.lda), B, i(a.ldb), &a.beta, C, i(a.ldc));
  }
  return cublasDgemmStridedBatched(h, op(a.trans_a), op(a.trans_b), i(a.m), i(a.n), i(a.k),
                                   &a.alpha, A, i(a.lda), a.stride_a, B, i(a.ldb), a.stride_b,
                                   &a.beta, C, i(a.ldc), a.stride_c, i(a.batch));
}

/// Issues the batch whose operand lists are at `table` (A's, B's, C's: batch addresses each).
cublasStatus_t issue_table(cublasHandle_t h, const BlasGemmArgs& a, const void* table) {
  const auto i = [](std::int64_t v) { return static_cast<int>(v); };  // checked when planned
  const auto n = static_cast<std::size_t>(a.batch);
  if (a.precision == Precision::f32) {
    const float alpha = static_cast<float>(a.alpha), beta = static_cast<float>(a.beta);
    const auto* t = static_cast<float* const*>(table);
    return cublasSgemmBatched(h, op(a.trans_a), op(a.trans_b), i(a.m), i(a.n), i(a.k), &alpha, t,
                              i(a.lda), t + n, i(a.ldb), &beta, t + 2 * n, i(a.ldc), i(a.batch));
  }
  const auto* t = static_cast<double* const*>(table);
  return cublasDgemmBatched(h, op(a.trans_a), op(a.trans_b), i(a.m), i(a.n), i(a.k), &a.alpha, t,
                            i(a.lda), t + n, i(a.ldb), &a.beta, t + 2 * n, i(a.ldc), i(a.batch));
}

/// `issue` (on the recorder's stream, being captured) as a recording.
template <class Issue>
std::shared_ptr<void> record(const Device& device, const char* call, Issue issue,
                             std::source_location loc) {
  Recorder& r = recorder(device.index, loc);
  std::lock_guard lock(r.mutex);
  DeviceGuard guard(device.index, loc);
  std::shared_lock capturing(capture_exclusion());  // no device synchronize by the reaper meanwhile
  // Relaxed, as the backend's own captures: other threads' CUDA calls stay legal meanwhile.
  check(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeRelaxed),
        "cudaStreamBeginCapture (lazy matrix product)", loc);
  const cublasStatus_t st = issue(r.handle);
  auto rec = std::make_shared<CudaRecording>();
  const cudaError_t err = cudaStreamEndCapture(r.stream, &rec->graph);
  if (st != CUBLAS_STATUS_SUCCESS) {
    clear_error();
    blas_failed(call, st, loc);
  }
  check(err, "cudaStreamEndCapture (lazy matrix product)", loc);
  if (rec->graph == nullptr) {
    throw Error(Errc::backend_failure, "sluice::lazy: recording a matrix product gave no graph",
                loc);
  }
  return rec;
}

}  // namespace

std::shared_ptr<void> record_gemm(const Device& device, const BlasGemmArgs& args,
                                  std::source_location loc) {
  const bool f32 = args.precision == Precision::f32;
  const char* call = args.batch == 1
                         ? (f32 ? "cublasSgemm" : "cublasDgemm")
                         : (f32 ? "cublasSgemmStridedBatched" : "cublasDgemmStridedBatched");
  return record(
      device, call, [&](cublasHandle_t h) { return issue(h, args); }, loc);
}

std::shared_ptr<void> record_gemm_table(const Device& device, const BlasGemmArgs& args,
                                        const void* table, std::source_location loc) {
  return record(
      device, args.precision == Precision::f32 ? "cublasSgemmBatched" : "cublasDgemmBatched",
      [&](cublasHandle_t h) { return issue_table(h, args, table); }, loc);
}

}  // namespace sluice::detail::cuda
