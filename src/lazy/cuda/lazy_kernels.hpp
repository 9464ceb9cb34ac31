#pragma once
// The cuda backend's LazyKernels (sluice/ext/lazy_kernels.hpp): generated CUDA C++ built by NVRTC
// through the kernel cache, loaded as a library, each kernel a graph kernel node.
// No CUDA header here.

#include "sluice/ext/lazy_kernels.hpp"

namespace sluice::detail::cuda {

[[nodiscard]] LazyKernels& lazy_kernels();

}  // namespace sluice::detail::cuda
