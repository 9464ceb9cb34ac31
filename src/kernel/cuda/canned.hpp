#pragma once
// The cuda backend's canned operations (sluice/ext/canned.hpp): cuBLAS through the context's
// handle, cuFFT with plans cached per context, and a Philox kernel.

#include <cuda_runtime_api.h>

#include <string>

#include "backends/cuda/cuda_stream.hpp"
#include "sluice/error.hpp"
#include "sluice/ext/canned.hpp"

namespace sluice::detail::cuda {

[[nodiscard]] Blas& canned_blas();
[[nodiscard]] Rng& canned_rng();
[[nodiscard]] Fft& canned_fft();

/// Runs `f(cudaStream_t)` as operation `op` of `s`, with its device current.
template <class F>
void run_on(Stream& s, const OpInfo& op, F& f) {
  as_cuda_stream(s, "a canned operation")
      .run_user([](void* state, CUstream_st* h) { (*static_cast<F*>(state))(h); }, &f, op);
}

/// Throws Error(backend_failure) for a failed vendor call.
[[noreturn]] inline void vendor_failed(const OpInfo& op, const char* call,
                                       const std::string& status) {
  throw Error(Errc::backend_failure,
              std::string(op.what) + ": " + call + " failed: " + status +
                  "; check the sizes, or whether the device ran out of memory",
              op.where);
}

}  // namespace sluice::detail::cuda
