// The cuda backend's generator: one thread per Philox block, the shared map of
// kernel/philox_math.hpp (built with --fmad=false so that it rounds as the host does: its fused
// multiply-adds are written out), 16-byte stores where the output is aligned for them.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernel_preload.hpp"
#include "kernel/cuda/canned.hpp"
#include "kernel/philox_math.hpp"

namespace sluice::detail::cuda {
namespace {

namespace pm = philox_math;

constexpr int kThreads = 256;

template <class T>
struct Vec;
template <>
struct Vec<float> {
  using type = float4;
};
template <>
struct Vec<double> {
  using type = double2;
};

/// Philox blocks a thread takes per pass: 2 for the float normal fill, which is bound by its
/// instruction count (docs/kernels.md): the two blocks' key schedules are one (the compiler shares
/// them), their transforms interleave, and the loop's 64-bit index work is paid once per two.
/// Pass k's blocks are b and b + stride, so each of its two 16-byte stores is coalesced as before.
template <class T, bool Normal>
inline constexpr int kBlocksPerThread = Normal && sizeof(T) == sizeof(float) ? 2 : 1;

template <class T, bool Normal, bool Vectorized>
__device__ __forceinline__ void store_block(T* __restrict__ out, std::uint64_t n, std::uint64_t b,
                                            const T* v) {
  constexpr std::uint64_t per = pm::kValuesPerBlock<T>;
  const std::uint64_t first = b * per;
  if (Vectorized && first + per <= n) {
    using V = typename Vec<T>::type;
    V w;
    if constexpr (per == 4) {
      w = V{v[0], v[1], v[2], v[3]};
    } else {
      w = V{v[0], v[1]};
    }
    reinterpret_cast<V*>(out)[b] = w;
  } else {
    for (std::uint64_t i = 0; i < per && first + i < n; ++i) out[first + i] = v[i];
  }
}

template <class T, bool Normal, bool Vectorized>
__global__ void __launch_bounds__(kThreads)
    fill_kernel(T* __restrict__ out, std::uint64_t n, std::uint64_t blocks, std::uint64_t seed,
                std::uint64_t counter, std::uint64_t sub, T mean, T stddev) {
  constexpr std::uint64_t per = pm::kValuesPerBlock<T>;
  constexpr int kPer = kBlocksPerThread<T, Normal>;
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t b = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; b < blocks;
       b += kPer * stride) {
    T v[kPer][per];
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const std::uint64_t bk = b + k * stride;
      if (k == 0 || bk < blocks) {
        pm::block_values<T>(seed, counter + bk, Normal, mean, stddev, v[k], sub);
      }
    }
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const std::uint64_t bk = b + k * stride;
      if (k == 0 || bk < blocks) store_block<T, Normal, Vectorized>(out, n, bk, v[k]);
    }
  }
}

template <class T, bool Normal>
void launch(const RngFillArgs& a, cudaStream_t s, const OpInfo& op) {
  constexpr std::uint64_t per = pm::kValuesPerBlock<T>;
  const auto n = static_cast<std::uint64_t>(a.n);
  const std::uint64_t blocks = (n + per - 1) / per;
  const std::uint64_t per_block = std::uint64_t{kThreads} * kBlocksPerThread<T, Normal>;
  const auto grid = static_cast<unsigned>(
      std::min<std::uint64_t>((blocks + per_block - 1) / per_block, std::uint64_t{1} << 20));
  T* out = static_cast<T*>(a.out);
  const T mean = static_cast<T>(a.mean), stddev = static_cast<T>(a.stddev);
  if (reinterpret_cast<std::uintptr_t>(out) % 16 == 0) {
    fill_kernel<T, Normal, true>
        <<<grid, kThreads, 0, s>>>(out, n, blocks, a.seed, a.counter, a.subsequence, mean, stddev);
  } else {
    fill_kernel<T, Normal, false>
        <<<grid, kThreads, 0, s>>>(out, n, blocks, a.seed, a.counter, a.subsequence, mean, stddev);
  }
  check(cudaGetLastError(), "rng fill kernel launch", op.where);
}

class CudaRng final : public Rng {
 public:
  void fill(Stream& stream, const RngFillArgs& a, const OpInfo& op) override {
    auto f = [&](cudaStream_t s) {
      const bool normal = a.distribution == RngDistribution::normal;
      if (a.precision == Precision::f32) {
        normal ? launch<float, true>(a, s, op) : launch<float, false>(a, s, op);
      } else {
        normal ? launch<double, true>(a, s, op) : launch<double, false>(a, s, op);
      }
    };
    run_on(stream, op, f);
  }
};

// Every kernel of this file, loaded ahead where one process drives several GPUs
// (backends/cuda/kernel_preload.hpp).
SLUICE_CUDA_KERNEL_FILE(fill_kernel<float, false, false>);

}  // namespace

Rng& canned_rng() {
  static CudaRng r;
  return r;
}

}  // namespace sluice::detail::cuda
