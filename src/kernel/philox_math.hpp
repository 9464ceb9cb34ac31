#pragma once
// Philox4x32-10 and the maps from its words to uniform and normal values (sluice/rng.hpp), shared
// by the host and cuda generators so that both give the same bits.
//
// Every floating-point step is one correctly rounded IEEE operation (+, -, *, /, sqrt) or an
// exact conversion; there is no library math (log, sin and cos are polynomials here) and the
// sources including this header are compiled without FMA contraction (-ffp-contract=off on the
// host, --fmad=false for nvcc), so the host and the device round every step alike.

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define SLUICE_PHILOX_FN __host__ __device__ __forceinline__
#else
#define SLUICE_PHILOX_FN inline
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

/// Block `block` of the stream of `seed`.
SLUICE_PHILOX_FN Words block(std::uint64_t seed, std::uint64_t block) {
  return philox(static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), 0, 0,
                static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

/// Values one block yields: four floats or two doubles.
template <class T>
inline constexpr std::uint64_t kValuesPerBlock = sizeof(T) == sizeof(float) ? 4 : 2;

/// (2 * (w >> 9) + 1) * 2^-24: exact, in (0, 1).
SLUICE_PHILOX_FN float uniform_float(std::uint32_t w) {
  return static_cast<float>(((w >> 9) << 1) | 1u) * 5.9604644775390625e-08f;
}

/// (2 * k + 1) * 2^-53 with k the top 52 bits of hi:lo: exact, in (0, 1).
SLUICE_PHILOX_FN double uniform_double(std::uint32_t hi, std::uint32_t lo) {
  const std::uint64_t k = ((std::uint64_t{hi} << 32) | lo) >> 12;
  return static_cast<double>((k << 1) | 1u) * 1.1102230246251565404e-16;
}

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

/// Splits a positive normal x into m * 2^e with m in [sqrt(1/2), sqrt(2)); exact.
SLUICE_PHILOX_FN float split(float x, int& e) {
  const std::uint32_t u = bits(x);
  e = static_cast<int>((u >> 23) & 0xffu) - 127;
  float m = float_from_bits((u & 0x007fffffu) | 0x3f800000u);
  if (m > 1.41421356f) {
    m = m * 0.5f;
    ++e;
  }
  return m;
}
SLUICE_PHILOX_FN double split(double x, int& e) {
  const std::uint64_t u = bits(x);
  e = static_cast<int>((u >> 52) & 0x7ffu) - 1023;
  double m = double_from_bits((u & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  if (m > 1.4142135623730951) {
    m = m * 0.5;
    ++e;
  }
  return m;
}

// Coefficients are written static_cast<T>(a / b): the quotient is folded in double by every
// compiler (correctly rounded), then rounded once to T, so host and device use the same constants.

/// Natural logarithm of a positive normal x: ln x = e ln 2 + 2 atanh(s), s = (m - 1) / (m + 1),
/// the odd series of atanh to s^9 (float) or s^21 (double); |s| < 0.172.
template <class T>
SLUICE_PHILOX_FN T log_pos(T x) {
  int e = 0;
  const T m = split(x, e);
  const T f = m - T(1);  // exact
  const T s = f / (T(2) + f);
  const T s2 = s * s;
  T p;
  if constexpr (sizeof(T) == sizeof(float)) {
    p = static_cast<T>(2.0 / 9.0);
    p = static_cast<T>(2.0 / 7.0) + s2 * p;
    p = static_cast<T>(2.0 / 5.0) + s2 * p;
    p = static_cast<T>(2.0 / 3.0) + s2 * p;
  } else {
    p = static_cast<T>(2.0 / 21.0);
    p = static_cast<T>(2.0 / 19.0) + s2 * p;
    p = static_cast<T>(2.0 / 17.0) + s2 * p;
    p = static_cast<T>(2.0 / 15.0) + s2 * p;
    p = static_cast<T>(2.0 / 13.0) + s2 * p;
    p = static_cast<T>(2.0 / 11.0) + s2 * p;
    p = static_cast<T>(2.0 / 9.0) + s2 * p;
    p = static_cast<T>(2.0 / 7.0) + s2 * p;
    p = static_cast<T>(2.0 / 5.0) + s2 * p;
    p = static_cast<T>(2.0 / 3.0) + s2 * p;
  }
  const T log_m = T(2) * s + s * (s2 * p);
  // ln 2 split so that e * ln2_hi is exact for |e| < 2^9 (float) or 2^20 (double).
  T ln2_hi, ln2_lo;
  if constexpr (sizeof(T) == sizeof(float)) {
    ln2_hi = 6.93145751953125e-01f;
    ln2_lo = 1.428606765330187e-06f;
  } else {
    ln2_hi = 6.93147180369123816490e-01;
    ln2_lo = 1.90821492927058770002e-10;
  }
  const T te = static_cast<T>(e);
  return te * ln2_hi + (te * ln2_lo + log_m);
}

/// cos(2 pi u) and sin(2 pi u) for u in (0, 1): u = q / 4 + r exactly with |r| <= 1/8, Taylor
/// polynomials on x = 2 pi r in [-pi/4, pi/4], then the quadrant q.
template <class T>
SLUICE_PHILOX_FN void cos_sin_2pi(T u, T& c, T& s) {
  const int q = static_cast<int>(u * T(4) + T(0.5));  // u * 4 is exact
  const T r = u - static_cast<T>(q) * T(0.25);        // exact (Sterbenz)
  const T x = r * static_cast<T>(6.283185307179586476925286766559);
  const T x2 = x * x;
  T ps, pc;  // sin x = x + x^3 ps, cos x = 1 + x^2 pc
  if constexpr (sizeof(T) == sizeof(float)) {
    ps = static_cast<T>(1.0 / 362880.0);
    ps = static_cast<T>(-1.0 / 5040.0) + x2 * ps;
    ps = static_cast<T>(1.0 / 120.0) + x2 * ps;
    ps = static_cast<T>(-1.0 / 6.0) + x2 * ps;
    pc = static_cast<T>(-1.0 / 3628800.0);
    pc = static_cast<T>(1.0 / 40320.0) + x2 * pc;
    pc = static_cast<T>(-1.0 / 720.0) + x2 * pc;
    pc = static_cast<T>(1.0 / 24.0) + x2 * pc;
    pc = static_cast<T>(-1.0 / 2.0) + x2 * pc;
  } else {
    // 1 / k! for the odd (sine) and even (cosine) terms, highest first.
    ps = static_cast<T>(-1.0 / 51090942171709440000.0);  // -1/21!
    ps = static_cast<T>(1.0 / 121645100408832000.0) + x2 * ps;
    ps = static_cast<T>(-1.0 / 355687428096000.0) + x2 * ps;
    ps = static_cast<T>(1.0 / 1307674368000.0) + x2 * ps;
    ps = static_cast<T>(-1.0 / 6227020800.0) + x2 * ps;
    ps = static_cast<T>(1.0 / 39916800.0) + x2 * ps;
    ps = static_cast<T>(-1.0 / 362880.0) + x2 * ps;
    ps = static_cast<T>(1.0 / 5040.0) + x2 * ps;
    ps = static_cast<T>(-1.0 / 120.0) + x2 * ps;
    ps = static_cast<T>(1.0 / 6.0) + x2 * ps;
    ps = -ps;  // the series above carries -sin's signs; sin x = x - x^3/6 + ...
    pc = static_cast<T>(1.0 / 2432902008176640000.0);  // 1/20!
    pc = static_cast<T>(-1.0 / 6402373705728000.0) + x2 * pc;
    pc = static_cast<T>(1.0 / 20922789888000.0) + x2 * pc;
    pc = static_cast<T>(-1.0 / 87178291200.0) + x2 * pc;
    pc = static_cast<T>(1.0 / 479001600.0) + x2 * pc;
    pc = static_cast<T>(-1.0 / 3628800.0) + x2 * pc;
    pc = static_cast<T>(1.0 / 40320.0) + x2 * pc;
    pc = static_cast<T>(-1.0 / 720.0) + x2 * pc;
    pc = static_cast<T>(1.0 / 24.0) + x2 * pc;
    pc = static_cast<T>(-1.0 / 2.0) + x2 * pc;
  }
  const T sn = x + x * (x2 * ps);
  const T cs = T(1) + x2 * pc;
  switch (q & 3) {
    case 0:
      c = cs;
      s = sn;
      break;
    case 1:
      c = -sn;
      s = cs;
      break;
    case 2:
      c = -cs;
      s = -sn;
      break;
    default:
      c = sn;
      s = -cs;
      break;
  }
}

/// Box-Muller: two standard normal values from two uniforms in (0, 1).
template <class T>
SLUICE_PHILOX_FN void box_muller(T u1, T u2, T& z0, T& z1) {
  const T rad = sqrt_rn(T(-2) * log_pos(u1));
  T c, s;
  cos_sin_2pi(u2, c, s);
  z0 = rad * c;
  z1 = rad * s;
}

/// The values of block `b` of the stream of `seed` (kValuesPerBlock<T> of them) into `out`.
/// `normal` selects the distribution; normal values are mean + stddev * z.
template <class T>
SLUICE_PHILOX_FN void block_values(std::uint64_t seed, std::uint64_t b, bool normal, T mean,
                                   T stddev, T* out) {
  const Words w = block(seed, b);
  if constexpr (sizeof(T) == sizeof(float)) {
    out[0] = uniform_float(w.v[0]);
    out[1] = uniform_float(w.v[1]);
    out[2] = uniform_float(w.v[2]);
    out[3] = uniform_float(w.v[3]);
    if (normal) {
      box_muller(out[0], out[1], out[0], out[1]);
      box_muller(out[2], out[3], out[2], out[3]);
      for (int i = 0; i < 4; ++i) out[i] = mean + stddev * out[i];
    }
  } else {
    out[0] = uniform_double(w.v[0], w.v[1]);
    out[1] = uniform_double(w.v[2], w.v[3]);
    if (normal) {
      box_muller(out[0], out[1], out[0], out[1]);
      out[0] = mean + stddev * out[0];
      out[1] = mean + stddev * out[1];
    }
  }
}

}  // namespace sluice::detail::philox_math
