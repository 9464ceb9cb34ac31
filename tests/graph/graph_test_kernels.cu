#include "graph_test_kernels.hpp"

__global__ void graph_test_add(int* x, int n, int v) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] += v;
}

__global__ void graph_test_countdown(int* counter, int* trips) {
  ++*trips;
  --*counter;
}
