#pragma once
// Four elements at a time in the host's la kernels, and the instruction set they run with.
//
// The host's sums keep four interleaved lanes per chunk (lanes.hpp); a vector of four doubles is
// exactly those lanes, element k of the chunk in vector element k % 4. So a loop written over
// four doubles sums in the same order as the scalar loop, and every other operation is
// element-wise IEEE arithmetic: the same bits, whatever the registers (V2x2, two SSE2
// registers, in the baseline x86-64 build; V4, one AVX2 register, in the AVX2 build). No source
// of the host kernels contracts a * b + c into a fused multiply-add (src/CMakeLists.txt), so
// the AVX2 build rounds as the baseline one, the cuda kernels (--fmad=false) and the PETSc
// transcription of the tests do.
//
// Kernels are written once as SLUICE_HOST_INLINE templates over the element type T (double, V4
// or V2x2) and instantiated twice by their callers: with V4 in a function with
// SLUICE_TARGET_AVX2, with V2x2 in one without; host_isa() picks one at run time from CPUID, so the
// library runs on any x86-64. Only always-inline code is compiled for AVX2, so no out-of-line copy
// of a shared inline function built for AVX2 can be picked by the linker for the baseline code.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif

#include "la/host/lanes.hpp"

// V4 values passed between always-inline helpers: GCC notes that the (unused) out-of-line ABI
// of such functions differs with and without AVX.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#if defined(__GNUC__)
#define SLUICE_HOST_INLINE __attribute__((always_inline)) inline
#else
#define SLUICE_HOST_INLINE inline
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define SLUICE_HOST_HAVE_AVX2_BUILD 1
#define SLUICE_TARGET_AVX2 __attribute__((target("avx2")))
#else
#define SLUICE_HOST_HAVE_AVX2_BUILD 0
#define SLUICE_TARGET_AVX2
#endif

namespace sluice::detail::host {

/// Four doubles, element-wise arithmetic (GCC and Clang vector extension): one AVX2 register.
using V4 = double __attribute__((vector_size(32)));
/// Two doubles: one SSE2 register.
using V2 = double __attribute__((vector_size(16)));

/// Four doubles as two SSE2 registers, for the baseline build: GCC lowers V4 without AVX through
/// memory (3 to 5 times slower than scalar code).
struct V2x2 {
  V2 lo, hi;
};
SLUICE_HOST_INLINE V2x2 operator+(const V2x2& a, const V2x2& b) {
  return {a.lo + b.lo, a.hi + b.hi};
}
SLUICE_HOST_INLINE V2x2 operator-(const V2x2& a, const V2x2& b) {
  return {a.lo - b.lo, a.hi - b.hi};
}
SLUICE_HOST_INLINE V2x2 operator*(const V2x2& a, const V2x2& b) {
  return {a.lo * b.lo, a.hi * b.hi};
}
SLUICE_HOST_INLINE V2x2& operator+=(V2x2& a, const V2x2& b) {
  a = a + b;
  return a;
}

/// The instruction set the host la kernels run with.
enum class HostIsa : unsigned char { baseline, avx2 };

/// AVX2 when the CPU has it (and the environment variable SLUICE_HOST_ISA is not `baseline`),
/// else the baseline build. Decided once.
[[nodiscard]] HostIsa host_isa() noexcept;

/// Name of an instruction set ("baseline", "avx2").
[[nodiscard]] const char* host_isa_name(HostIsa isa) noexcept;

/// Whether this CPU can run the AVX2 build.
[[nodiscard]] bool host_cpu_has_avx2() noexcept;

template <class T>
SLUICE_HOST_INLINE T splat(double c) {
  if constexpr (std::is_same_v<T, double>) {
    return c;
  } else if constexpr (std::is_same_v<T, V2x2>) {
    return {V2{c, c}, V2{c, c}};
  } else {
    return T{c, c, c, c};
  }
}

/// A scalar and its four copies, made once outside a loop: GCC builds a vector from a scalar
/// inside the loop on every iteration otherwise (two shuffles per use), which made the stencil
/// loops bound by the shuffle port rather than by memory.
template <class V>
struct Splat {
  double d;
  V v;

