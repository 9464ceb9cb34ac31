#pragma once
// The host's matrix-free stencil products: rows computed a line segment at a time, the interior of
// a line (every neighbour present) by a loop without branches that the compiler vectorizes, the
// rest row by row through la_math::stencil_row. The arithmetic of each row is kernel_math.hpp's,
// term for term, so results are the same bits as the per-row code and the cuda backend's.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "la/host/lanes.hpp"
#include "la/kernel_math.hpp"

namespace sluice::detail::host {

/// A product's input (la_math::MatvecInput) with its form fixed at compile time: X2, x2 is
/// present; RV, the right scaling is a vector. The same expressions as MatvecInput.
template <bool X2, bool RV>
struct FixedInput {
  const double* x;
  const double* x2;
  double s;
  const double* rv;
  double c;
  double xs;

  [[nodiscard]] double raw(std::int64_t j) const {
    if constexpr (X2) {
      return xs * x[j] + s * x2[j];
    } else {
      return xs * x[j];
    }
  }
  [[nodiscard]] double operator()(std::int64_t j) const {
    if constexpr (RV) {
      return rv[j] * raw(j);
    } else {
      return raw(j);
    }
  }
  [[nodiscard]] double right_scale() const { return RV ? 1.0 : c; }
};

/// Rows per piece of a line whose values are formed before their epilogue runs (on the stack).
inline constexpr std::int64_t kPiece = 512;

/// out[k] = row (i0 + k) of stencil K for the points ix0 + k of one x line at (iy, iz), k < len.
template <LaStencilKind K, class In>
void stencil_line(const LaStencil& s, const In in, std::int64_t ix0, std::int64_t len,
                  std::int64_t iy, std::int64_t iz, std::int64_t i0, double* out) {
  const std::int64_t sy = s.nx, sz = s.nx * s.ny;
  const bool five = K == LaStencilKind::d2p5, seven = K == LaStencilKind::d3p7;
  const bool inner_y = iy > 0 && iy + 1 < s.ny;
  const bool inner_z =
      K == LaStencilKind::d2p5 || K == LaStencilKind::d2p9 || (iz > 0 && iz + 1 < s.nz);
  std::int64_t k = 0;
  if ((five || seven) && inner_y && inner_z) {
    // Interior of the line: every neighbour present, added in stencil_neighbors' order.
    const std::int64_t first = std::max<std::int64_t>(ix0, 1) - ix0;
    const std::int64_t last = std::min<std::int64_t>(ix0 + len, s.nx - 1) - ix0;
    for (; k < first; ++k) out[k] = la_math::stencil_row<K>(s, in, ix0 + k, iy, iz, i0 + k);
    const double rs = in.right_scale(), nb = s.neighbor, ce = s.center;
    for (; k < last; ++k) {
      const std::int64_t i = i0 + k;
      double acc = 0;
      if constexpr (seven) acc += in(i - sz);
      acc += in(i - sy);
      acc += in(i - 1);
      acc += in(i + 1);
      acc += in(i + sy);
      if constexpr (seven) acc += in(i + sz);
      out[k] = rs * (nb * acc + ce * in(i));
    }
  }
  for (; k < len; ++k) out[k] = la_math::stencil_row<K>(s, in, ix0 + k, iy, iz, i0 + k);
}

/// la_math::finish_row over out[0, len) = rows [i0, i0 + len) of the chunk starting at row
/// `lo`, with the epilogue E, whether the left scaling is a vector (LV) and whether the input is
/// stored (XO) fixed at compile time and the arguments in locals (through `a`, every store might
/// change them for all the compiler knows). The same expressions as finish_row and
/// la_math::epilogue; each row's term is added to its lane of `lanes` (lanes.hpp).
template <LaEpilogue E, bool LV, bool XO, class In>
void finish_rows(const LaMatvecArgs& a, const In in, double scalar, const double* out,
                 std::int64_t len, std::int64_t i0, std::int64_t lo, Lanes& lanes) {
  double* const x_out = a.x_out;
  double* const y = a.y;
  const double* const z = a.z;
  const double* const lv = a.left.v;
  const double lc = a.left.c;
  const auto first = static_cast<std::size_t>(i0);
  // The lanes in a local copy too: through the reference, each store to y might change them.
  Lanes mine = lanes;
  over_lanes(static_cast<std::size_t>(lo), first, first + static_cast<std::size_t>(len), mine,
             [&](std::size_t u, double* acc) SLUICE_LANE_BODY {
               const auto i = static_cast<std::int64_t>(u);
               if constexpr (XO) x_out[i] = in.raw(i);
               const double v = (LV ? lv[i] : lc) * out[i - i0];
               if constexpr (E == LaEpilogue::store) {
                 y[i] = v;
                 acc[0] += 0;
               } else if constexpr (E == LaEpilogue::add) {
                 y[i] = v + z[i];
                 acc[0] += 0;
               } else if constexpr (E == LaEpilogue::sub) {
                 y[i] = z[i] - v;
                 acc[0] += 0;
               } else if constexpr (E == LaEpilogue::store_dot) {
                 y[i] = v;
                 acc[0] += v * z[i];
               } else {
                 const double r = y[i] - scalar * v;
                 y[i] = r;
                 acc[0] += r * r;
               }
             });
  lanes = mine;
}

/// finish_rows for the product's epilogue, left scaling and input store.
template <class In>
void finish_piece(const LaMatvecArgs& a, const In& in, double scalar, const double* out,
                  std::int64_t len, std::int64_t i0, std::int64_t lo, Lanes& lanes) {
  la_math::with_value<LaEpilogue::store, LaEpilogue::add, LaEpilogue::sub, LaEpilogue::store_dot,
                      LaEpilogue::residual>(a.epilogue, [&](auto e) {
    constexpr LaEpilogue E = decltype(e)::value;
    const bool lv = a.left.v != nullptr, xo = a.x_out != nullptr;
    if (lv && xo) return finish_rows<E, true, true>(a, in, scalar, out, len, i0, lo, lanes);
    if (lv) return finish_rows<E, true, false>(a, in, scalar, out, len, i0, lo, lanes);
    if (xo) return finish_rows<E, false, true>(a, in, scalar, out, len, i0, lo, lanes);
    return finish_rows<E, false, false>(a, in, scalar, out, len, i0, lo, lanes);
  });
}

/// Rows [lo, hi) (one chunk) of the stencil product `a` with input `in`; returns the epilogue's
/// sum in the chunk's lane order (lanes.hpp).
template <LaStencilKind K, class In>
double stencil_rows(const LaMatvecArgs& a, const In& in, double scalar, std::size_t lo,
                    std::size_t hi) {
  const auto& s = a.A.stencil;
  double out[kPiece];
  Lanes lanes;
  auto i = static_cast<std::int64_t>(lo);
  const auto end = static_cast<std::int64_t>(hi);
  std::int64_t ix = i % s.nx;
  std::int64_t iy = (i / s.nx) % s.ny;
  std::int64_t iz = i / (s.nx * s.ny);
  while (i < end) {
    const std::int64_t len = std::min({end - i, s.nx - ix, kPiece});
    stencil_line<K>(s, in, ix, len, iy, iz, i, out);
    finish_piece(a, in, scalar, out, len, i, static_cast<std::int64_t>(lo), lanes);
    i += len;
    ix += len;
    if (ix == s.nx) {
      ix = 0;
      if (++iy == s.ny) {
        iy = 0;
        ++iz;
      }
    }
  }
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
