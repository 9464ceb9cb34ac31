#pragma once
/// @file
/// Seeded random fills with Philox4x32-10 (Salmon et al., SC11), the same numbers on every
/// backend: a fill on a cuda context and one on the host give identical bits for the same seed
/// (cuRAND and StreamExecutor do not promise this).
///
/// The stream of a seed is a sequence of 128-bit blocks: block `b` is
/// `philox4x32_10({lo(b), hi(b), 0, 0}, {lo(seed), hi(seed)})`, four 32-bit words w0..w3.
/// - uniform float: each word gives one value `(2 * (w >> 9) + 1) * 2^-24`, in (0, 1), exactly;
/// - uniform double: each word pair (w0, w1), (w2, w3) gives `(2 * k + 1) * 2^-53` with k the top
///   52 bits of `w_hi << 32 | w_lo`, in (0, 1), exactly;
/// - normal: Box-Muller on two uniforms of the same width (u1, u2):
///   `sqrt(-2 ln u1) * (cos 2 pi u2, sin 2 pi u2)`, then `mean + stddev * z`; float uses words
///   (w0, w1) and (w2, w3) for two pairs, double the block's two doubles for one pair. The
///   transform uses only correctly rounded IEEE operations (no library math), so it rounds alike
///   everywhere.
/// A fill of n values takes ceil(n / 4) blocks (float) or ceil(n / 2) (double) from the
/// generator's counter and advances it past them, so consecutive fills continue the stream.
///
/// @code
/// sluice::rng::Philox gen(42);
/// sluice::DeviceBuffer<float> x(ctx, n);
/// sluice::rng::normal(ctx, x, gen);      // N(0, 1); advances gen
/// sluice::rng::uniform(ctx, x, gen);     // the next values of the stream
/// @endcode

#include <array>
#include <cstdint>
#include <source_location>

#include "sluice/canned.hpp"
#include "sluice/memory.hpp"

namespace sluice::rng {

/// One Philox4x32-10 block: the bijection of Random123 (10 rounds), for known-answer checks.
[[nodiscard]] std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                                         std::array<std::uint32_t, 2> key) noexcept;

/// A seed and the position (block counter) where the next fill starts. Not thread-safe: one
/// generator per issuing thread, or a lock.
class Philox {
 public:
  explicit Philox(std::uint64_t seed, std::uint64_t counter = 0) noexcept
      : seed_(seed), counter_(counter) {}
  [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }
  [[nodiscard]] std::uint64_t counter() const noexcept { return counter_; }
  /// Skips `blocks` 128-bit blocks of the stream.
  void skip(std::uint64_t blocks) noexcept { counter_ += blocks; }

 private:
  std::uint64_t seed_;
  std::uint64_t counter_;
};

/// Fills `out` with uniform values in (0, 1) and advances `gen`.
template <CannedReal T>
void uniform(const Context& ctx, DeviceBuffer<T>& out, Philox& gen,
             std::source_location loc = std::source_location::current());

/// Fills `out` with normal values of the given mean and standard deviation and advances `gen`.
template <CannedReal T>
void normal(const Context& ctx, DeviceBuffer<T>& out, Philox& gen, T mean = 0, T stddev = 1,
            std::source_location loc = std::source_location::current());

}  // namespace sluice::rng
