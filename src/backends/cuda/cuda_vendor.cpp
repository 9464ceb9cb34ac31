#include "backends/cuda/cuda_vendor.hpp"

#include <cublas_v2.h>
#include <cusparse.h>

#include <string>

#include "sluice/error.hpp"

namespace sluice::detail::cuda {
namespace {

[[noreturn]] void vendor_failure(const char* call, const std::string& status) {
  throw Error(Errc::backend_failure,
              std::string("cuda: ") + call + " failed: " + status +
                  "; if it says not initialized or allocation failed, the device is out of memory "
                  "or the CUDA context is broken");
}

}  // namespace

cublasContext* create_blas_handle(cudaStream_t stream) {
  cublasHandle_t h = nullptr;
  if (auto st = cublasCreate(&h); st != CUBLAS_STATUS_SUCCESS) {
    vendor_failure("cublasCreate", cublasGetStatusName(st));
  }
  if (auto st = cublasSetStream(h, stream); st != CUBLAS_STATUS_SUCCESS) {
    cublasDestroy(h);
    vendor_failure("cublasSetStream", cublasGetStatusName(st));
  }
  return h;
}

cusparseContext* create_sparse_handle(cudaStream_t stream) {
  cusparseHandle_t h = nullptr;
  if (auto st = cusparseCreate(&h); st != CUSPARSE_STATUS_SUCCESS) {
    vendor_failure("cusparseCreate", cusparseGetErrorName(st));
  }
  if (auto st = cusparseSetStream(h, stream); st != CUSPARSE_STATUS_SUCCESS) {
    cusparseDestroy(h);
    vendor_failure("cusparseSetStream", cusparseGetErrorName(st));
  }
  return h;
}

void destroy_blas_handle(cublasContext* handle) noexcept {
  if (handle != nullptr) (void)cublasDestroy(handle);
}

void destroy_sparse_handle(cusparseContext* handle) noexcept {
  if (handle != nullptr) (void)cusparseDestroy(handle);
}

}  // namespace sluice::detail::cuda
