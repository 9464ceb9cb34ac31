#pragma once
// CSR products through cuSPARSE (deterministic SpMV) and each matrix's prepared
// descriptors.
// Part of one translation unit: src/la/cuda/la_kernels.cu includes it (and says how the
// kernels work).

#include "la/cuda/launch.cuh"

namespace sluice::detail::cuda {
namespace {

// ---- cuSPARSE -----------------------------------------------------------------------------------

void sparse_check(cusparseStatus_t st, const char* what, const OpInfo& op) {
  if (st != CUSPARSE_STATUS_SUCCESS) {
    throw Error(Errc::backend_failure,
                std::string("cuda: ") + what + " failed: " + cusparseGetErrorName(st) + " (" +
                    cusparseGetErrorString(st) + ")",
                op.where);
  }
}

/// A matrix's cuSPARSE descriptor and the SpMV buffer size it needs (queried on first use).
struct Prepared {
  cusparseSpMatDescr_t mat = nullptr;
  std::mutex mutex;
  bool sized = false;
  std::size_t buffer_bytes = 0;
  ~Prepared() {
    if (mat != nullptr) cusparseDestroySpMat(mat);
  }
};

/// out = A in (cuSPARSE on the stream's handle). CSR_ALG2: bit-wise deterministic, so that sync
/// and async solves (and repeated runs) agree exactly.
void spmv(CudaStream& s, Scratch& sc, const LaCsr& A, const double* in, double* out,
          const OpInfo& op) {
  if (A.nnz == 0) {  // cuSPARSE wants arrays to describe; the product is zero
    cuda_check(
        cudaMemsetAsync(out, 0, sizeof(double) * static_cast<std::size_t>(A.rows), s.handle()),
        "cudaMemsetAsync", op);
    return;
  }
  auto* prepared = static_cast<Prepared*>(const_cast<void*>(A.prepared));
  if (prepared == nullptr || prepared->mat == nullptr) {
    throw Error(Errc::invalid_state, "cuda: CSR matrix without a cuSPARSE descriptor", op.where);
  }
  cusparseHandle_t h = s.sparse();
  sparse_check(cusparseSetPointerMode(h, CUSPARSE_POINTER_MODE_HOST), "cusparseSetPointerMode", op);
  cusparseDnVecDescr_t vx = nullptr, vy = nullptr;
  sparse_check(cusparseCreateDnVec(&vx, A.cols, const_cast<double*>(in), CUDA_R_64F),
               "cusparseCreateDnVec", op);
  sparse_check(cusparseCreateDnVec(&vy, A.rows, out, CUDA_R_64F), "cusparseCreateDnVec", op);
  const double one = 1.0, zero = 0.0;
  try {
    std::size_t bytes = 0;
    {
      std::lock_guard lock(prepared->mutex);
      if (!prepared->sized) {
        sparse_check(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one,
                                             prepared->mat, vx, &zero, vy, CUDA_R_64F,
                                             CUSPARSE_SPMV_CSR_ALG2, &prepared->buffer_bytes),
                     "cusparseSpMV_bufferSize", op);
        prepared->sized = true;
      }
      bytes = prepared->buffer_bytes;
    }
    if (bytes > 0) ensure_spmv_buffer(s, sc, bytes, op);
    // One host thread at a time per matrix: cuSPARSE may keep analysis in the descriptor.
    std::lock_guard lock(prepared->mutex);
    sparse_check(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, prepared->mat, vx, &zero,
                              vy, CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG2, sc.spmv),
                 "cusparseSpMV", op);
  } catch (...) {
    cusparseDestroyDnVec(vx);
    cusparseDestroyDnVec(vy);
    throw;
  }
  cusparseDestroyDnVec(vx);
  cusparseDestroyDnVec(vy);
}

