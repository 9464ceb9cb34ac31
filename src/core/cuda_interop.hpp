#pragma once
// What sluice/cuda.hpp needs from the cuda module: an extension (sluice/extension.hpp) that the
// module registers for "cuda". libsluice defines the public functions (src/core/cuda_interop.cpp)
// and forwards to it, so a program that uses them links libsluice alone and loads CUDA only
// through the module.

#include <cstddef>
#include <string_view>

#include "sluice/backend.hpp"
#include "sluice/cuda.hpp"

namespace sluice::detail {

class CudaInterop {
 public:
  static constexpr std::string_view extension_name = "CudaInterop";
  virtual ~CudaInterop() = default;

  // Each takes the stream of a context on the cuda backend; `what` names the public call in
  // errors.
  [[nodiscard]] virtual cublasContext* blas_handle(Stream& stream, const char* what) = 0;
  [[nodiscard]] virtual cusparseContext* sparse_handle(Stream& stream, const char* what) = 0;
  [[nodiscard]] virtual CUstream_st* native_stream(Stream& stream, const char* what) = 0;
  /// Runs `fn(state, stream)` with the stream's device current, as operation `op`.
  virtual void run_user(Stream& stream, cuda::detail::EnqueueFn fn, void* state,
                        const OpInfo& op) = 0;
  /// Launches `kernel` (a host stub registered with the shared CUDA runtime) as operation `op`.
  virtual void launch(Stream& stream, const void* kernel, cuda::Dim3 grid, cuda::Dim3 block,
                      std::size_t shared_bytes, void** args, const OpInfo& op) = 0;
};

}  // namespace sluice::detail
