#pragma once
// The host's matrix-free stencil products: rows computed a line segment at a time, the interior of
// a line (every neighbour present) by a loop without branches that the compiler vectorizes, the
// rest row by row through la_math::stencil_row. The arithmetic of each row is kernel_math.hpp's,
// term for term, so results are the same bits as the per-row code and the cuda backend's.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "la/host/lanes.hpp"
#include "la/host/simd.hpp"
#include "la/kernel_math.hpp"

namespace sluice::detail::host {

/// A product's input (la_math::MatvecInput) with its form fixed at compile time: X2, x2 is
/// present; RV, the right scaling is a vector. Its arguments only: a kernel computes with the
/// HoistedInput it makes of it.
template <bool X2, bool RV>
struct FixedInput {
  const double* x;
  const double* x2;
  double s;
  const double* rv;
  double c;
  double xs;
};

/// A FixedInput as one instruction set's kernel computes with it: the same expressions as
/// MatvecInput, for one element (T = double) or four (T = V4 or V2x2, simd.hpp), with the
/// scalars also as four copies (Splat). Made once per call, a local, so no store through `out`
/// can change them either.
template <bool X2, bool RV, class V>
struct HoistedInput {
  const double* x;
  const double* x2;
  const double* rv;
  double c;
  Splat<V> xs, s;

  explicit HoistedInput(const FixedInput<X2, RV>& in)
      : x(in.x), x2(in.x2), rv(in.rv), c(in.c), xs(in.xs), s(in.s) {}

