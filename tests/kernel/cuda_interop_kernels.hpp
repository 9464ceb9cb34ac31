#pragma once
// Test kernels of the program itself (cuda_interop_kernels.cu), registered with the shared CUDA
// runtime that the cuda module uses too. No CUDA header here: tests are compiled by the host
// compiler.

/// The host stub of `__global__ void fill(float* x, float value, int n)`.
using FillKernel = void (*)(float*, float, int);
[[nodiscard]] FillKernel fill_kernel();

/// Enqueues `fill` on `stream` (a cudaStream_t) with `<<<>>>`; throws std::runtime_error if the
/// launch fails.
void launch_fill(void* stream, float* x, float value, int n);
