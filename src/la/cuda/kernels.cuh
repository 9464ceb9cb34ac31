#pragma once
// The element-wise, reduction, fused-step and stencil kernels, launched with
// programmatic dependent launch.
// Part of one translation unit: src/la/cuda/la_kernels.cu includes it (and says how the
// kernels work).

#include "la/cuda/reduce.cuh"

namespace sluice::detail::cuda {
namespace {

// ---- programmatic dependent launch --------------------------------------------------------------

/// The first statement of every kernel here. The kernels are launched with programmatic stream
/// serialization (sm_90+): a kernel may be scheduled while the one before it in the stream is
/// still finishing (its last block running the solver logic), and waits here, before touching
/// memory, until that one completed and its writes are visible. Each kernel allows its
/// successor's launch at once: the launch latency overlaps the predecessor's tail, and the order
/// of memory effects is exactly the stream's.
__device__ __forceinline__ void stream_order_prologue() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ---- kernels -----------------------------------------------------------------------------------

/// Pulls element i of `a` into L1. A guarded kernel issues these for its first elements while
/// the guard's load of the solver state is in flight: its element loads wait for the guard, and
/// would otherwise start one memory round trip later (most of a kernel's time at sizes that
/// stay in L2).
__device__ __forceinline__ void prefetch(const double* a, std::size_t i) {
  if (a != nullptr) asm volatile("prefetch.global.L1 [%0];" ::"l"(a + i));
}

/// The inputs of fused operation Op at element i (see m::fused_elem).
template <LaFusedOp Op>
__device__ void prefetch_inputs(const LaFusedArgs& f, std::size_t i) {
  using O = LaFusedOp;
  if (i >= f.n) return;
  prefetch(f.pc.v, i);
  switch (Op) {
    case O::rhs_norm:
      prefetch(f.b, i);
      break;
    case O::cg_init:
      prefetch(f.b != nullptr ? f.b : f.r, i);
      break;
    case O::cg_update:
      prefetch(f.x, i), prefetch(f.p, i), prefetch(f.r, i), prefetch(f.w, i);
      break;
    case O::tf_init:
      prefetch(f.r, i);
      break;
    case O::cg1_update:
      prefetch(f.r, i), prefetch(f.p, i), prefetch(f.v, i), prefetch(f.w, i), prefetch(f.x, i);
      break;
    case O::tf_qt:
      prefetch(f.u, i), prefetch(f.v, i);
      break;
    case O::tf_dx:
      prefetch(f.u, i), prefetch(f.d, i), prefetch(f.x, i), prefetch(f.q, i);
      prefetch(f.r, i), prefetch(f.rp, i);
      break;
    case O::tf_uqp:
      prefetch(f.r, i), prefetch(f.q, i), prefetch(f.p, i);
      break;
    case O::unwind:
      prefetch(f.x, i), prefetch(f.t, i);
      break;
  }
}

__global__ void __launch_bounds__(kBlock) vec_kernel(LaVecArgs a) {
  stream_order_prologue();
  const double alpha = m::value(a.alpha);
  const double beta = m::value(a.beta);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride) {
    m::vec_elem(a, alpha, beta, i);
  }
}

__global__ void __launch_bounds__(kBlock) reduce_kernel(LaReduceArgs a, Reducer red) {
  stream_order_prologue();
  const auto c = m::combine_of(a.op);
  double acc[1] = {m::identity_of(c)};
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride) {
    acc[0] = m::combine(c, acc[0], m::reduce_elem(a, i));
  }
  reduce_and_finish<1>(c, acc, red, blockIdx.x, gridDim.x, FinishResult{a});
}

/// The fused kernels take their blocks' chunks of 256 elements from the end of the vectors
/// back, while stencil products go forwards: what a product wrote last (its outputs' ends) is
/// what the next step reads first, and some of it is still in L2 (measured on an H200: 2 to 4%
/// per CG iteration at 1e7 to 3e7 nonzeros).
template <LaFusedOp Op>
__global__ void __launch_bounds__(kBlock, kFusedMinBlocks)
    fused_kernel(LaFusedArgs f, Reducer red) {
  stream_order_prologue();
  constexpr int NS = m::fused_sums(Op);
  double s[4];
  for (int k = 0; k < 4; ++k) s[k] = m::value(f.s[k]);  // loads in flight with the guard's
  const LaKspState* st = f.sums.state;
  const std::size_t chunks = (f.n + blockDim.x - 1) / blockDim.x;
  if (st != nullptr && blockIdx.x < chunks) {
    prefetch_inputs<Op>(f, (chunks - 1 - blockIdx.x) * blockDim.x + threadIdx.x);
  }
  if (!logic::guard_runs(st, Op == LaFusedOp::tf_dx)) return;
  const int steps = logic::tf_steps(st, f.steps);
  double acc[m::kMaxSums] = {0, 0, 0};
  for (std::size_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const std::size_t i = (chunks - 1 - c) * blockDim.x + threadIdx.x;
    if (i < f.n) m::fused_elem<Op>(f, s, steps, i, acc);
  }
  if constexpr (NS > 0) {
    double mine[NS];
    for (int k = 0; k < NS; ++k) mine[k] = acc[k];
    reduce_and_finish<NS>(m::Combine::sum, mine, red, blockIdx.x, gridDim.x,
                          FinishSums<NS>{f.sums});
  }
}