  template <class T>
  SLUICE_HOST_INLINE T raw_at(std::int64_t j) const {
    if constexpr (X2) {
      return xs.template get<T>() * load<T>(x + j) + s.template get<T>() * load<T>(x2 + j);
    } else {
      return xs.template get<T>() * load<T>(x + j);
    }
  }
  template <class T>
  SLUICE_HOST_INLINE T at(std::int64_t j) const {
    if constexpr (RV) {
      return load<T>(rv + j) * raw_at<T>(j);
    } else {
      return raw_at<T>(j);
    }
  }
  [[nodiscard]] SLUICE_HOST_INLINE double raw(std::int64_t j) const { return raw_at<double>(j); }
  [[nodiscard]] SLUICE_HOST_INLINE double operator()(std::int64_t j) const { return at<double>(j); }
  [[nodiscard]] SLUICE_HOST_INLINE double right_scale() const { return RV ? 1.0 : c; }
};

template <class V, bool X2, bool RV>
SLUICE_HOST_INLINE HoistedInput<X2, RV, V> hoist(const FixedInput<X2, RV>& in) {
  return HoistedInput<X2, RV, V>(in);
}

/// Rows per piece of a chunk whose products are formed before their epilogue runs (on the
/// stack). A multiple of 4, so that every piece of a chunk starts at lane 0.
inline constexpr std::int64_t kPiece = 512;

/// out[k] = row (i0 + k) of stencil K for the points ix0 + k of one x line at (iy, iz), k < len.
template <LaStencilKind K, class V, class In>
SLUICE_HOST_INLINE void stencil_line(const LaStencil& s, const In& in, std::int64_t ix0,
                                     std::int64_t len, std::int64_t iy, std::int64_t iz,
                                     std::int64_t i0, double* out) {
  const std::int64_t sy = s.nx, sz = s.nx * s.ny;
  const bool five = K == LaStencilKind::d2p5, seven = K == LaStencilKind::d3p7;
  std::int64_t k = 0;
  if (five || seven) {
    // The points of the line with both x neighbours, the neighbours present in y and z the same
    // for all of them, added in stencil_neighbors' order (an absent one adds nothing there
    // either). Lines on a face of the grid too: at 11^3 points a third of the lines.
    // The slowest dimension's ends may be open (LaStencil): z's in 3D, y's in 2D.
    const bool zm = seven && (iz > 0 || s.open_lo), zp = seven && (iz + 1 < s.nz || s.open_hi);
    const bool ym = iy > 0 || (five && s.open_lo), yp = iy + 1 < s.ny || (five && s.open_hi);
    const std::int64_t first = std::max<std::int64_t>(ix0, 1) - ix0;
    const std::int64_t last = std::min<std::int64_t>(ix0 + len, s.nx - 1) - ix0;
    for (; k < first; ++k) out[k] = la_math::stencil_row<K>(s, in, ix0 + k, iy, iz, i0 + k);
    const Splat<V> rs(in.right_scale()), nb(s.neighbor), ce(s.center);
    // The interior lines (every neighbour present) with the flags as constants.
    auto rows = [&](auto* tag, auto all) SLUICE_LANE_BODY {
      using T = ElementOf<decltype(tag)>;
      constexpr bool kAll = decltype(all)::value;
      const std::int64_t i = i0 + k;
      T acc = splat<T>(0.0);
      if (seven && (kAll || zm)) acc += in.template at<T>(i - sz);
      if (kAll || ym) acc += in.template at<T>(i - sy);
      acc += in.template at<T>(i - 1);
      acc += in.template at<T>(i + 1);
      if (kAll || yp) acc += in.template at<T>(i + sy);
      if (seven && (kAll || zp)) acc += in.template at<T>(i + sz);
      store(out + k, rs.template get<T>() * (nb.template get<T>() * acc +
                                             ce.template get<T>() * in.template at<T>(i)));
    };
    auto line = [&](auto all) SLUICE_LANE_BODY {
      for (; k + 4 <= last; k += 4) rows(static_cast<V*>(nullptr), all);
      for (; k < last; ++k) rows(static_cast<double*>(nullptr), all);
    };
    if (ym && yp && (five || (zm && zp))) {
      line(std::true_type{});
    } else {
      line(std::false_type{});
    }
  }
  for (; k < len; ++k) out[k] = la_math::stencil_row<K>(s, in, ix0 + k, iy, iz, i0 + k);
}

/// la_math::finish_row over out[0, len) = rows [i0, i0 + len) of the chunk starting at row
/// `lo`, with the epilogue E, whether the left scaling is a vector (LV) and whether the input is
/// stored (XO) fixed at compile time and the arguments in locals (through `a`, every store might
/// change them for all the compiler knows). The same expressions as finish_row and
/// la_math::epilogue, four rows at a time; each row's term is added to its lane of `lanes`
/// (lanes.hpp). NT: the vectors only written (the stored input, a stored product) are streamed
/// (put, simd.hpp).
template <LaEpilogue E, bool LV, bool XO, bool NT, class V, class In>
SLUICE_HOST_INLINE void finish_rows(const LaMatvecArgs& a, const In& in_ref, double scalar,
                                    const double* out, std::int64_t len, std::int64_t i0,
                                    std::int64_t lo, Lanes& lanes) {
  const auto in = hoist<V>(in_ref);
  const Splat<V> lc(a.left.c), sc(scalar);
  double* const x_out = a.x_out;
  double* const y = a.y;
  const double* const z = a.z;
  const double* const lv = a.left.v;
  const auto first = static_cast<std::size_t>(i0);
  constexpr int kSums = E == LaEpilogue::store_dot || E == LaEpilogue::residual ? 1 : 0;
  // z is the stored input in CG's direction product (z = x_out = the new direction): its value
  // is taken from the register, not read back (after a streaming store that read would wait for
  // the line to reach memory and come back).
  const bool z_is_input = XO && z == x_out;
  over_lanes4<V, kSums>(
      static_cast<std::size_t>(lo), first, first + static_cast<std::size_t>(len), lanes,
      [&](std::size_t u, auto* acc) SLUICE_LANE_BODY {
        using T = ElementOf<decltype(acc)>;
        const auto i = static_cast<std::int64_t>(u);
        T raw = splat<T>(0.0);
        if constexpr (XO) {
          raw = in.template raw_at<T>(i);
          put<NT>(x_out + i, raw);
        }
        auto z_at = [&]() SLUICE_LANE_BODY { return z_is_input ? raw : load<T>(z + i); };
        const T v = (LV ? load<T>(lv + i) : lc.template get<T>()) * load<T>(out + (i - i0));
        if constexpr (E == LaEpilogue::store) {
          put<NT>(y + i, v);
        } else if constexpr (E == LaEpilogue::add) {
          store(y + i, v + z_at());
        } else if constexpr (E == LaEpilogue::sub) {
          store(y + i, z_at() - v);
        } else if constexpr (E == LaEpilogue::store_dot) {
          put<NT>(y + i, v);
          acc[0] += v * z_at();
        } else {
          const T r = load<T>(y + i) - sc.template get<T>() * v;
          store(y + i, r);
          acc[0] += r * r;
        }
      });
}

/// Rows [p0, p0 + len) of the stencil product K into out[0, len), a line segment at a time.
template <LaStencilKind K, class V, class In>
SLUICE_HOST_INLINE void stencil_piece(const LaStencil& s, const In& in_ref, std::int64_t p0,
                                      std::int64_t len, double* out) {
  const auto in = hoist<V>(in_ref);
  std::int64_t ix = p0 % s.nx;
  std::int64_t iy = (p0 / s.nx) % s.ny;
  std::int64_t iz = p0 / (s.nx * s.ny);
  for (std::int64_t k = 0; k < len;) {
    const std::int64_t seg = std::min(len - k, s.nx - ix);
    stencil_line<K, V>(s, in, ix, seg, iy, iz, p0 + k, out + k);
    k += seg;
    ix += seg;
    if (ix == s.nx) {
      ix = 0;
      if (++iy == s.ny) {
        iy = 0;
        ++iz;
      }
    }
  }
}

/// stencil_piece and finish_rows compiled for each instruction set (simd.hpp); a chunk calls
/// them per piece.
template <LaStencilKind K, class In>
void piece_baseline(const LaStencil& s, const In& in, std::int64_t p0, std::int64_t len,
                    double* out) {
  stencil_piece<K, V2x2>(s, in, p0, len, out);
}
template <LaStencilKind K, class In>
SLUICE_TARGET_AVX2 void piece_avx2(const LaStencil& s, const In& in, std::int64_t p0,
                                   std::int64_t len, double* out) {
  stencil_piece<K, V4>(s, in, p0, len, out);
}
template <LaEpilogue E, bool LV, bool XO, bool NT, class In>
void finish_baseline(const LaMatvecArgs& a, const In& in, double scalar, const double* out,
                     std::int64_t len, std::int64_t i0, std::int64_t lo, Lanes& lanes) {
  finish_rows<E, LV, XO, NT, V2x2>(a, in, scalar, out, len, i0, lo, lanes);
}
template <LaEpilogue E, bool LV, bool XO, bool NT, class In>
SLUICE_TARGET_AVX2 void finish_avx2(const LaMatvecArgs& a, const In& in, double scalar,
                                    const double* out, std::int64_t len, std::int64_t i0,
                                    std::int64_t lo, Lanes& lanes) {
  finish_rows<E, LV, XO, NT, V4>(a, in, scalar, out, len, i0, lo, lanes);
}

/// Calls `fn(std::integral_constant<LaEpilogue, E>, std::bool_constant<LV>,
/// std::bool_constant<XO>)` for the product's epilogue, left scaling and input store.
template <class Fn>
decltype(auto) with_epilogue_form(const LaMatvecArgs& a, Fn&& fn) {
  return la_math::with_value<LaEpilogue::store, LaEpilogue::add, LaEpilogue::sub,
                             LaEpilogue::store_dot, LaEpilogue::residual>(a.epilogue, [&](auto e) {
    const bool lv = a.left.v != nullptr, xo = a.x_out != nullptr;
    using T = std::true_type;
    using F = std::false_type;
    if (lv && xo) return fn(e, T{}, T{});
    if (lv) return fn(e, T{}, F{});
    if (xo) return fn(e, F{}, T{});
    return fn(e, F{}, F{});
  });
}

/// Rows [lo, hi) (one chunk) of the stencil product `a` with input `in`, run with the
/// instruction set `isa`; returns the epilogue's sum in the chunk's lane order (lanes.hpp).
/// Pieces of kPiece rows: their products, a line segment at a time, then their epilogue, which
/// streams the vectors it only writes when `stream` (simd.hpp: stream_stores_for).
template <LaStencilKind K, class In>
double stencil_rows(const LaMatvecArgs& a, const In& in, double scalar, std::size_t lo,
                    std::size_t hi, HostIsa isa = host_isa(), bool stream = false) {
  const bool avx2 = SLUICE_HOST_HAVE_AVX2_BUILD && isa == HostIsa::avx2;
  using Piece = void (*)(const LaStencil&, const In&, std::int64_t, std::int64_t, double*);
  using Finish = void (*)(const LaMatvecArgs&, const In&, double, const double*, std::int64_t,
                          std::int64_t, std::int64_t, Lanes&);
  const Piece piece = avx2 ? &piece_avx2<K, In> : &piece_baseline<K, In>;
  const Finish finish = with_epilogue_form(a, [&](auto e, auto lv, auto xo) -> Finish {
    constexpr LaEpilogue E = decltype(e)::value;
    constexpr bool LV = decltype(lv)::value, XO = decltype(xo)::value;
    if constexpr (XO || E == LaEpilogue::store || E == LaEpilogue::store_dot) {
      if (stream) {
        return avx2 ? &finish_avx2<E, LV, XO, true, In> : &finish_baseline<E, LV, XO, true, In>;
      }
    }
    return avx2 ? &finish_avx2<E, LV, XO, false, In> : &finish_baseline<E, LV, XO, false, In>;
  });
  double out[kPiece];
  Lanes lanes;
  const auto end = static_cast<std::int64_t>(hi);
  for (auto p = static_cast<std::int64_t>(lo); p < end; p += kPiece) {
    const std::int64_t len = std::min(end - p, kPiece);
    piece(a.A.stencil, in, p, len, out);
    finish(a, in, scalar, out, len, p, static_cast<std::int64_t>(lo), lanes);
  }
  if (stream) stream_fence();
  return lanes.total(0);
}

/// Calls `fn(in)` with the input of product `a` in its fixed form.
template <class Fn>
decltype(auto) with_fixed_input(const LaMatvecArgs& a, Fn&& fn) {
  const double s = a.x2 != nullptr ? la_math::value(a.x2_scale) : 0.0;
  const bool x2 = a.x2 != nullptr, rv = a.right.v != nullptr;
  if (x2 && rv) return fn(FixedInput<true, true>{a.x, a.x2, s, a.right.v, a.right.c, a.x_scale});
  if (x2) return fn(FixedInput<true, false>{a.x, a.x2, s, a.right.v, a.right.c, a.x_scale});
  if (rv) return fn(FixedInput<false, true>{a.x, a.x2, s, a.right.v, a.right.c, a.x_scale});
  return fn(FixedInput<false, false>{a.x, a.x2, s, a.right.v, a.right.c, a.x_scale});
}

}  // namespace sluice::detail::host
