#pragma once
// The host backend's DistKernels (dist_kernels.cpp).

#include "sluice/ext/dist.hpp"

namespace sluice::detail::dist {

[[nodiscard]] DistKernels& host_dist_kernels();

}  // namespace sluice::detail::dist
