#pragma once
// The host backend's scalar interpreter: each program runs as one host task on the context's
// worker, reading and writing device memory (which is host memory) directly.

#include "sluice/ext/scalar_kernels.hpp"

namespace sluice::detail::host {

[[nodiscard]] ScalarKernels& scalar_interpreter();

}  // namespace sluice::detail::host
