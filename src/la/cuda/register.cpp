// The la layer's cuda extension, registered when the cuda module loads.

#include <memory>

#include "backends/cuda/cuda_module.hpp"
#include "la/cuda/la_kernels.hpp"
#include "sluice/extension.hpp"

namespace sluice::detail::cuda {
namespace {

const ModuleRegistration registration{[] {
  // The registry owns what it is given; the implementation is a process-lifetime static.
  sluice::register_extension<LaKernels>("cuda", {std::shared_ptr<void>(), &la_kernels()});
}};

}  // namespace
}  // namespace sluice::detail::cuda
