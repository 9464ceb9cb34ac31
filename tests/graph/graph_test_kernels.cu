// Definitions of graph_test_kernels.hpp (not included: nvcc rejects a plain declaration of a
// __global__ function; the host stubs it generates have exactly those signatures).

__global__ void graph_test_add(int* x, int n, int v) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] += v;
}

__global__ void graph_test_countdown(int* counter, int* trips) {
  ++*trips;
  --*counter;
}