/// A stencil product's tiles: width x height points of `depth` z planes each; a layer holds the
/// tx x ty tiles of one plane (or two), numbered x fastest, then y. A block takes tiles
/// blockIdx.x, blockIdx.x + gridDim.x, ... in the order of `walk` (TileWalk: layer by layer, or
/// on large planes a group of a layer's tiles through every layer before the next group): the
/// blocks resident at one time work on neighbouring tiles, so a point's y and z neighbours, read
/// by several tiles, come from L1 or L2 and every point is read from memory about once. A thread
/// takes kRowsPerThread points of its tile: along y (depth 1) or along z (depth kRowsPerThread,
/// CG's 3D 7-point direction product: see cg_direction_columns). Tiles of depth kRowsPerThread
/// are flat: kStencilThreads consecutive points of a plane (width kStencilThreads, height 1, x
/// its offset in the plane), so no thread idles past the end of an x line.
struct Tiles {
  unsigned width = 32;      // points along x (the block's x threads)
  unsigned height = 16;     // points along y (the block's y threads, x kRowsPerThread at depth 1)
  unsigned depth = 1;       // z planes: 1 or kRowsPerThread (flat)
  unsigned tx = 1, ty = 1;  // tiles along x (flat: per plane) and y
  unsigned count = 1;       // tx * ty * (nz / depth, rounded up), below 2^31
  FastDiv by_tx;            // division by tx
  FastDiv by_nx;            // flat: division by the stencil's nx
  TileWalk walk;            // the order of the tiles

  /// Tile t's first point: x (flat: the offset in the plane), y and the plane.
  struct Origin {
    unsigned x, y, z;
  };
  __device__ Origin origin(unsigned t) const {
    unsigned q = 0, l = 0;
    walk.place(t, q, l);
    const unsigned y = by_tx(q);
    return {(q - y * tx) * width, y * height, l * depth};
  }
  /// The index of the point a thread takes r-th in the tile at `o` (an nx x ny x nz grid), or
  /// `none` past the grid's end. I: the index type (32-bit where the grid allows).
  template <class I>
  __device__ I point(const Origin& o, int r, I nx, I ny, I nz, I none) const {
    if (depth == 1) {
      const I ix = o.x + threadIdx.x, iy = o.y + threadIdx.y + r * blockDim.y;
      return ix < nx && iy < ny ? ix + nx * (iy + ny * o.z) : none;
    }
    const I in_plane = o.x + threadIdx.x, iz = o.z + r;
    return in_plane < nx * ny && iz < nz ? in_plane + nx * ny * iz : none;
  }
};

/// The stencil product's inputs z and p at the thread's points of tile t (see prefetch). I: the
/// index type (32-bit where the grid allows it: cg_block_kernel spills with 64-bit offsets).
template <class I>
__device__ void prefetch_tile(const LaStencil& s, const Tiles& tiles, unsigned t, const double* z,
                              const double* p) {
  if (t >= tiles.count) return;
  const auto o = tiles.origin(t);
  const auto none = static_cast<I>(-1);
  for (int r = 0; r < kRowsPerThread; ++r) {
    const I i = tiles.point<I>(o, r, static_cast<I>(s.nx), static_cast<I>(s.ny),
                               static_cast<I>(s.nz), none);
    if (i != none) {
      prefetch(z, static_cast<std::size_t>(i));
      prefetch(p, static_cast<std::size_t>(i));
    }
  }
}

/// A guarded stencil product's prefetch (see prefetch): the inputs at the thread's points of
/// its block's first tile.
__device__ void prefetch_first_tile(const LaMatvecArgs& mv, const Tiles& tiles) {
  if (mv.sums.state != nullptr)
    prefetch_tile<std::int64_t>(mv.A.stencil, tiles, blockIdx.x, mv.x, mv.x2);
}

