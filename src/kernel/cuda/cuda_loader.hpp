#pragma once
// The cuda backend's kernel loader: cubin, fatbin, PTX (JIT-compiled by the driver) or CUDA C++
// source (through NVRTC and its cache), loaded with the runtime's library API
// (cudaLibraryLoadData), checked with cudaFuncGetParamInfo and launched with cudaLaunchKernel on
// the context's stream. Everything goes through the CUDA runtime, which finds the driver at run
// time: nothing links libcuda, so programs still start on machines without one.

#include "sluice/ext/kernel_loader.hpp"

namespace sluice::detail::cuda {

[[nodiscard]] KernelLoader& kernel_loader();

}  // namespace sluice::detail::cuda
