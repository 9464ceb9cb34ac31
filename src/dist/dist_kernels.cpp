// The built-in DistKernels (sluice/ext/dist.hpp): the host backend's, and the cuda backend's
// where it is built with NCCL.

#include "dist/host/dist_kernels.hpp"
#include "sluice/extension.hpp"
#ifdef SLUICE_HAVE_NCCL
#include "dist/cuda/dist_kernels.hpp"
#endif

namespace sluice {

namespace {
// The registry owns what it is given; the built-ins are process-lifetime statics.
std::shared_ptr<DistKernels> unowned(DistKernels& k) {
  return {std::shared_ptr<void>(), &k};
}
}  // namespace

void DistKernels::register_builtins() {
  register_extension<DistKernels>("host", unowned(detail::dist::host_dist_kernels()));
#ifdef SLUICE_HAVE_NCCL
  register_extension<DistKernels>("cuda", unowned(detail::dist::cuda_dist_kernels()));
#endif
}

}  // namespace sluice