/// A product's input as the stencil kernel `In` reads it.
template <class In>
__device__ In input_as(const LaMatvecArgs& mv) {
  if constexpr (std::is_same_v<In, m::MatvecInput>) {
    return m::input_of(mv);
  } else {
    return {mv.x, mv.x2, mv.x2 != nullptr ? m::value(mv.x2_scale) : 0.0, mv.right.c, mv.x_scale};
  }
}

template <LaStencilKind K, int NS, class In>
__global__ void __launch_bounds__(kStencilThreads, kMinBlocks)
    stencil_kernel(LaMatvecArgs mv, Reducer red, Tiles tiles) {
  stream_order_prologue();
  const double a = m::value(mv.a);
  const In in = input_as<In>(mv);
  const LaStencil& s = mv.A.stencil;
  prefetch_first_tile(mv, tiles);
  if (!logic::guard_runs(mv.sums.state, false)) return;
  double acc = 0;
  for (unsigned t = blockIdx.x; t < tiles.count; t += gridDim.x) {
    const auto o = tiles.origin(t);
    const std::int64_t ix = o.x + threadIdx.x;
    const std::int64_t iy0 = o.y + threadIdx.y;
    const std::int64_t iz = o.z;
    // kRowsPerThread rows of the tile per thread, their products first (loads only) and then
    // their epilogues (stores): the loads of all of them are in flight at once.
    double v[kRowsPerThread];
    for (int r = 0; r < kRowsPerThread; ++r) {
      const std::int64_t iy = iy0 + r * blockDim.y;
      if (ix < s.nx && iy < s.ny) {
        v[r] = m::stencil_row<K>(s, in, ix, iy, iz, ix + s.nx * (iy + s.ny * iz));
      }
    }
    for (int r = 0; r < kRowsPerThread; ++r) {
      const std::int64_t iy = iy0 + r * blockDim.y;
      if (ix < s.nx && iy < s.ny) {
        acc +=
            m::finish_row(mv, in, v[r], a, static_cast<std::size_t>(ix + s.nx * (iy + s.ny * iz)));
      }
    }
  }
  if constexpr (NS > 0) {
    const double mine[1] = {acc};
    reduce_and_finish<1>(m::Combine::sum, mine, red, blockIdx.x, gridDim.x, FinishSums<1>{mv.sums});
  }
}

/// cg_direction_tiles for the 3D 7-point stencil on tiles of depth kRowsPerThread: a thread
/// takes kRowsPerThread points of one z column, so each point's z neighbours are its column
/// neighbours' inputs, formed once in registers, and only the column's two ends are read from
/// the planes beside the tile (at depth 1 every point reads both neighbour planes, which come
/// from L2: three times the product's data through L2). The same terms in the same order as
/// m::stencil_neighbors<d3p7>. The tiles are flat (see Tiles): a thread finds its x and y by
/// one division of its offset in the plane.
__device__ double cg_direction_columns(const LaMatvecArgs& mv, const Tiles& tiles, double bscale,
                                       const double* p_old, double* p_new, unsigned first,
                                       unsigned stride) {
  constexpr int kR = kRowsPerThread;
  const LaStencil& s = mv.A.stencil;
  const int nx = static_cast<int>(s.nx), ny = static_cast<int>(s.ny), nz = static_cast<int>(s.nz);
  // 32-bit offsets from the column's first point: tiles_for keeps (kR + 1) sz below 2^31.
  const int sy = nx, sz = nx * ny;
  const double rc = mv.right.c, xs = mv.x_scale;
  double acc = 0;
  for (unsigned t = first; t < tiles.count; t += stride) {
    const auto o = tiles.origin(t);
    const int in_plane = static_cast<int>(o.x + threadIdx.x);  // flat tiles
    if (in_plane >= sz) continue;
    const int iy = static_cast<int>(tiles.by_nx(in_plane)), ix = in_plane - iy * nx;
    const int iz0 = static_cast<int>(o.z);
    const int rows = min(kR, nz - iz0);
    const std::size_t at = static_cast<std::size_t>(iz0) * sz + ix + iy * sy;
    const double* z = mv.x + at;
    const double* p = p_old + at;
    const auto in = [&](int j) { return xs * z[j] + bscale * p[j]; };
    // The column's inputs, with the planes below and above it: c[r + 1] is point r's. The grid's
    // z ends may be open (LaStencil): the planes beyond them are neighbours too.
    const int zlo = s.open_lo ? -1 : 0, zhi = s.open_hi ? nz + 1 : nz;
    double c[kR + 2];
    c[0] = iz0 - 1 >= zlo ? in(-sz) : 0.0;
    for (int r = 0; r < kR; ++r) c[r + 1] = iz0 + r < zhi ? in(r * sz) : 0.0;
    c[kR + 1] = iz0 + kR < zhi ? in(kR * sz) : 0.0;
    double v[kR];
    for (int r = 0; r < kR; ++r) {
      if (r >= rows) break;
      const int j = r * sz;
      double a = 0;
      if (iz0 + r > zlo) a += c[r];
      if (iy > 0) a += in(j - sy);
      if (ix > 0) a += in(j - 1);
      if (ix + 1 < nx) a += in(j + 1);
      if (iy + 1 < ny) a += in(j + sy);
      if (iz0 + r + 1 < zhi) a += c[r + 2];
      v[r] = rc * (s.neighbor * a + s.center * c[r + 1]);
    }
    for (int r = 0; r < kR; ++r) {
      if (r >= rows) break;
      const std::size_t i = at + r * sz;
      p_new[i] = c[r + 1];
      mv.y[i] = v[r];
      acc += v[r] * c[r + 1];
    }
  }
  return acc;
}

