// The lazy layer's cuda extension (generated CUDA C++ built by NVRTC), registered when the cuda
// module loads.

#include <memory>

#include "backends/cuda/cuda_module.hpp"
#include "lazy/cuda/lazy_kernels.hpp"
#include "sluice/extension.hpp"

namespace sluice::detail::cuda {
namespace {

const ModuleRegistration registration{[] {
  // The registry owns what it is given; the implementation is a process-lifetime static.
  sluice::register_extension<LazyKernels>("cuda", {std::shared_ptr<void>(), &lazy_kernels()});
}};

}  // namespace
}  // namespace sluice::detail::cuda
