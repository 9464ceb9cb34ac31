#pragma once
// Checking CUDA runtime calls. `check` is a function, not a macro: the call it checks is evaluated
// exactly once, by the caller, and the source location is that of the caller (or of the user's
// call that issued the operation, where the caller passes it on).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <source_location>
#include <string>

namespace sluice::detail::cuda {

/// "cudaErrorInvalidValue (invalid argument)".
[[nodiscard]] std::string describe(cudaError_t err);

/// What the user can do about `err`; empty where its name says it all.
[[nodiscard]] const char* advice(cudaError_t err) noexcept;

/// Throws the sluice::Error for a failed call `what`: OutOfMemory for cudaErrorMemoryAllocation
/// (with `bytes` requested, if known), Error(backend_failure) otherwise, with a hint on what to do.
/// Clears the runtime's last-error slot first, so that the failure is not reported twice.
[[noreturn]] void throw_error(cudaError_t err, const char* what, std::source_location where,
                              std::size_t bytes = 0);

/// Throws if `err` is not cudaSuccess. `what` names the failed call, e.g. "cudaMemcpyAsync".
inline void check(cudaError_t err, const char* what,
                  std::source_location where = std::source_location::current()) {
  if (err != cudaSuccess) [[unlikely]]
    throw_error(err, what, where);
}

/// Clears the runtime's last-error slot after a failure that is swallowed (noexcept paths).
void clear_error() noexcept;

/// True for the errors that mean "this machine has no usable CUDA device".
[[nodiscard]] bool means_no_device(cudaError_t err) noexcept;

}  // namespace sluice::detail::cuda
