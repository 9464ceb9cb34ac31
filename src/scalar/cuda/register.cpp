// The scalar layer's cuda extension, registered when the cuda module loads.

#include <memory>

#include "backends/cuda/cuda_module.hpp"
#include "scalar/cuda/scalar_kernels.hpp"
#include "sluice/extension.hpp"

namespace sluice::detail::cuda {
namespace {

const ModuleRegistration registration{[] {
  // The registry owns what it is given; the interpreter is a process-lifetime static.
  sluice::register_extension<ScalarKernels>("cuda",
                                            {std::shared_ptr<void>(), &scalar_interpreter()});
}};

}  // namespace
}  // namespace sluice::detail::cuda
