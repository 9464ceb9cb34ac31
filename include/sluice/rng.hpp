#pragma once
/// @file
/// Seeded random fills with Philox4x32-10 (Salmon et al., SC11), the same numbers on every
/// backend: a fill on a cuda context and one on the host give identical bits for the same seed
/// (cuRAND and StreamExecutor do not promise this).
///
/// A generator's seed is 128 bits, as StreamExecutor's and cuRAND's: a 64-bit key and a 64-bit
/// subsequence (the upper half of Philox's 128-bit counter). Its stream is a sequence of 128-bit
/// blocks: block `b` is `philox4x32_10({lo(b), hi(b), lo(sub), hi(sub)}, {lo(key), hi(key)})`,
/// four 32-bit words w0..w3 (subsequence 0, the default, is the stream of a 64-bit seed).
/// - uniform float: each word gives one value `(2 * (w >> 9) + 1) * 2^-24`, in (0, 1), exactly;
/// - uniform double: each word pair (w0, w1), (w2, w3) gives `(2 * k + 1) * 2^-53` with k the top
///   52 bits of `w_hi << 32 | w_lo`, in (0, 1), exactly;
/// - normal: Box-Muller on two uniforms of the same width (u1, u2):
///   `sqrt(-2 ln u1) * (cos 2 pi u2, sin 2 pi u2)`, then `fma(stddev, z, mean)`; float uses words
///   (w0, w1) and (w2, w3) for two pairs, double the block's two doubles for one pair. The
///   transform uses only correctly rounded IEEE operations (+, -, *, /, sqrt, fused multiply-add;
///   no library math), so it rounds alike everywhere.
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
#include <span>

#include "sluice/canned.hpp"
#include "sluice/memory.hpp"

namespace sluice::rng {

/// One Philox4x32-10 block: the bijection of Random123 (10 rounds), for known-answer checks.
[[nodiscard]] std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                                         std::array<std::uint32_t, 2> key) noexcept;

/// A 128-bit seed (key and subsequence) and the position (block counter) where the next fill
/// starts. Not thread-safe: one generator per issuing thread, or a lock.
class Philox {
 public:
  /// Key `seed`, subsequence 0, from block `counter`.
  explicit Philox(std::uint64_t seed, std::uint64_t counter = 0) noexcept
      : key_(seed), counter_(counter) {}
  /// The full 128-bit seed: `key` and `subsequence` (cuRAND's seed and subsequence), from block
  /// `counter` (cuRAND's offset, in blocks).
  Philox(std::uint64_t key, std::uint64_t subsequence, std::uint64_t counter) noexcept
      : key_(key), subsequence_(subsequence), counter_(counter) {}
  /// From seed bytes as StreamExecutor's `ThenSetRngSeed(seed, bytes)` takes them: at least 16;
  /// bytes 0-7 are the key and 8-15 the subsequence, little-endian (later bytes are ignored).
  /// Error(invalid_argument) for fewer than 16.
  [[nodiscard]] static Philox from_seed_bytes(
      std::span<const std::uint8_t> seed,
      std::source_location loc = std::source_location::current());

  /// The key (the 64-bit seed).
  [[nodiscard]] std::uint64_t seed() const noexcept { return key_; }
  [[nodiscard]] std::uint64_t key() const noexcept { return key_; }
  [[nodiscard]] std::uint64_t subsequence() const noexcept { return subsequence_; }
  [[nodiscard]] std::uint64_t counter() const noexcept { return counter_; }
  /// Skips `blocks` 128-bit blocks of the stream (the position wraps within its subsequence).
  void skip(std::uint64_t blocks) noexcept { counter_ += blocks; }

 private:
  std::uint64_t key_;
  std::uint64_t subsequence_ = 0;
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
