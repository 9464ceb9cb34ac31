#pragma once
// The host backend's linear-algebra kernels: each operation is one host task on the context's
// worker; vectors longer than a few chunks are split over the shared pool (host_parallel.hpp).

#include "sluice/ext/la_kernels.hpp"

namespace sluice::detail::host {

[[nodiscard]] LaKernels& la_kernels();

}  // namespace sluice::detail::host
