// Division by a number fixed at launch, for the cuda backend's kernels (host-testable).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SLUICE_FAST_DIV_HD __host__ __device__ __forceinline__
#else
#define SLUICE_FAST_DIV_HD inline
#endif

namespace sluice::detail::cuda {

/// n / d for n below 2^31 as a multiply-high and a shift (Granlund and Montgomery), instead of
/// the ~20 instructions of a 32-bit division: the stencil kernels' tile coordinates took two
/// per tile.
struct FastDiv {
  std::uint32_t d = 1, mul = 0, shift = 0;

  FastDiv() = default;
  explicit FastDiv(std::uint32_t divisor) : d(divisor) {
    if (d <= 1) return;
    std::uint32_t log2 = 31u - static_cast<std::uint32_t>(__builtin_clz(d));
    if ((d & (d - 1)) != 0) ++log2;  // ceil(log2 d)
    mul = static_cast<std::uint32_t>(((std::uint64_t{1} << (31 + log2)) + d - 1) / d);
    shift = log2 - 1;
  }

  SLUICE_FAST_DIV_HD std::uint32_t operator()(std::uint32_t n) const {
    if (d <= 1) return n;
#if defined(__CUDA_ARCH__)
    return __umulhi(n, mul) >> shift;
#else
    return static_cast<std::uint32_t>((std::uint64_t{n} * mul) >> 32) >> shift;
#endif
  }
};

}  // namespace sluice::detail::cuda
