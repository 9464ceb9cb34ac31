// The cuda backend's typed fill (sluice/ext/fill.hpp): one kernel over every element of the
// region, storing the pattern in the widest words its size and the destination's alignment allow.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_stream.hpp"
#include "backends/cuda/kernel_preload.hpp"
#include "memory/fill_impl.hpp"

namespace sluice::detail::cuda {
namespace {

constexpr unsigned kThreads = 256;

struct Shape {
  std::uint64_t count0, count1, count2;
  std::uint64_t pitch1, pitch2;  // in bytes
};

/// Element i of the region (row-major over count2, count1, count0) set to the pattern, `words`
/// words of type Word each (the pattern's size is words * sizeof(Word)); the pattern is read from
/// the kernel's parameters (the constant cache).
template <class Word>
__global__ void __launch_bounds__(kThreads)
    fill_kernel(unsigned char* dst, Shape s, FillArgs a, std::uint64_t n, unsigned words) {
  const auto* p = reinterpret_cast<const Word*>(a.pattern);
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const std::uint64_t e0 = i % s.count0, rest = i / s.count0;
    const std::uint64_t e1 = rest % s.count1, e2 = rest / s.count1;
    auto* out = reinterpret_cast<Word*>(dst + e2 * s.pitch2 + e1 * s.pitch1) + e0 * words;
    for (unsigned w = 0; w < words; ++w) out[w] = p[w];
  }
}

template <class Word>
void launch(unsigned char* dst, const Shape& s, const FillArgs& a, std::uint64_t n,
            cudaStream_t stream) {
  const auto grid = static_cast<unsigned>(
      std::min<std::uint64_t>((n + kThreads - 1) / kThreads, std::uint64_t{1} << 20));
  fill_kernel<Word>
      <<<grid, kThreads, 0, stream>>>(dst, s, a, n, static_cast<unsigned>(a.elem / sizeof(Word)));
}

/// The widest word dividing the element size, the pitches and the destination's address.
std::size_t word_bytes(const FillArgs& a) {
  const auto addr = reinterpret_cast<std::uintptr_t>(a.dst);
  for (std::size_t w : {16, 8, 4, 2}) {
    if (a.elem % w == 0 && addr % w == 0 && (a.count[1] == 1 || a.pitch[1] % w == 0) &&
        (a.count[2] == 1 || a.pitch[2] % w == 0)) {
      return w;
    }
  }
  return 1;
}

class CudaFill final : public Fill {
 public:
  void fill(Stream& stream, const FillArgs& a, const OpInfo& op) override {
    const std::uint64_t n = std::uint64_t{a.count[0]} * a.count[1] * a.count[2];
    if (n == 0) return;
    const Shape s{a.count[0], a.count[1], a.count[2], a.pitch[1], a.pitch[2]};
    auto* dst = static_cast<unsigned char*>(a.dst);
    auto f = [&](CUstream_st* h) {
      switch (word_bytes(a)) {
        case 16:
          launch<uint4>(dst, s, a, n, h);
          break;
        case 8:
          launch<std::uint64_t>(dst, s, a, n, h);
          break;
        case 4:
          launch<std::uint32_t>(dst, s, a, n, h);
          break;
        case 2:
          launch<std::uint16_t>(dst, s, a, n, h);
          break;
        default:
          launch<std::uint8_t>(dst, s, a, n, h);
          break;
      }
      check(cudaGetLastError(), "fill kernel launch", op.where);
    };
    as_cuda_stream(stream, "fill")
        .run_user([](void* state, CUstream_st* h) { (*static_cast<decltype(f)*>(state))(h); }, &f,
                  op);
  }
};

// Every kernel of this file, loaded ahead where one process drives several GPUs
// (backends/cuda/kernel_preload.hpp).
SLUICE_CUDA_KERNEL_FILE(fill_kernel<std::uint8_t>);

}  // namespace

Fill& memory_fill() {
  static CudaFill f;
  return f;
}

}  // namespace sluice::detail::cuda
