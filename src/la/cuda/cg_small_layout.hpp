#pragma once
// How the small CG kernel (cg_small.cu) spreads a problem over the blocks of a cluster: each
// block's units and its window of elements, and the shared memory a block takes. Host and
// device; tests/la/small_geometry_test.cpp checks on the host that every element a block reads
// lies in its window.

#include <algorithm>
#include <climits>
#include <cstddef>

#include "la/cuda/small_geometry.hpp"
#include "sluice/ext/la_kernels.hpp"

namespace sluice::detail::cuda::small_steps {

constexpr int kMaxCluster = 16;  // Hopper's largest (non-portable) cluster

/// How the units are spread over the blocks, and each block's window of elements [lo, hi).
struct Layout {
  int blocks = 1;  // the cluster's size (1: one block, no cluster)
  int win = 0;     // doubles per window array (the largest window)
  int lo[kMaxCluster] = {};
  int hi[kMaxCluster] = {};
};

/// The part of the update units (first_of over `blocks` parts) that block `rank` takes, and the
/// block that takes part `rank` (its own inverse): the parts in reverse block order.
SLUICE_HD unsigned upd_part(int blocks, unsigned rank) {
  return static_cast<unsigned>(blocks) - 1 - rank;
}

/// The first and last element of tile t (host: the blocks' windows).
inline void tile_range(const Geometry& g, unsigned t, long long& first, long long& last) {
  const Origin o = tile_origin(g, t);
  const long long nx = g.nx, ny = g.ny, nz = g.nz;
  if (g.depth == 1) {
    first = o.x + nx * (o.y + ny * o.z);
    last = std::min<long long>(o.x + g.width - 1, nx - 1) +
           nx * (std::min<long long>(o.y + g.height - 1, ny - 1) + ny * o.z);
  } else {
    const long long sz = nx * ny;
    first = o.x + sz * o.z;
    last = std::min<long long>(o.x + kStepThreads - 1, sz - 1) +
           sz * std::min<long long>(o.z + g.depth - 1, nz - 1);
  }
}

/// How far from a point its stencil reaches in the element order.
inline long long reach_of(const LaStencil& s) {
  switch (s.kind) {
    case LaStencilKind::d2p5:
      return s.nx;
    case LaStencilKind::d2p9:
      return s.nx + 1;
    case LaStencilKind::d3p7:
      return s.nx * s.ny;
    case LaStencilKind::d3p27:
      return s.nx * s.ny + s.nx + 1;
  }
  return s.nx * s.ny + s.nx + 1;
}

/// The blocks' windows for a cluster of `blocks` (see the top of cg_small.cu).
inline Layout layout_for(const Geometry& g, const LaStencil& s, int blocks) {
  Layout l;
  l.blocks = blocks;
  const long long reach = reach_of(s);
  for (int b = 0; b < blocks; ++b) {
    long long lo = LLONG_MAX, hi = LLONG_MIN;
    const auto ub = static_cast<unsigned>(blocks);
    const unsigned d0 = first_of(g.dir_units, ub, b), d1 = first_of(g.dir_units, ub, b + 1);
    if (d1 > d0) {
      long long first = 0, last = 0, unused = 0;
      tile_range(g, d0 / kStepWarps, first, unused);
      tile_range(g, (d1 - 1) / kStepWarps, unused, last);
      lo = first - reach;
      hi = last + reach + 1;
    }
    const unsigned up = upd_part(blocks, static_cast<unsigned>(b));
    const unsigned u0 = first_of(g.upd_units, ub, up), u1 = first_of(g.upd_units, ub, up + 1);
    if (u1 > u0) {
      const long long c0 = u0 / kStepWarps, c1 = (u1 - 1) / kStepWarps;
      lo = std::min<long long>(lo, (g.chunks - 1 - c1) * kStepThreads);
      hi = std::max<long long>(hi, (g.chunks - c0) * kStepThreads);
    }
    lo = std::max<long long>(lo, 0);
    hi = std::min<long long>(hi, g.n);
    if (hi <= lo) lo = hi = 0;
    l.lo[b] = static_cast<int>(lo);
    l.hi[b] = static_cast<int>(hi);
    l.win = std::max(l.win, static_cast<int>(hi - lo));
  }
  return l;
}

/// Doubles of dynamic shared memory a block of the small CG kernel takes: the window's two
/// direction buffers, its r and its w, then every direction unit's sum and every update unit's
/// two.
inline std::size_t cg_small_shared_doubles(const Layout& l, const Geometry& g) {
  return std::size_t{4} * static_cast<std::size_t>(l.win) + g.dir_units +
         std::size_t{2} * g.upd_units;
}

}  // namespace sluice::detail::cuda::small_steps