/// A small SpMV as spmv() makes it (CSR_ALG2, doubles, host scalars) on a handle and a stream of
/// its own, at two sizes: loads cuSPARSE's kernels on the current device ahead of a solve
/// (backends/cuda/kernel_preload.hpp). Synchronizes the stream before it frees what it used.
void warm_up_spmv(cudaStream_t stream) {
  const OpInfo op{0, "cuSPARSE warm-up", std::source_location::current()};
  cusparseHandle_t h = nullptr;
  sparse_check(cusparseCreate(&h), "cusparseCreate", op);
  struct Cleanup {
    explicit Cleanup(cusparseHandle_t handle) : h(handle) {}
    Cleanup(const Cleanup&) = delete;
    Cleanup& operator=(const Cleanup&) = delete;
    cusparseHandle_t h;
    std::vector<void*> device;
    cusparseSpMatDescr_t mat = nullptr;
    cusparseDnVecDescr_t x = nullptr, y = nullptr;
    void drop() {
      if (mat != nullptr) cusparseDestroySpMat(mat);
      if (x != nullptr) cusparseDestroyDnVec(x);
      if (y != nullptr) cusparseDestroyDnVec(y);
      mat = nullptr;
      x = y = nullptr;
      for (void* p : device) (void)cudaFree(p);
      device.clear();
    }
    ~Cleanup() {
      drop();
      cusparseDestroy(h);
    }
  } c{h};
  sparse_check(cusparseSetStream(h, stream), "cusparseSetStream", op);
  sparse_check(cusparseSetPointerMode(h, CUSPARSE_POINTER_MODE_HOST), "cusparseSetPointerMode", op);
  auto alloc = [&](std::size_t bytes) {
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)), "cudaMalloc", op);
    c.device.push_back(p);
    return p;
  };
  for (const std::int32_t n : {64, 1 << 17}) {
    // The 1D Laplacian: tridiagonal.
    std::vector<std::int32_t> row_ptr{0}, col;
    std::vector<double> val;
    for (std::int32_t i = 0; i < n; ++i) {
      for (std::int32_t j = std::max(i - 1, 0); j <= std::min(i + 1, n - 1); ++j) {
        col.push_back(j);
        val.push_back(i == j ? 2.0 : -1.0);
      }
      row_ptr.push_back(static_cast<std::int32_t>(col.size()));
    }
    const auto nnz = static_cast<std::int64_t>(col.size());
    auto* d_row = static_cast<std::int32_t*>(alloc(row_ptr.size() * sizeof(std::int32_t)));
    auto* d_col = static_cast<std::int32_t*>(alloc(col.size() * sizeof(std::int32_t)));
    auto* d_val = static_cast<double*>(alloc(val.size() * sizeof(double)));
    auto* d_x = static_cast<double*>(alloc(static_cast<std::size_t>(n) * sizeof(double)));
    auto* d_y = static_cast<double*>(alloc(static_cast<std::size_t>(n) * sizeof(double)));
    cuda_check(cudaMemcpy(d_row, row_ptr.data(), row_ptr.size() * sizeof(std::int32_t),
                          cudaMemcpyHostToDevice),
               "cudaMemcpy", op);
    cuda_check(
        cudaMemcpy(d_col, col.data(), col.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice),
        "cudaMemcpy", op);
    cuda_check(cudaMemcpy(d_val, val.data(), val.size() * sizeof(double), cudaMemcpyHostToDevice),
               "cudaMemcpy", op);
    cuda_check(cudaMemset(d_x, 0, static_cast<std::size_t>(n) * sizeof(double)), "cudaMemset", op);
    sparse_check(cusparseCreateCsr(&c.mat, n, n, nnz, d_row, d_col, d_val, CUSPARSE_INDEX_32I,
                                   CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F),
                 "cusparseCreateCsr", op);
    sparse_check(cusparseCreateDnVec(&c.x, n, d_x, CUDA_R_64F), "cusparseCreateDnVec", op);
    sparse_check(cusparseCreateDnVec(&c.y, n, d_y, CUDA_R_64F), "cusparseCreateDnVec", op);
    const double one = 1.0, zero = 0.0;
    std::size_t bytes = 0;
    sparse_check(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, c.mat, c.x,
                                         &zero, c.y, CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG2, &bytes),
                 "cusparseSpMV_bufferSize", op);
    void* buffer = alloc(bytes);
    sparse_check(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, c.mat, c.x, &zero, c.y,
                              CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG2, buffer),
                 "cusparseSpMV", op);
    cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize", op);
    c.drop();
  }
}

}  // namespace
}  // namespace sluice::detail::cuda