  explicit Splat(double c) : d(c), v(splat<V>(c)) {}
  /// The scalar (T = double) or the four copies (T = V).
  template <class T>
  SLUICE_HOST_INLINE T get() const {
    if constexpr (std::is_same_v<T, double>) {
      return d;
    } else {
      return v;
    }
  }
};

/// The four values as a T (V4 or V2x2).
template <class T>
SLUICE_HOST_INLINE T make4(double a, double b, double c, double d) {
  if constexpr (std::is_same_v<T, V2x2>) {
    return {V2{a, b}, V2{c, d}};
  } else {
    return T{a, b, c, d};
  }
}

/// Element l of four values.
template <class T>
SLUICE_HOST_INLINE double element(const T& v, int l) {
  if constexpr (std::is_same_v<T, V2x2>) {
    return l < 2 ? v.lo[l] : v.hi[l - 2];
  } else {
    return v[l];
  }
}

template <class T>
SLUICE_HOST_INLINE T load(const double* p) {
  if constexpr (std::is_same_v<T, double>) {
    return *p;
  } else if constexpr (std::is_same_v<T, V2x2>) {
    V2x2 v;
    std::memcpy(&v.lo, p, sizeof v.lo);
    std::memcpy(&v.hi, p + 2, sizeof v.hi);
    return v;
  } else {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
}

template <class T>
SLUICE_HOST_INLINE void store(double* p, const T& v) {
  if constexpr (std::is_same_v<T, double>) {
    *p = v;
  } else if constexpr (std::is_same_v<T, V2x2>) {
    std::memcpy(p, &v.lo, sizeof v.lo);
    std::memcpy(p + 2, &v.hi, sizeof v.hi);
  } else {
    std::memcpy(p, &v, sizeof v);
  }
}

// Streaming (non-temporal) stores: the line goes to memory without being read into the cache
// first, so a vector that is only written moves 8 bytes per element instead of 16 (the read for
// ownership). Worth it only where the data is far larger than the caches, as the next pass reads
// it from memory anyway (stream_stores_for). Regular stores under the sanitizers, which do not
// see the intrinsics' writes.
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define SLUICE_HOST_HAVE_STREAM_STORES 1
#else
#define SLUICE_HOST_HAVE_STREAM_STORES 0
#endif

/// Stores v at p, streaming four elements at a time when NT (p then 16-byte aligned: every
/// streamed vector's base is, see stream_stores_for). Single elements (chunk tails) are stored
/// as usual.
template <bool NT, class T>
SLUICE_HOST_INLINE void put(double* p, const T& v) {
#if SLUICE_HOST_HAVE_STREAM_STORES
  if constexpr (NT && std::is_same_v<T, V2x2>) {
    _mm_stream_pd(p, v.lo);
    _mm_stream_pd(p + 2, v.hi);
    return;
  } else if constexpr (NT && std::is_same_v<T, V4>) {
    _mm_stream_pd(p, V2{v[0], v[1]});
    _mm_stream_pd(p + 2, V2{v[2], v[3]});
    return;
  }
#endif
  store(p, v);
}

/// Orders a chunk's streaming stores before whatever tells another thread the chunk is done
/// (they are weakly ordered: a release store does not order them).
SLUICE_HOST_INLINE void stream_fence() {
#if SLUICE_HOST_HAVE_STREAM_STORES
  _mm_sfence();
#endif
}

/// Whether a pass over n elements should stream the vectors it only writes: when they are far
/// larger than the last-level cache (a vector above a quarter of it; the next pass reads them
/// from memory anyway). SLUICE_HOST_STREAM_STORES=off never streams, =on always (for
/// measurements). False where the build has no streaming stores.
[[nodiscard]] bool stream_stores_for(std::size_t n) noexcept;

/// Whether every pointer is aligned for streaming (16 bytes; null pointers pass).
template <class... P>
[[nodiscard]] bool stream_aligned(const P*... p) noexcept {
  return ((reinterpret_cast<std::uintptr_t>(p) % 16 == 0) && ...);
}

/// The element type of an accumulator pointer handed to a lane body.
template <class P>
using ElementOf = std::remove_cv_t<std::remove_pointer_t<P>>;

/// over_lanes (lanes.hpp) four elements at a time: `body(i, acc)` is called with `acc` a
/// `double*` (the lane of element i) for single elements and a `V*` (V4 or V2x2: the four
/// lanes, one sum per V) for the four elements from i, which then starts at lane 0. `NS` sums
/// are kept.
template <class V, int NS, class Body>
SLUICE_HOST_INLINE void over_lanes4(std::size_t lo, std::size_t first, std::size_t last,
                                    Lanes& lanes, Body&& body) {
  std::size_t i = first;
  for (; i < last && ((i - lo) & 3) != 0; ++i) body(i, lanes.v[(i - lo) & 3]);
  if (i + 4 <= last) {
    constexpr int kS = NS > 0 ? NS : 1;
    V acc[kS];
    for (int s = 0; s < kS; ++s) {
      acc[s] = make4<V>(lanes.v[0][s], lanes.v[1][s], lanes.v[2][s], lanes.v[3][s]);
    }
    for (; i + 4 <= last; i += 4) body(i, acc);
    for (int s = 0; s < kS; ++s) {
      for (int l = 0; l < 4; ++l) lanes.v[l][s] = element(acc[s], l);
    }
  }
  for (; i < last; ++i) body(i, lanes.v[(i - lo) & 3]);
}

}  // namespace sluice::detail::host
