#pragma once
// The cuda backend's linear-algebra kernels (sluice/la.hpp): grid-stride element-wise kernels,
// single-launch reductions (each block writes its partial sums, the last block to finish adds
// them in block order and runs the solver logic), matrix-free stencils as custom kernels, CSR
// products through cuSPARSE on the context's handle. No CUDA header here: included by the
// host-compiled backend.

#include "sluice/ext/la_kernels.hpp"

namespace sluice::detail::cuda {

[[nodiscard]] LaKernels& la_kernels();

}  // namespace sluice::detail::cuda
