#pragma once
// Philox4x32-10 and the maps from its words to uniform and normal values (sluice/rng.hpp), shared
// by the host and cuda generators so that both give the same bits.
//
// Every floating-point step is one correctly rounded IEEE operation (+, -, *, /, sqrt, and fused
// multiply-add written out as fma_rn) or exact bit manipulation; there is no library math (log,
// sin and cos are polynomials here) and the sources including this header are compiled without
// FMA contraction (-ffp-contract=off on the host, --fmad=false for nvcc), so the host and the
// device round every step alike. Integer-float conversions are bit tricks too: on the GPU they
// run at an eighth of the rate of an add, and the float normal transform is bound by its
// instruction count (docs/kernels.md).

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define SLUICE_PHILOX_FN __host__ __device__ __forceinline__
#else
// Always inlined, so that a caller compiled for FMA (src/kernel/host/rng.cpp) gets fma_rn as
// one instruction.
#define SLUICE_PHILOX_FN inline __attribute__((always_inline))
#endif

namespace sluice::detail::philox_math {

struct Words {
  std::uint32_t v[4];
};

/// The Philox4x32-10 bijection (Random123's philox4x32_R with R = 10).
SLUICE_PHILOX_FN Words philox(std::uint32_t c0, std::uint32_t c1, std::uint32_t c2,
                              std::uint32_t c3, std::uint32_t k0, std::uint32_t k1) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c0;
    const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * c2;
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  return {{c0, c1, c2, c3}};
}

/// Block `block` of subsequence `sub` of the stream of key `seed`: the 128-bit counter is
/// {lo(block), hi(block), lo(sub), hi(sub)}.
SLUICE_PHILOX_FN Words block(std::uint64_t seed, std::uint64_t block, std::uint64_t sub = 0) {
  return philox(static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                static_cast<std::uint32_t>(sub), static_cast<std::uint32_t>(sub >> 32),
                static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

/// Values one block yields: four floats or two doubles.
template <class T>
inline constexpr std::uint64_t kValuesPerBlock = sizeof(T) == sizeof(float) ? 4 : 2;

SLUICE_PHILOX_FN std::uint32_t bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}
SLUICE_PHILOX_FN float float_from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}
SLUICE_PHILOX_FN std::uint64_t bits(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__double_as_longlong(x));
#else
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}
SLUICE_PHILOX_FN double double_from_bits(std::uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

/// (2 * (w >> 9) + 1) * 2^-24: exact, in (0, 1); computed as (1 + k 2^-23) - (1 - 2^-24), both
/// steps exact, instead of an integer conversion.
SLUICE_PHILOX_FN float uniform_float(std::uint32_t w) {
  return float_from_bits(0x3f800000u | (w >> 9)) - 0.99999994039535522461f;
}

/// (2 * k + 1) * 2^-53 with k the top 52 bits of hi:lo: exact, in (0, 1); the same way.
SLUICE_PHILOX_FN double uniform_double(std::uint32_t hi, std::uint32_t lo) {
  const std::uint64_t k = ((std::uint64_t{hi} << 32) | lo) >> 12;
  return double_from_bits(0x3ff0000000000000ull | k) - 0.99999999999999988898;
}

/// Small integers (below 2^22 for float, 2^51 for double) as floating point, exactly, without a
/// conversion instruction: the integer in the mantissa of 2^23 (2^52), minus that power.
SLUICE_PHILOX_FN float small_int_float(std::int32_t i) {
  return float_from_bits(0x4b400000u + static_cast<std::uint32_t>(i)) - 12582912.0f;
}
SLUICE_PHILOX_FN double small_int_double(std::int64_t i) {
  return double_from_bits(0x4338000000000000ull + static_cast<std::uint64_t>(i)) -
         6755399441055744.0;
}

SLUICE_PHILOX_FN float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return __builtin_fmaf(a, b, c);  // one instruction with FMA, else libm's correctly rounded fmaf
#endif
}
SLUICE_PHILOX_FN double fma_rn(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return __builtin_fma(a, b, c);
#endif
}

