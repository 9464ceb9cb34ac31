#pragma once
// The host backend's canned operations (sluice/ext/canned.hpp): OpenBLAS, FFTW and the shared
// Philox generator.

#include "sluice/ext/canned.hpp"

namespace sluice::detail::host {

[[nodiscard]] Blas& canned_blas();
[[nodiscard]] Rng& canned_rng();
[[nodiscard]] Fft& canned_fft();

}  // namespace sluice::detail::host
