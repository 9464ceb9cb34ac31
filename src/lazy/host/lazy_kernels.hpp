#pragma once
// The host backend's LazyKernels (sluice/ext/lazy_kernels.hpp): generated C++ compiled at run
// time, kernels over chunks of the host pool, matrix products through OpenBLAS.

#include "sluice/ext/lazy_kernels.hpp"

namespace sluice::detail::host {

[[nodiscard]] LazyKernels& lazy_kernels();

}  // namespace sluice::detail::host
