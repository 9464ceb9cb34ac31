#pragma once
// The cuda backend's DistKernels (sluice/ext/dist.hpp): NCCL for communication, two small kernels
// for the distributed solvers. No CUDA or NCCL header here: included by host-compiled code.

#include "sluice/ext/dist.hpp"

namespace sluice::detail::dist {

[[nodiscard]] DistKernels& cuda_dist_kernels();

}  // namespace sluice::detail::dist
