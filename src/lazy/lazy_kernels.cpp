// The lazy layer's host kernel builder, registered as the LazyKernels extension of the host
// backend (sluice/extension.hpp).

#include <memory>

#include "lazy/host/lazy_kernels.hpp"
#include "sluice/ext/lazy_kernels.hpp"
#include "sluice/extension.hpp"

namespace sluice {

namespace {
// The registry owns what it is given; the built-ins are process-lifetime statics.
std::shared_ptr<LazyKernels> unowned(LazyKernels& k) {
  return {std::shared_ptr<void>(), &k};
}
}  // namespace

void LazyKernels::register_builtins() {
  // The cuda kernel builder comes with the cuda module (lazy/cuda/register.cpp).
  register_extension<LazyKernels>("host", unowned(detail::host::lazy_kernels()));
}

}  // namespace sluice