SLUICE_PHILOX_FN float sqrt_rn(float x) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(x);
#else
  return __builtin_sqrtf(x);  // sqrtss: IEEE correctly rounded
#endif
}
SLUICE_PHILOX_FN double sqrt_rn(double x) {
#if defined(__CUDA_ARCH__)
  return __dsqrt_rn(x);
#else
  return __builtin_sqrt(x);   // sqrtsd: IEEE correctly rounded
#endif
}

/// Places cos(2 pi u) and sin(2 pi u) in their quadrant q (u = q / 4 + r): (cs, sn) are the
/// cosine and sine of 2 pi r. Quadrant 1 is (-sn, cs), 2 is (-cs, -sn), 3 is (sn, -cs): a swap and
/// two sign bits, without branches.
SLUICE_PHILOX_FN void place_quadrant(std::uint32_t q, float cs, float sn, float& c, float& s) {
  const bool swap = (q & 1u) != 0;
  c = float_from_bits(bits(swap ? sn : cs) ^ (((q + 1u) & 2u) << 30));
  s = float_from_bits(bits(swap ? cs : sn) ^ ((q & 2u) << 30));
}
SLUICE_PHILOX_FN void place_quadrant(std::uint64_t q, double cs, double sn, double& c, double& s) {
  const bool swap = (q & 1u) != 0;
  c = double_from_bits(bits(swap ? sn : cs) ^ (((q + 1u) & 2u) << 62));
  s = double_from_bits(bits(swap ? cs : sn) ^ ((q & 2u) << 62));
}

// ---- float: the GPU's normal fill is bound by its instruction count, so this path uses fused
// multiply-adds, minimax polynomials of the fewest terms that keep about an ulp, no division and
// no conversion instruction. ----

/// -2 ln u for u = (2k + 1) 2^-24 in (0, 1): u = m 2^e with m in [sqrt(1/2), sqrt(2)), f = m - 1
/// exact, ln(1 + f) = f - f^2 / 2 + f^3 P(f) with P of degree 6 (a minimax fit, 1.2 ulp of
/// ln(1 + f) on that interval), e ln 2 in two parts so that e ln2_hi is exact.
SLUICE_PHILOX_FN float neg2_log(float u) {
  const std::uint32_t b = bits(u);
  std::uint32_t m = (b & 0x007fffffu) | 0x3f800000u;
  std::uint32_t e = b >> 23;  // biased
  if (m > 0x3fb504f3u) {      // m > sqrt(2): halve it
    m -= 0x00800000u;
    ++e;
  }
  const float f = float_from_bits(m) - 1.0f;
  const float z = f * f;
  float p = 8.70036780834198e-02f;
  p = fma_rn(p, f, -1.4267489314079285e-01f);
  p = fma_rn(p, f, 1.4914789795875550e-01f);
  p = fma_rn(p, f, -1.6577585041522980e-01f);
  p = fma_rn(p, f, 1.9963061809539795e-01f);
  p = fma_rn(p, f, -2.5001338124275208e-01f);
  p = fma_rn(p, f, 3.3333909511566162e-01f);
  const float ln1p = f + fma_rn(z * f, p, -0.5f * z);
  const float ef = small_int_float(static_cast<std::int32_t>(e) - 127);
  // -2 ln 2 = -2 (ln2_hi + ln2_lo); ef * ln2_hi is exact for |e| < 2^8.
  return fma_rn(ef, -1.38629150390625e+00f, fma_rn(ef, -2.857213530660374e-06f, -2.0f * ln1p));
}

