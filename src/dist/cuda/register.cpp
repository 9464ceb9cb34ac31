// The dist layer's cuda extension (NCCL and the distributed solvers' kernels), registered when
// the cuda module loads.

#include <memory>

#include "backends/cuda/cuda_module.hpp"
#include "dist/cuda/dist_kernels.hpp"
#include "sluice/extension.hpp"

namespace sluice::detail::cuda {
namespace {

const ModuleRegistration registration{[] {
  // The registry owns what it is given; the implementation is a process-lifetime static.
  sluice::register_extension<DistKernels>("cuda",
                                          {std::shared_ptr<void>(), &dist::cuda_dist_kernels()});
}};

}  // namespace
}  // namespace sluice::detail::cuda
