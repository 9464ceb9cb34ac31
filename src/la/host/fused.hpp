#pragma once
// The host's fused solver steps, one element or four at a time (simd.hpp): the expressions of
// la_math::fused_elem (kernel_math.hpp) term for term, over an element type T (double or V4),
// so the same bits (tests/host/host_kernels_test.cpp, randomized). The branches on arguments
// that are the same for every element stay outside the arithmetic, once per four elements.

#include <cstddef>

#include "la/host/simd.hpp"
#include "la/kernel_math.hpp"

namespace sluice::detail::host {

template <class T, class V>
SLUICE_HOST_INLINE T diag_at(const LaDiag& d, const Splat<V>& c, std::size_t i) {
  return d.v != nullptr ? load<T>(d.v + i) : c.template get<T>();
}

/// The norm's term by norm type (1: preconditioned, 2: unpreconditioned, else none), as
/// la_math::cg_update_at and fused_elem add it.
template <class T>
SLUICE_HOST_INLINE T norm_term(std::int32_t norm_type, const T& z, const T& r) {
  return norm_type == 1 ? z * z : norm_type == 2 ? r * r : splat<T>(0.0);
}

/// la_math::fused_elem<Op> at element i (T = double) or elements [i, i + 4) (T = V4 or V2x2).
/// NT: the vectors the step only writes are streamed (put, simd.hpp). The scalars come as
/// Splat: s[0, 4) and the preconditioner's constant `pc`.
template <LaFusedOp Op, bool NT, class T, class V>
SLUICE_HOST_INLINE void fused_at(const LaFusedArgs& f, const Splat<V>* s, const Splat<V>& pc,
                                 int steps, std::size_t i, T* acc) {
  auto at = [&](int k) SLUICE_LANE_BODY { return s[k].template get<T>(); };
  if constexpr (Op == LaFusedOp::rhs_norm) {
    const T b = load<T>(f.b + i);
    const T t = diag_at<T>(f.pc, pc, i) * b;
    acc[0] += t * t;
    acc[1] += b * t;
    acc[2] += b * b;
  } else if constexpr (Op == LaFusedOp::cg_init) {
    const T r = f.b != nullptr ? load<T>(f.b + i) : load<T>(f.r + i);
    if (f.b != nullptr) {
      put<NT>(f.x + i, splat<T>(0.0));
      put<NT>(f.r + i, r);
    }
    put<NT>(f.p + i, splat<T>(0.0));
    if (f.w != nullptr) put<NT>(f.w + i, splat<T>(0.0));
    const T z = diag_at<T>(f.pc, pc, i) * r;
    if (f.z != nullptr) put<NT>(f.z + i, z);
    acc[0] += norm_term(f.norm_type, z, r);
    acc[1] += z * r;
  } else if constexpr (Op == LaFusedOp::cg_update) {
    const T a = at(0);
    const T x = load<T>(f.x + i) + a * load<T>(f.p + i);
    const T r = load<T>(f.r + i) - a * load<T>(f.w + i);
    const T z = diag_at<T>(f.pc, pc, i) * r;
    acc[0] += norm_term(f.norm_type, z, r);
    acc[1] += z * r;
    store(f.x + i, x);
    store(f.r + i, r);
    if (f.z != nullptr) put<NT>(f.z + i, z);
  } else if constexpr (Op == LaFusedOp::tf_init) {
    const T r = diag_at<T>(f.pc, pc, i) * load<T>(f.r + i);
    store(f.r + i, r);
    put<NT>(f.rp + i, r);
    put<NT>(f.u + i, r);
    put<NT>(f.p + i, r);
    put<NT>(f.d + i, splat<T>(0.0));
    acc[0] += r * r;
    acc[1] += r * r;
  } else if constexpr (Op == LaFusedOp::tf_qt) {
    const T u = load<T>(f.u + i);
    const T q = u - at(0) * load<T>(f.v + i);
    put<NT>(f.q + i, q);
    put<NT>(f.t + i, u + q);
  } else if constexpr (Op == LaFusedOp::tf_dx) {
    T d = load<T>(f.u + i) + at(1) * load<T>(f.d + i);
    T x = load<T>(f.x + i) + at(0) * d;
    if (steps > 1) {
      d = load<T>(f.q + i) + at(3) * d;
      x = x + at(2) * d;
    }
    store(f.d + i, d);
    store(f.x + i, x);
    acc[0] += load<T>(f.r + i) * load<T>(f.rp + i);
  } else if constexpr (Op == LaFusedOp::tf_uqp) {
    const T a = at(0);
    const T u = load<T>(f.r + i) + a * load<T>(f.q + i);
    const T q = load<T>(f.q + i) + a * load<T>(f.p + i);
    put<NT>(f.u + i, u);
    store(f.q + i, q);
    store(f.p + i, u + a * q);
  } else if constexpr (Op == LaFusedOp::cg1_update) {
    const T a = at(0);
    const T b = at(1);
    const T c = diag_at<T>(f.pc, pc, i);
    const T p = c * load<T>(f.r + i) + b * load<T>(f.p + i);
    const T w = load<T>(f.v + i) + b * load<T>(f.w + i);
    store(f.p + i, p);
    store(f.w + i, w);
    store(f.x + i, load<T>(f.x + i) + a * p);
    const T r = load<T>(f.r + i) - a * w;
    const T z = c * r;
    acc[0] += norm_term(f.norm_type, z, r);
    acc[1] += z * r;
    store(f.r + i, r);
    if (f.z != nullptr) store(f.z + i, z);
  } else if constexpr (Op == LaFusedOp::unwind) {
    store(f.x + i, load<T>(f.x + i) + diag_at<T>(f.pc, pc, i) * load<T>(f.t + i));
  }
}

/// Elements [lo, hi) (one chunk) of the fused step Op: the sums in lane order (lanes.hpp) added
/// to acc[0, fused_sums(Op)).
template <LaFusedOp Op, bool NT, class V>
SLUICE_HOST_INLINE void fused_chunk(const LaFusedArgs& f, const double* s, int steps,
                                    std::size_t lo, std::size_t hi, double* acc) {
  // The arguments and scalars in locals: through `f`, which may alias the vectors for all the
  // compiler knows, every store would reload them.
  const LaFusedArgs g = f;
  const Splat<V> t[4] = {Splat<V>(s[0]), Splat<V>(s[1]), Splat<V>(s[2]), Splat<V>(s[3])};
  const Splat<V> pc(f.pc.c);
  constexpr int kSums = la_math::fused_sums(Op);
  Lanes lanes;
  over_lanes4<V, kSums>(lo, lo, hi, lanes, [&](std::size_t i, auto* sums) SLUICE_LANE_BODY {
    fused_at<Op, NT>(g, t, pc, steps, i, sums);
  });
  if constexpr (NT) stream_fence();
  for (int k = 0; k < kSums; ++k) acc[k] += lanes.total(k);
}

/// fused_chunk compiled for each instruction set (simd.hpp).
template <LaFusedOp Op, bool NT>
void fused_baseline(const LaFusedArgs& f, const double* s, int steps, std::size_t lo,
                    std::size_t hi, double* acc) {
  fused_chunk<Op, NT, V2x2>(f, s, steps, lo, hi, acc);
}
template <LaFusedOp Op, bool NT>
SLUICE_TARGET_AVX2 void fused_avx2(const LaFusedArgs& f, const double* s, int steps, std::size_t lo,
                                   std::size_t hi, double* acc) {
  fused_chunk<Op, NT, V4>(f, s, steps, lo, hi, acc);
}

/// Whether step Op writes a vector it does not read (which streaming stores then write).
constexpr bool writes_fresh(LaFusedOp op) {
  return op == LaFusedOp::cg_init || op == LaFusedOp::cg_update || op == LaFusedOp::tf_init ||
         op == LaFusedOp::tf_qt || op == LaFusedOp::tf_uqp;
}

using FusedChunk = void (*)(const LaFusedArgs&, const double*, int, std::size_t, std::size_t,
                            double*);

/// The chunk function of step Op for the instruction set `isa`, streaming the vectors it only
/// writes when `stream` (simd.hpp: stream_stores_for, stream_aligned).
template <LaFusedOp Op>
FusedChunk fused_chunk_for(HostIsa isa, bool stream = false) {
  const bool avx2 = SLUICE_HOST_HAVE_AVX2_BUILD && isa == HostIsa::avx2;
  if constexpr (writes_fresh(Op)) {
    if (stream) return avx2 ? &fused_avx2<Op, true> : &fused_baseline<Op, true>;
  }
  return avx2 ? &fused_avx2<Op, false> : &fused_baseline<Op, false>;
}

}  // namespace sluice::detail::host
