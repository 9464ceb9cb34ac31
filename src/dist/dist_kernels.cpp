// The built-in DistKernels (sluice/ext/dist.hpp): the host backend's. The cuda backend's comes
// with the cuda module where it is built with NCCL (dist/cuda/register.cpp).

#include <memory>

#include "dist/host/dist_kernels.hpp"
#include "sluice/extension.hpp"

namespace sluice {

void DistKernels::register_builtins() {
  // The registry owns what it is given; the built-in is a process-lifetime static.
  register_extension<DistKernels>("host",
                                  {std::shared_ptr<void>(), &detail::dist::host_dist_kernels()});
}

}  // namespace sluice