/// Standard normal pair from the words (w1, w2) (Box-Muller): sqrt(-2 ln u1) times
/// cos and sin of 2 pi u2, u2 = (2k + 1) 2^-24 = q / 4 + r with q = round(4 u2) found from k and
/// r exact; cos and sin of 2 pi r by minimax polynomials in r^2 of degree 3 (1.6 ulp).
SLUICE_PHILOX_FN void normal_pair(std::uint32_t w1, std::uint32_t w2, float& z0, float& z1) {
  const float rad = sqrt_rn(neg2_log(uniform_float(w1)));
  const std::uint32_t k = w2 >> 9;
  const float u2 = float_from_bits(0x3f800000u | k) - 0.99999994039535522461f;
  const std::uint32_t q = (k + (1u << 20)) >> 21;  // round(4 u2), 0..4
  const float r = fma_rn(small_int_float(static_cast<std::int32_t>(q)), -0.25f, u2);  // exact
  const float r2 = r * r;
  float ps = -7.540206909179688e+01f;
  ps = fma_rn(ps, r2, 8.159255218505859e+01f);
  ps = fma_rn(ps, r2, -4.134166336059570e+01f);
  ps = fma_rn(ps, r2, 6.283185482025146e+00f);
  const float sn = r * ps;
  float pc = -8.359261322021484e+01f;
  pc = fma_rn(pc, r2, 6.492124938964844e+01f);
  pc = fma_rn(pc, r2, -1.973915290832520e+01f);
  const float cs = fma_rn(pc, r2, 1.0f);
  float c, s;
  place_quadrant(q, cs, sn, c, s);
  z0 = rad * c;
  z1 = rad * s;
}

// ---- double: the same steps, with the series long enough for double precision ----

// Coefficients are written static_cast<double>(a / b): the quotient is folded by every compiler
// (correctly rounded), so host and device use the same constants.

