#include "raw_launch.hpp"

namespace {
__global__ void empty_args(float, float*) {}
}  // namespace

void raw_launch(CUstream_st* stream, float x, float* y) {
  empty_args<<<1, 1, 0, stream>>>(x, y);
}

EmptyArgsKernel empty_args_ptr() {
  return empty_args;
}
