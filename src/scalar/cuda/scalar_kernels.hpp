#pragma once
// The cuda backend's scalar interpreter: each program runs as ONE launch of a one-thread kernel
// that interprets it. The whole program (instructions, constants, input and output addresses)
// travels by value as the kernel's parameter, so a run needs no upload, no allocation and no
// synchronization, and a captured graph node holds the complete program.
// No CUDA header here: included by the (host-compiled) backend.

#include "sluice/ext/scalar_kernels.hpp"

namespace sluice::detail::cuda {

[[nodiscard]] ScalarKernels& scalar_interpreter();

}  // namespace sluice::detail::cuda
