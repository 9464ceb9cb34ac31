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

}  // namespace
}  // namespace sluice::detail::cuda
