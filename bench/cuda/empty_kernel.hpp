#pragma once
// An empty kernel for measuring launch overhead; defined in a .cu file so that the benchmark
// itself is plain C++.

using EmptyKernel = void (*)();

/// The host stub of `__global__ void empty_kernel()`, launchable with cudaLaunchKernel.
EmptyKernel empty_kernel_ptr();
