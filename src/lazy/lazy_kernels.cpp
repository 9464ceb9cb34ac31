// The lazy layer's built-in kernel builders, registered as the LazyKernels extension of their
// backends (sluice/extension.hpp).

#include <memory>

#include "lazy/host/lazy_kernels.hpp"
#include "sluice/ext/lazy_kernels.hpp"
#include "sluice/extension.hpp"
#ifdef SLUICE_HAVE_CUDA
#include "lazy/cuda/lazy_kernels.hpp"
#endif

namespace sluice {

namespace {
// The registry owns what it is given; the built-ins are process-lifetime statics.
std::shared_ptr<LazyKernels> unowned(LazyKernels& k) {
  return {std::shared_ptr<void>(), &k};
}
}  // namespace

void LazyKernels::register_builtins() {
  register_extension<LazyKernels>("host", unowned(detail::host::lazy_kernels()));
#ifdef SLUICE_HAVE_CUDA
  register_extension<LazyKernels>("cuda", unowned(detail::cuda::lazy_kernels()));
#endif
}

}  // namespace sluice
