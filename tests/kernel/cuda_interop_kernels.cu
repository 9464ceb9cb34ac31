#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cuda_interop_kernels.hpp"

namespace {

__global__ void fill(float* x, float value, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] = value;
}

}  // namespace

FillKernel fill_kernel() {
  return &fill;
}

void launch_fill(void* stream, float* x, float value, int n) {
  fill<<<(n + 255) / 256, 256, 0, static_cast<cudaStream_t>(stream)>>>(x, value, n);
  if (auto err = cudaGetLastError(); err != cudaSuccess) {
    throw std::runtime_error(std::string("launch_fill: ") + cudaGetErrorName(err));
  }
}
