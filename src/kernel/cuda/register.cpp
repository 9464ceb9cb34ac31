// The kernel layer's cuda extensions (the loader, NVRTC, canned BLAS, RNG and FFT), registered
// when the cuda module loads.

#include <memory>

#include "backends/cuda/cuda_module.hpp"
#include "kernel/cuda/canned.hpp"
#include "kernel/cuda/cuda_loader.hpp"
#include "kernel/nvrtc.hpp"
#include "sluice/extension.hpp"

namespace sluice::detail::cuda {

Nvrtc& nvrtc();  // kernel/cuda/nvrtc.cpp

namespace {

// The registry owns what it is given; the implementations are process-lifetime statics.
template <class E>
std::shared_ptr<E> unowned(E& e) {
  return {std::shared_ptr<void>(), &e};
}

const ModuleRegistration registration{[] {
  sluice::register_extension<KernelLoader>("cuda", unowned(kernel_loader()));
  sluice::register_extension<Nvrtc>("cuda", unowned(nvrtc()));
  sluice::register_extension<Blas>("cuda", unowned(canned_blas()));
  sluice::register_extension<Rng>("cuda", unowned(canned_rng()));
  sluice::register_extension<Fft>("cuda", unowned(canned_fft()));
}};

}  // namespace
}  // namespace sluice::detail::cuda
