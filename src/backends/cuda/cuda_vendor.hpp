#pragma once
// cuBLAS and cuSPARSE handles. Kept apart from the stream so that only one file includes the
// vendor headers.

#include <cuda_runtime_api.h>

struct cublasContext;
struct cusparseContext;

namespace sluice::detail::cuda {

/// A handle bound to `stream`, on the current device; throws on failure.
[[nodiscard]] cublasContext* create_blas_handle(cudaStream_t stream);
[[nodiscard]] cusparseContext* create_sparse_handle(cudaStream_t stream);
/// Null is allowed. Never throws.
void destroy_blas_handle(cublasContext* handle) noexcept;
void destroy_sparse_handle(cusparseContext* handle) noexcept;

}  // namespace sluice::detail::cuda
