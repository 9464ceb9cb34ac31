// The host backend's generator: the shared Philox map (kernel/philox_math.hpp) over the host
// pool, one chunk of blocks per task, with hardware fused multiply-adds where the CPU has them.

#include <algorithm>
#include <cstdint>

#include "backends/host/host_parallel.hpp"
#include "kernel/host/canned.hpp"
#include "kernel/philox_math.hpp"

namespace sluice::detail::host {
namespace {

namespace pm = philox_math;

constexpr std::uint64_t kBlocksPerChunk = 8192;

/// Blocks [lo, hi) of the fill into `out`. Instantiated twice: for CPUs with FMA, where fma_rn is
/// one instruction, and for those without, where it is libm's fma (correctly rounded too, so both
/// give the same bits as the GPU).
template <class T>
inline __attribute__((always_inline)) void fill_blocks(const RngFillArgs& a, std::uint64_t lo,
                                                       std::uint64_t hi) {
  constexpr std::uint64_t per = pm::kValuesPerBlock<T>;
  const auto n = static_cast<std::uint64_t>(a.n);
  const bool normal = a.distribution == RngDistribution::normal;
  const T mean = static_cast<T>(a.mean), stddev = static_cast<T>(a.stddev);
  T* out = static_cast<T*>(a.out);
  T v[per];
  for (std::uint64_t b = lo; b < hi; ++b) {
    pm::block_values<T>(a.seed, a.counter + b, normal, mean, stddev, v, a.subsequence);
    const std::uint64_t first = b * per;
    const std::uint64_t count = std::min(per, n - first);
    for (std::uint64_t i = 0; i < count; ++i) out[first + i] = v[i];
  }
}

template <class T>
__attribute__((target("fma"))) void fill_blocks_fma(const RngFillArgs& a, std::uint64_t lo,
                                                    std::uint64_t hi) {
  fill_blocks<T>(a, lo, hi);
}
template <class T>
void fill_blocks_plain(const RngFillArgs& a, std::uint64_t lo, std::uint64_t hi) {
  fill_blocks<T>(a, lo, hi);
}

template <class T>
void fill(const RngFillArgs& a) {
  constexpr std::uint64_t per = pm::kValuesPerBlock<T>;
  const auto n = static_cast<std::uint64_t>(a.n);
  const std::uint64_t blocks = (n + per - 1) / per;
  static const bool fma = __builtin_cpu_supports("fma");
  auto chunk = [&](std::size_t c) {
    const std::uint64_t lo = c * kBlocksPerChunk;
    const std::uint64_t hi = std::min(blocks, lo + kBlocksPerChunk);
    if (fma) {
      fill_blocks_fma<T>(a, lo, hi);
    } else {
      fill_blocks_plain<T>(a, lo, hi);
    }
  };
  parallel_chunks(static_cast<std::size_t>((blocks + kBlocksPerChunk - 1) / kBlocksPerChunk),
                  chunk);
}

class HostRng final : public Rng {
 public:
  void fill(Stream& stream, const RngFillArgs& args, const OpInfo& op) override {
    stream.host_task(
        [a = args] {
          if (a.precision == Precision::f32) {
            host::fill<float>(a);
          } else {
            host::fill<double>(a);
          }
        },
        op);
  }
};

}  // namespace

Rng& canned_rng() {
  static HostRng r;
  return r;
}

}  // namespace sluice::detail::host