/// -2 ln x for x = (2k + 1) 2^-53 in (0, 1): ln x = e ln 2 + 2 atanh(s), s = (m - 1) / (m + 1)
/// with m in [sqrt(1/2), sqrt(2)), the odd series of atanh to s^21; |s| < 0.172.
SLUICE_PHILOX_FN double neg2_log(double x) {
  const std::uint64_t b = bits(x);
  std::uint64_t m = (b & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
  std::uint64_t e = b >> 52;        // biased
  if (m > 0x3ff6a09e667f3bcdull) {  // m > sqrt(2): halve it
    m -= 0x0010000000000000ull;
    ++e;
  }
  const double f = double_from_bits(m) - 1.0;  // exact
  const double s = f / (2.0 + f);
  const double s2 = s * s;
  double p = 2.0 / 21.0;
  p = fma_rn(p, s2, 2.0 / 19.0);
  p = fma_rn(p, s2, 2.0 / 17.0);
  p = fma_rn(p, s2, 2.0 / 15.0);
  p = fma_rn(p, s2, 2.0 / 13.0);
  p = fma_rn(p, s2, 2.0 / 11.0);
  p = fma_rn(p, s2, 2.0 / 9.0);
  p = fma_rn(p, s2, 2.0 / 7.0);
  p = fma_rn(p, s2, 2.0 / 5.0);
  p = fma_rn(p, s2, 2.0 / 3.0);
  const double log_m = fma_rn(s, s2 * p, 2.0 * s);
  const double ef = small_int_double(static_cast<std::int64_t>(e) - 1023);
  // -2 ln 2 in two parts; ef * hi is exact for |e| < 2^20.
  return fma_rn(ef, -1.38629436073824763298e+00,
                fma_rn(ef, -3.81642985854117540004e-10, -2.0 * log_m));
}

/// The double pair: u2 = (2k + 1) 2^-53, q = round(4 u2) from k, Taylor series of sin and cos of
/// x = 2 pi r to x^21 and x^20.
SLUICE_PHILOX_FN void normal_pair(std::uint32_t w0, std::uint32_t w1, std::uint32_t w2,
                                  std::uint32_t w3, double& z0, double& z1) {
  const double rad = sqrt_rn(neg2_log(uniform_double(w0, w1)));
  const std::uint64_t k = ((std::uint64_t{w2} << 32) | w3) >> 12;
  const double u2 = double_from_bits(0x3ff0000000000000ull | k) - 0.99999999999999988898;
  const std::uint64_t q = (k + (std::uint64_t{1} << 49)) >> 50;  // round(4 u2), 0..4
  const double r = fma_rn(small_int_double(static_cast<std::int64_t>(q)), -0.25, u2);  // exact
  const double x = r * 6.283185307179586476925286766559;
  const double x2 = x * x;
  // 1 / k! for the odd (sine) and even (cosine) terms, highest first.
  double ps = 1.0 / 51090942171709440000.0;  // 1/21!
  ps = fma_rn(ps, -x2, 1.0 / 121645100408832000.0);
  ps = fma_rn(ps, -x2, 1.0 / 355687428096000.0);
  ps = fma_rn(ps, -x2, 1.0 / 1307674368000.0);
  ps = fma_rn(ps, -x2, 1.0 / 6227020800.0);
  ps = fma_rn(ps, -x2, 1.0 / 39916800.0);
  ps = fma_rn(ps, -x2, 1.0 / 362880.0);
  ps = fma_rn(ps, -x2, 1.0 / 5040.0);
  ps = fma_rn(ps, -x2, 1.0 / 120.0);
  ps = fma_rn(ps, -x2, 1.0 / 6.0);
  const double sn = fma_rn(x * -x2, ps, x);  // x - x^3/3! + x^5/5! - ...
  double pc = 1.0 / 2432902008176640000.0;   // 1/20!
  pc = fma_rn(pc, -x2, 1.0 / 6402373705728000.0);
  pc = fma_rn(pc, -x2, 1.0 / 20922789888000.0);
  pc = fma_rn(pc, -x2, 1.0 / 87178291200.0);
  pc = fma_rn(pc, -x2, 1.0 / 479001600.0);
  pc = fma_rn(pc, -x2, 1.0 / 3628800.0);
  pc = fma_rn(pc, -x2, 1.0 / 40320.0);
  pc = fma_rn(pc, -x2, 1.0 / 720.0);
  pc = fma_rn(pc, -x2, 1.0 / 24.0);
  pc = fma_rn(pc, -x2, 1.0 / 2.0);
  const double cs = fma_rn(-x2, pc, 1.0);  // 1 - x^2/2! + x^4/4! - ...
  double c, s;
  place_quadrant(q, cs, sn, c, s);
  z0 = rad * c;
  z1 = rad * s;
}

/// The values of block `b` of subsequence `sub` of the stream of `seed` (kValuesPerBlock<T> of
/// them) into `out`. `normal` selects the distribution; normal values are fma(stddev, z, mean).
template <class T>
SLUICE_PHILOX_FN void block_values(std::uint64_t seed, std::uint64_t b, bool normal, T mean,
                                   T stddev, T* out, std::uint64_t sub = 0) {
  const Words w = block(seed, b, sub);
  if constexpr (sizeof(T) == sizeof(float)) {
    if (normal) {
      normal_pair(w.v[0], w.v[1], out[0], out[1]);
      normal_pair(w.v[2], w.v[3], out[2], out[3]);
      for (int i = 0; i < 4; ++i) out[i] = fma_rn(stddev, out[i], mean);
    } else {
      for (int i = 0; i < 4; ++i) out[i] = uniform_float(w.v[i]);
    }
  } else {
    if (normal) {
      normal_pair(w.v[0], w.v[1], w.v[2], w.v[3], out[0], out[1]);
      out[0] = fma_rn(stddev, out[0], mean);
      out[1] = fma_rn(stddev, out[1], mean);
    } else {
      out[0] = uniform_double(w.v[0], w.v[1]);
      out[1] = uniform_double(w.v[2], w.v[3]);
    }
  }
}

}  // namespace sluice::detail::philox_math
