#pragma once
// The geometry of the steps the small la kernels reproduce (cg_small.cu, tf_small.cu): the tiles
// of a stencil product, the chunks of a fused step, and the "units" (one warp of one step block
// each); host and device (tests/la/small_geometry_test.cpp checks it on the host).

#include "la/kernel_math.hpp"

namespace sluice::detail::cuda::small_steps {

constexpr int kStepThreads = 256;  // threads of a step block (every la kernel's block)
constexpr int kStepWarps = kStepThreads / 32;
constexpr int kRows = 2;  // points of a tile per thread (la_kernels.cu's kRowsPerThread)

/// The steps' work as the kernel sees it: the direction product's tiles over an nx x ny x nz
/// grid, the update's chunks, and the units (one warp of one step block each).
struct Geometry {
  int nx = 0, ny = 0, nz = 0, n = 0;
  unsigned width = 0, height = 0, depth = 1, tx = 0, ty = 0, tiles = 0;
  unsigned chunks = 0;
  unsigned dir_units = 0;  // tiles * 8
  unsigned upd_units = 0;  // chunks * 8
  int wshift = -1;         // log2(width) where the width is a power of 2 (shifts, not divisions)
};

/// log2(v) for a power of 2, else -1 (Geometry::wshift).
inline int log2_if_pow2(unsigned v) {
  if (v == 0 || (v & (v - 1)) != 0) return -1;
  int k = 0;
  while ((1u << k) != v) ++k;
  return k;
}

/// The first of `units` units that part `part` of `parts` takes (parts take runs in order).
SLUICE_HD unsigned first_of(unsigned units, unsigned parts, unsigned part) {
  return units * part / parts;  // units (shared memory holds their sums) x 512 warps < 2^32
}

/// The part that takes unit `unit` (the inverse of first_of).
SLUICE_HD unsigned owner_of(unsigned units, unsigned parts, unsigned unit) {
  return ((unit + 1) * parts - 1) / units;
}

/// Element `lane` of update unit `unit`: fused_kernel's block v = unit / 8 takes chunk v (one
/// chunk per block here), counted from the end of the vectors, and its warp unit % 8 32 of its
/// 256 elements.
SLUICE_HD int update_element(const Geometry& g, unsigned unit, int lane) {
  return static_cast<int>((g.chunks - 1 - unit / kStepWarps) * kStepThreads +
                          (unit % kStepWarps) * 32) +
         lane;
}

/// The update unit that holds element j.
SLUICE_HD unsigned update_unit(const Geometry& g, int j) {
  const auto u = static_cast<unsigned>(j);
  return (g.chunks - 1 - u / kStepThreads) * kStepWarps + (u % kStepThreads) / 32;
}

/// Tile t's first point (la_kernels.cu's Tiles::origin in the plain order: the small kernels
/// never take a grouped walk, see tile_walk.hpp).
struct Origin {
  unsigned x, y, z;
};
SLUICE_HD Origin tile_origin(const Geometry& g, unsigned t) {
  const unsigned rest = t / g.tx;
  const unsigned z = rest / g.ty;
  return {(t - rest * g.tx) * g.width, (rest - z * g.ty) * g.height, z * g.depth};
}

/// A grid point; i < 0: none.
struct Point {
  int i = -1, ix = 0, iy = 0, iz = 0;
};

/// The r-th point of thread T (0..255) of the step block that takes the tile at `o`: as
/// cg_direction_tiles (depth 1: threads of (width, 256 / width), rows along y) and
/// cg_direction_columns (flat tiles of depth 2: 256 consecutive points of a plane, rows along z)
/// take them.
SLUICE_HD Point tile_point(const Geometry& g, const Origin& o, int T, int r) {
  Point q;
  if (g.depth == 1) {
    const int w = static_cast<int>(g.width);
    const bool shift = g.wshift >= 0;
    const int ix = static_cast<int>(o.x) + (shift ? T & (w - 1) : T % w);
    const int iy = static_cast<int>(o.y) + (shift ? T >> g.wshift : T / w) +
                   r * (shift ? kStepThreads >> g.wshift : kStepThreads / w);
    if (ix < g.nx && iy < g.ny) {
      q.ix = ix, q.iy = iy, q.iz = static_cast<int>(o.z);
      q.i = ix + g.nx * (iy + g.ny * q.iz);
    }
    return q;
  }
  const int sz = g.nx * g.ny;
  const int in_plane = static_cast<int>(o.x) + T;
  const int iz = static_cast<int>(o.z) + r;
  if (in_plane < sz && iz < g.nz) {
    q.iy = in_plane / g.nx;
    q.ix = in_plane - q.iy * g.nx;
    q.iz = iz;
    q.i = in_plane + sz * iz;
  }
  return q;
}

}  // namespace sluice::detail::cuda::small_steps
