#pragma once
// Kernels shared by the kernel-layer tests: the reference's add_mystery_value (PTX, CUDA source,
// host) and an axpy over a range.

#include <cstddef>
#include <string>

#include "sluice/kernel.hpp"

namespace sluice::test {

/// The reference's hand-written PTX (reference 003): *result = input + 123.
inline constexpr const char* kMysteryPtx = R"(
    .version 3.1
    .target sm_20
    .address_size 64
    .visible .entry add_mystery_value(
        .param .f32 float_literal,
        .param .u64 result_loc
        ) {
      .reg .u64 %rl<2>;
      .reg .f32 %f<2>;
      ld.param.f32 %f1, [float_literal];
      ld.param.u64 %rl1, [result_loc];
      add.f32 %f1, %f1, 123.0;
      st.f32 [%rl1], %f1;
      ret;
    }
    )";

inline constexpr const char* kMysterySource = R"(
extern "C" __global__ void add_mystery_value(float input, float* output) {
  *output = input + 123.0f;
})";

inline constexpr float kMystery = 123.0f;

using MysteryKernel = TypedKernel<float, float*>;

inline void add_mystery_host(KernelSpec& spec) {
  spec.add_host<float, float*>(
      [](std::size_t, float input, float* output) { *output = input + kMystery; });
}

/// y[i] = a * x[i] + y[i] for i < n.
inline constexpr const char* kAxpySource = R"(
extern "C" __global__ void axpy(unsigned n, float a, const float* x, float* y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
})";

using AxpyKernel = TypedKernel<unsigned, float, const float*, float*>;

inline KernelSpec axpy_spec() {
  KernelSpec spec("axpy", 4);
  spec.add_cuda_source(kAxpySource);
  spec.add_host<unsigned, float, const float*, float*>(
      [](std::size_t i, unsigned n, float a, const float* x, float* y) {
        if (i < n) y[i] = a * x[i] + y[i];
      });
  return spec;
}

}  // namespace sluice::test
