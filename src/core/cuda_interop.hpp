#pragma once
// What sluice/cuda.hpp needs from the cuda module: an extension (sluice/extension.hpp) that the
// module registers for "cuda". libsluice defines the public functions (src/core/cuda_interop.cpp)
// and forwards to it, so a program that uses them links libsluice alone and loads CUDA only
// through the module.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/backend.hpp"
#include "sluice/cuda.hpp"

namespace sluice::detail {

/// The module's kernels on one device (backends/cuda/kernel_preload.hpp).
struct CudaKernelLoad {
  std::vector<std::string> files;  // the module's .cu files that registered, as __FILE__ gave them
  std::size_t functions = 0;       // functions in those files' modules on the device
  std::size_t loaded = 0;          // of those, loaded
  bool lazy = false;               // the process loads modules lazily
  std::string failure;             // empty when every step worked
};

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
  /// The module's kernels on `device`; `load`: loads them first (and warms cuSPARSE up), as the
  /// NCCL engine does for a process that drives several GPUs.
  [[nodiscard]] virtual CudaKernelLoad kernels(int device, bool load) = 0;
};

}  // namespace sluice::detail
