#pragma once
// The cuda pieces of the dataflow runtime (cuda/dataflow_cuda.cu; no_cuda.cpp without the cuda
// backend). No CUDA header: callers are plain C++.

#include <cstddef>
#include <string>

namespace sluice::dataflow::detail {

/// Enqueues a one-thread kernel on `stream` (a cudaStream_t) that spins until `*flag` (mapped
/// pinned memory) becomes non-zero. Throws Error if the launch fails.
void launch_cuda_gate(void* stream, const volatile int* flag);
/// cudaMallocManaged on `device`, never more than the device has free; nullptr and `why` on
/// failure.
void* cuda_malloc_managed(int device, std::size_t bytes, std::string& why);
void cuda_free_managed(void* ptr) noexcept;

}  // namespace sluice::dataflow::detail
