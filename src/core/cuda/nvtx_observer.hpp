#pragma once
// NVTX ranges around every operation (src/core/cuda/nvtx_observer.cpp).

namespace sluice::detail::cuda {

/// Adds the NVTX observer if SLUICE_NVTX=1, or if SLUICE_NVTX is unset and a tool injects NVTX
/// (NVTX_INJECTION64_PATH). Called once, when the cuda backend is registered.
void install_nvtx_observer_if_requested();

}  // namespace sluice::detail::cuda
