#pragma once
// CG's 3D direction product as a z walk (2.5D blocking): each block takes an x-y tile through a
// chunk of planes, keeping three planes of the new direction on chip.
// Part of one translation unit: src/la/cuda/la_kernels.cu includes it (and says how the
// kernels work).

#include "la/cuda/kernels.cuh"
#include "la/cuda/zwalk.hpp"

namespace sluice::detail::cuda {
namespace {

// ---- CG's direction product: the z walk ---------------------------------------------------------

// Resident blocks per multiprocessor the z walk is compiled for: 4 (64 registers), as
// cg_direction_kernel; its 15 KB of shared memory allows more.
constexpr int kZwalkMinBlocks = 4;
constexpr int kZwalkPitch = kZwalkWidth + 2;                   // a shared plane's x line
constexpr int kZwalkPlane = kZwalkPitch * (kZwalkHeight + 2);  // a shared plane: tile + halo
constexpr int kZwalkLines = kStencilThreads / kZwalkWidth;     // the block's y threads
constexpr int kZwalkRows = kZwalkHeight / kZwalkLines;         // points a thread takes a plane
constexpr int kZwalkLoads = (kZwalkPlane + kStencilThreads - 1) / kStencilThreads;  // per thread
static_assert(kZwalkRows * kZwalkLines == static_cast<int>(kZwalkHeight));

/// CG's direction and product (p = z + b p; w = A p; p'w, z = xs x) over the items first,
/// first + stride, ... of `walk`: the thread's share of p'w. Per item the block walks up its
/// chunk's planes; each new p value of the tile and its one-point halo (the plane below and
/// above the chunk too) is formed once, from one load of x and p each, into one of three shared
/// planes (below, current, above; the plane two above is loaded into registers while the
/// current one is computed). The halo and the chunks' end planes are read by the tiles beside
/// them too, mostly from L2. Every point gets the same terms in the same order as
/// m::stencil_neighbors<K> and cg_direction_columns (so p and w carry the same bits as the plain
/// kernel's; the dot's order differs: each thread adds its points of a walk).
template <LaStencilKind K>
__device__ double cg_zwalk_items(const LaMatvecArgs& mv, const ZWalk& walk, double bscale,
                                 unsigned first, unsigned stride) {
  __shared__ double planes[3][kZwalkPlane];
  const LaStencil& s = mv.A.stencil;
  const int nx = static_cast<int>(s.nx), ny = static_cast<int>(s.ny), nz = static_cast<int>(s.nz);
  const int sz = nx * ny;  // zwalk_picks: below 2^31
  const double rc = mv.right.c, xs = mv.x_scale;
  const double* z = mv.x;
  const double* p = mv.x2;
  double* p_new = mv.x_out;
  double* w = mv.y;
  // The grid's z ends may be open (LaStencil): the planes beyond them are neighbours too.
  const int zlo = s.open_lo ? -1 : 0, zhi = s.open_hi ? nz + 1 : nz;
  const int t = static_cast<int>(threadIdx.x + threadIdx.y * kZwalkWidth);
  // The shared places this thread loads: e = t + 256 j, line e / pitch, column e % pitch.
  int hx[kZwalkLoads], hy[kZwalkLoads];
  for (int j = 0; j < kZwalkLoads; ++j) {
    const int e = t + j * kStencilThreads;
    hy[j] = e / kZwalkPitch;
    hx[j] = e - hy[j] * kZwalkPitch;
  }
  double acc = 0;
  for (unsigned it = first; it < walk.count; it += stride) {
    const auto item = walk.item(it);
    const int x0 = static_cast<int>(item.x0), y0 = static_cast<int>(item.y0);
    const int z0 = static_cast<int>(item.z0), z1 = static_cast<int>(item.z1);
    // The thread's loads in a plane: -1 outside the grid (or past the shared plane).
    int off[kZwalkLoads];
    for (int j = 0; j < kZwalkLoads; ++j) {
      const int gx = x0 + hx[j] - 1, gy = y0 + hy[j] - 1;
      const bool in =
          t + j * kStencilThreads < kZwalkPlane && gx >= 0 && gx < nx && gy >= 0 && gy < ny;
      off[j] = in ? gx + gy * nx : -1;
    }
    double rz[kZwalkLoads], rp[kZwalkLoads];
    const auto load = [&](int k) {
      if (k < zlo || k >= zhi) return;
      const std::ptrdiff_t plane = static_cast<std::ptrdiff_t>(k) * sz;
      for (int j = 0; j < kZwalkLoads; ++j) {
        if (off[j] >= 0) rz[j] = z[plane + off[j]], rp[j] = p[plane + off[j]];
      }
    };
    const auto store = [&](int k, int to) {
      if (k < zlo || k >= zhi) return;  // a missing plane: its terms are never added
      for (int j = 0; j < kZwalkLoads; ++j) {
        if (off[j] >= 0) planes[to][t + j * kStencilThreads] = xs * rz[j] + bscale * rp[j];
      }
    };
    // The shared planes of k - 1, k and k + 1 (indices, so that their loads stay shared ones).
    int below = 0, here = 1, above = 2;
    load(z0 - 1);
    store(z0 - 1, below);
    load(z0);
    store(z0, here);
    load(z0 + 1);
    for (int k = z0; k < z1; ++k) {
      store(k + 1, above);
      __syncthreads();
      if (k + 2 <= z1) load(k + 2);  // in flight while plane k is computed
      double v[kZwalkRows], c[kZwalkRows];
      for (int r = 0; r < kZwalkRows; ++r) {
        const int lx = static_cast<int>(threadIdx.x),
                  ly = static_cast<int>(threadIdx.y) + r * kZwalkLines;
        const int ix = x0 + lx, iy = y0 + ly;
        if (ix >= nx || iy >= ny) continue;
        const int at = (ly + 1) * kZwalkPitch + lx + 1;
        c[r] = planes[here][at];
        double a = 0;
        if constexpr (K == LaStencilKind::d3p7) {
          if (k > zlo) a += planes[below][at];
          if (iy > 0) a += planes[here][at - kZwalkPitch];
          if (ix > 0) a += planes[here][at - 1];
          if (ix + 1 < nx) a += planes[here][at + 1];
          if (iy + 1 < ny) a += planes[here][at + kZwalkPitch];
          if (k + 1 < zhi) a += planes[above][at];
        } else {
          static_assert(K == LaStencilKind::d3p27);
          const int by_dz[3] = {below, here, above};
          for (int dz = -1; dz <= 1; ++dz) {
            if (k + dz < zlo || k + dz >= zhi) continue;
            for (int dy = -1; dy <= 1; ++dy) {
              if (iy + dy < 0 || iy + dy >= ny) continue;
              const int line = at + dy * kZwalkPitch;
              const double* pl = planes[by_dz[dz + 1]];
              if (ix > 0) a += pl[line - 1];
              if (dz != 0 || dy != 0) a += pl[line];
              if (ix + 1 < nx) a += pl[line + 1];
            }
          }
        }
        v[r] = rc * (s.neighbor * a + s.center * c[r]);
      }
      for (int r = 0; r < kZwalkRows; ++r) {
        const int ix = x0 + static_cast<int>(threadIdx.x);
        const int iy = y0 + static_cast<int>(threadIdx.y) + r * kZwalkLines;
        if (ix >= nx || iy >= ny) continue;
        const std::size_t i =
            static_cast<std::size_t>(k) * sz + ix + static_cast<std::size_t>(iy) * nx;
        p_new[i] = c[r];
        w[i] = v[r];
        acc += v[r] * c[r];
      }
      __syncthreads();  // plane `below` is free for the plane two above
      const int free = below;
      below = here;
      here = above;
      above = free;
    }
  }
  return acc;
}

/// CG's direction product as a z walk (see cg_zwalk_items): the same sums' reduction as
/// cg_direction_kernel, over this kernel's own blocks.
template <LaStencilKind K>
__global__ void __launch_bounds__(kStencilThreads, kZwalkMinBlocks)
    cg_zwalk_kernel(LaMatvecArgs mv, Reducer red, ZWalk walk) {
  stream_order_prologue();
  const double bscale = m::value(mv.x2_scale);
  if (!logic::guard_runs(mv.sums.state, false)) return;
  const double mine[1] = {cg_zwalk_items<K>(mv, walk, bscale, blockIdx.x, gridDim.x)};
  reduce_and_finish<1>(m::Combine::sum, mine, red, blockIdx.x, gridDim.x, FinishSums<1>{mv.sums});
}

}  // namespace
}  // namespace sluice::detail::cuda
