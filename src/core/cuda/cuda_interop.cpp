// The cuda module's side of sluice/cuda.hpp: the CudaInterop extension (core/cuda_interop.hpp).

#include "core/cuda_interop.hpp"

#include <memory>
#include <string>
#include <string_view>

#include "backends/cuda/cuda_module.hpp"
#include "backends/cuda/cuda_stream.hpp"
#include "backends/cuda/kernel_preload.hpp"
#include "sluice/error.hpp"
#include "sluice/extension.hpp"

namespace sluice::detail::cuda {
namespace {

class CudaInteropImpl final : public CudaInterop {
 public:
  cublasContext* blas_handle(Stream& stream, const char* what) override {
    return as_cuda_stream(stream, what).blas();
  }
  cusparseContext* sparse_handle(Stream& stream, const char* what) override {
    return as_cuda_stream(stream, what).sparse();
  }
  CUstream_st* native_stream(Stream& stream, const char* what) override {
    return as_cuda_stream(stream, what).handle();
  }
  void run_user(Stream& stream, sluice::cuda::detail::EnqueueFn fn, void* state,
                const OpInfo& op) override {
    as_cuda_stream(stream, "sluice::cuda::enqueue").run_user(fn, state, op);
  }
  void launch(Stream& stream, const void* kernel, sluice::cuda::Dim3 grid, sluice::cuda::Dim3 block,
              std::size_t shared_bytes, void** args, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "sluice::cuda::launch");
    try {
      s.launch(kernel, dim3(grid.x, grid.y, grid.z), dim3(block.x, block.y, block.z), shared_bytes,
               args, op);
    } catch (const Error& e) {
      // The stub is unknown to this module's runtime when the program registered its kernels
      // with a runtime of its own (nvcc's default, the static one).
      const std::string_view what = e.what();
      if (what.find("cudaErrorInvalidDeviceFunction") == std::string_view::npos) throw;
      throw Error(e.code(),
                  std::string(what.substr(what.find(' ') + 1)) +
                      "; or the kernel was registered with another copy of the CUDA runtime: "
                      "build its .cu file with the shared runtime (CMake: CUDA_RUNTIME_LIBRARY "
                      "Shared and link sluice::cuda; nvcc: -cudart shared)",
                  e.where());
    }
  }
  CudaKernelLoad kernels(int device, bool load) override {
    const auto r = load ? preload_kernels(device) : kernel_status(device);
    return {r.files, r.functions, r.loaded, r.lazy, r.failure};
  }
};

const ModuleRegistration registration{[] {
  static CudaInteropImpl interop;  // the registry owns what it is given; this lives on
  sluice::register_extension<CudaInterop>(
      "cuda", std::shared_ptr<CudaInterop>(std::shared_ptr<void>(), &interop));
}};

}  // namespace
}  // namespace sluice::detail::cuda
