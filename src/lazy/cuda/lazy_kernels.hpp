#pragma once
// The cuda backend's LazyKernels (sluice/ext/lazy_kernels.hpp): generated CUDA C++ built by NVRTC
// through the kernel cache, loaded as a library, each kernel a graph kernel node.
// No CUDA header here.

#include "sluice/ext/lazy_kernels.hpp"

namespace sluice::detail::cuda {

[[nodiscard]] LazyKernels& lazy_kernels();

/// One cuBLAS call (`args`) on `device` captured into a CUDA graph: a CudaRecording
/// (backends/cuda/cuda_graph.hpp), as LazyKernels::gemm_recording gives it.
[[nodiscard]] std::shared_ptr<void> record_gemm(const Device& device, const BlasGemmArgs& args,
                                                std::source_location loc);
/// cuBLAS's batched GEMM over the operand lists at `table` (LazyKernels::gemm_table_recording),
/// captured likewise.
[[nodiscard]] std::shared_ptr<void> record_gemm_table(const Device& device,
                                                      const BlasGemmArgs& args, const void* table,
                                                      std::source_location loc);

}  // namespace sluice::detail::cuda