/// CG's direction and product over the tiles first, first + stride, ... (KSPSolve_CG's
/// p = z + b p, w = A p, p'w; z = xs x): the thread's share of p'w. The input is formed once per
/// point and reused for the centre term, the stored direction and the dot; offsets are 32-bit
/// from the tile's plane. It computes exactly what stencil_kernel does for this form (same
/// terms, same order).
template <LaStencilKind K>
__device__ double cg_direction_tiles(const LaMatvecArgs& mv, const Tiles& tiles, double bscale,
                                     const double* p_old, double* p_new, unsigned first,
                                     unsigned stride) {
  if constexpr (K == LaStencilKind::d3p7) {
    if (tiles.depth != 1)
      return cg_direction_columns(mv, tiles, bscale, p_old, p_new, first, stride);
  }
  const LaStencil& s = mv.A.stencil;
  const int nx = static_cast<int>(s.nx), ny = static_cast<int>(s.ny);
  const int sy = nx, sz = nx * ny;
  const double rc = mv.right.c, xs = mv.x_scale;
  double acc = 0;
  for (unsigned t = first; t < tiles.count; t += stride) {
    const auto o = tiles.origin(t);
    const std::size_t plane = std::size_t{o.z} * sz;
    const double* z = mv.x + plane;
    const double* p = p_old + plane;
    const auto in = [&](int j) { return xs * z[j] + bscale * p[j]; };
    const int ix = static_cast<int>(o.x + threadIdx.x);
    const int iz = static_cast<int>(o.z);
    double v[kRowsPerThread], c[kRowsPerThread];
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int iy = static_cast<int>(o.y + threadIdx.y + r * blockDim.y);
      if (ix < nx && iy < ny) {
        const int i = ix + iy * sy;
        c[r] = in(i);
        v[r] = rc * (s.neighbor * m::stencil_neighbors<K>(s, in, ix, iy, iz, i, sy, sz) +
                     s.center * c[r]);
      }
    }
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int iy = static_cast<int>(o.y + threadIdx.y + r * blockDim.y);
      if (ix < nx && iy < ny) {
        const int i = ix + iy * sy;
        p_new[plane + i] = c[r];
        mv.y[plane + i] = v[r];
        acc += v[r] * c[r];
      }
    }
  }
  return acc;
}

/// CG's direction and product in one pass: the generic stencil kernel's work for this one form
/// (store_dot into the stored direction), in about half its instructions, with the same
/// reduction shape.
template <LaStencilKind K>
__global__ void __launch_bounds__(kStencilThreads, kCgDirectionMinBlocks)
    cg_direction_kernel(LaMatvecArgs mv, Reducer red, Tiles tiles) {
  stream_order_prologue();
  const double bscale = m::value(mv.x2_scale);
  prefetch_first_tile(mv, tiles);
  if (!logic::guard_runs(mv.sums.state, false)) return;
  const double mine[1] = {
      cg_direction_tiles<K>(mv, tiles, bscale, mv.x2, mv.x_out, blockIdx.x, gridDim.x)};
  reduce_and_finish<1>(m::Combine::sum, mine, red, blockIdx.x, gridDim.x, FinishSums<1>{mv.sums});
}

}  // namespace
}  // namespace sluice::detail::cuda
