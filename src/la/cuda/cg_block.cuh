#pragma once
// Async CG blocks: many iterations in one cooperative launch.
// Part of one translation unit: src/la/cuda/la_kernels.cu includes it (and says how the
// kernels work).

#include "la/cuda/kernels.cuh"

namespace sluice::detail::cuda {
namespace {

// ---- CG blocks: many iterations in one cooperative launch ---------------------------------------

/// The launch shapes a CG block kernel reproduces: those of the two kernels an iteration runs
/// when launched one by one (sync mode), so that its partial sums, and so its iterates, are
/// bit-identical to theirs.
struct CgBlockShape {
  Tiles tiles;
  unsigned dir_blocks = 1;  // cg_direction_kernel's grid
  unsigned upd_blocks = 1;  // fused_kernel<cg_update>'s grid
  std::size_t chunks = 0;   // the update's chunks of kBlock elements
};

/// What cg_small_block reproduces of a CG block's shape.
CgSmallSteps small_steps(const CgBlockShape& shape, unsigned init_blocks) {
  CgSmallSteps s;
  s.init_blocks = init_blocks;
  s.tile_width = shape.tiles.width;
  s.tile_height = shape.tiles.height;
  s.tile_depth = shape.tiles.depth;
  s.tiles_x = shape.tiles.tx;
  s.tiles_y = shape.tiles.ty;
  s.tiles = shape.tiles.count;
  s.dir_blocks = shape.dir_blocks;
  s.upd_blocks = shape.upd_blocks;
  s.chunks = shape.chunks;
  return s;
}

/// Runs `fin` on the block's copy of the state with the sums of a step whose `blocks` partials
/// (NS each) are complete; false once the solve stopped (the same in every block).
template <int NS>
__device__ bool finish_step(const double* partials, unsigned blocks, LaFinalize fin, LaKspState& st,
                            int t, int threads) {
  double total[NS];
  // Every block reads the same partials: through L1, the four blocks of a multiprocessor send
  // L2 a quarter of the requests for these few hot lines. On an H200 (sluice_bench_grid_barrier)
  // a step end with 528 partials took 2.29 against 2.58 us, with 2112 2.69 against 3.25; a CG
  // iteration at 113^3 34.4 against 35.5 us, at 2e5 rows 9.85 against 11.4.
  combine_partials<NS, true>(m::Combine::sum, partials, static_cast<int>(blocks), total, t,
                             threads);
  if (t == 0) {
    double s[m::kMaxSums] = {0, 0, 0};
    for (int k = 0; k < NS; ++k) s[k] = total[k];
    logic::finalize(fin, st, s);
  }
  __syncthreads();
  return st.stop == 0;
}

/// The update's work of the blocks v0 and v1 (if below the update's grid) of
/// fused_kernel<cg_update> launched alone: x += a p, r -= a w, z = c r on their chunks, with
/// each block's partials of the norm and z'r. The two blocks' loads are issued together.
__device__ void cg_update_pair(const LaFusedArgs& f, const double* p, double a, unsigned v0,
                               unsigned v1, const CgBlockShape& shape, double* partials, int t,
                               int threads) {
  const std::size_t chunks = shape.chunks, blocks = shape.upd_blocks;
  const bool two = v1 < blocks;
  const double pc = f.pc.c;
  double acc[2][2] = {{0, 0}, {0, 0}};
  for (std::size_t c0 = v0, c1 = v1; c0 < chunks; c0 += blocks, c1 += blocks) {
    const std::size_t i[2] = {(chunks - 1 - c0) * kBlock + t,
                              c1 < chunks ? (chunks - 1 - c1) * kBlock + t : f.n};
    const bool in[2] = {i[0] < f.n, two && i[1] < f.n};
    double x[2], pp[2], r[2], w[2];
    for (int k = 0; k < 2; ++k) {
      if (in[k]) x[k] = f.x[i[k]], pp[k] = p[i[k]], r[k] = f.r[i[k]], w[k] = f.w[i[k]];
    }
    for (int k = 0; k < 2; ++k) {
      if (!in[k]) continue;
      const auto u = m::cg_update_at(x[k], pp[k], r[k], w[k], a, pc, f.norm_type, acc[k]);
      f.x[i[k]] = u.x;
      f.r[i[k]] = u.r;
    }
  }
  const double mine[4] = {acc[0][0], acc[0][1], acc[1][0], acc[1][1]};
  double sums[4];
  block_combine<4>(m::Combine::sum, mine, sums, t);
  if (t == 0) {
    partials[2 * v0] = sums[0];
    partials[2 * v0 + 1] = sums[1];
    if (two) {
      partials[2 * v1] = sums[2];
      partials[2 * v1 + 1] = sums[3];
    }
  }
}

/// Where a step of cg_block_kernel starts, the loads of its first round need no sum of the step
/// before: they are pulled into L1 (see prefetch) between the barrier and the partials' sum, so
/// that latency overlaps. 32-bit offsets: cg_blocks_for keeps the rows below 2^31. The update's
/// first chunks of blocks v0 and v0 + stride (see cg_update_pair).
__device__ void prefetch_update_round(const LaFusedArgs& f, const double* p,
                                      const CgBlockShape& shape, unsigned v0, unsigned stride,
                                      int t) {
  for (unsigned v = v0, k = 0; k < 2 && v < shape.upd_blocks; v += stride, ++k) {
    const unsigned i = (static_cast<unsigned>(shape.chunks) - 1 - v) * kBlock + t;
    if (v >= shape.chunks || i >= f.n) continue;
    prefetch(f.x, i);
    prefetch(p, i);
    prefetch(f.r, i);
    prefetch(f.w, i);
  }
}

/// Stores the block's copy of the state (`words`) to `dst` unless it is null, a word per thread.
__device__ void store_state(LaKspState* dst, const unsigned long long* words, int t, int threads) {
  if (dst == nullptr) return;
  constexpr int kWords = sizeof(LaKspState) / sizeof(unsigned long long);
  auto* to = reinterpret_cast<unsigned long long*>(dst);
  for (int k = t; k < kWords; k += threads) to[k] = words[k];
}

/// `args.iterations` CG iterations of a matrix-free operator with a constant preconditioner in
/// one cooperative launch (async mode): each iteration's direction product and update, with a
/// grid-wide barrier after each where the kernels launched one by one would end. Every block
/// then adds the partials in block order and runs the solver logic on its own shared-memory copy
/// of the state (the same arithmetic, so the same decisions in every block); block 0 alone
/// writes the history and, at the end, the state. The work of a step is split exactly as its
/// own kernel splits it (see CgBlockShape): the sums, and so the iterates, are bit-identical to
/// sync mode's. What it saves: per step, a kernel's launch and drain and the serial tail of its
/// last block, a few microseconds that dominate an iteration up to about 1e7 nonzeros.
template <LaStencilKind K>
__global__ void __launch_bounds__(kStencilThreads, cg_block_min_blocks(K))
    cg_block_kernel(LaCgBlockArgs args, double* partials, CgBlockShape shape) {
  namespace cg = cooperative_groups;
  const cg::grid_group grid = cg::this_grid();
  const int t = threadIdx.x + threadIdx.y * blockDim.x;
  const int threads = blockDim.x * blockDim.y;
  constexpr int kWords = sizeof(LaKspState) / sizeof(unsigned long long);
  unsigned long long* words = state_words();
  auto* global = reinterpret_cast<unsigned long long*>(args.direction.sums.state);
  for (int k = t; k < kWords; k += threads) words[k] = global[k];
  __syncthreads();
  LaKspState& st = *reinterpret_cast<LaKspState*>(words);
  if (st.stop != 0) {  // every block read the same state: none passes a barrier
    if (blockIdx.x == 0) {
      store_state(args.mirror, words, t, threads);
      if (t == 0 && args.running != nullptr) *args.running = 0;
    }
    return;
  }
  if (blockIdx.x != 0 && t == 0) st.hist_cap = 0;  // block 0 alone stores the history
  const LaMatvecArgs& mv = args.direction;
  double* part_dir = partials;
  double* part_upd = partials + kMaxBlocks;
  const unsigned blocks = gridDim.x;
  double* p_old = args.p[0];
  double* p_new = args.p[1];
  for (int k = 0; k < args.iterations; ++k) {
    const double b = st.b;
    for (unsigned v = blockIdx.x; v < shape.dir_blocks; v += blocks) {
      const double mine[1] = {
          cg_direction_tiles<K>(mv, shape.tiles, b, p_old, p_new, v, shape.dir_blocks)};
      double sum[1];
      block_combine<1>(m::Combine::sum, mine, sum, t);
      if (t == 0) part_dir[v] = sum[0];
    }
    grid.sync();
    // Measured on an H200 (with flat tiles, against neither): 3D 7-point at 113^3 35.5 against
    // 37.5 us per iteration, at 163^3 96 against 106. In 2D no faster (up to 3% slower at 2e5
    // rows), so 2D goes without.
    if constexpr (K == LaStencilKind::d3p7) {
      prefetch_update_round(args.update, p_new, shape, blockIdx.x, blocks, t);
    }
    if (!finish_step<1>(part_dir, shape.dir_blocks, LaFinalize::cg_dpi, st, t, threads)) break;
    const double a = st.a;
    for (unsigned v = blockIdx.x; v < shape.upd_blocks; v += 2 * blocks) {
      cg_update_pair(args.update, p_new, a, v, v + blocks, shape, part_upd, t, threads);
    }
    grid.sync();
    if constexpr (K == LaStencilKind::d3p7) {
      // The next product's first tile; p_new is its p_old.
      prefetch_tile<unsigned>(mv.A.stencil, shape.tiles, blockIdx.x, mv.x, p_new);
    }
    if (!finish_step<2>(part_upd, shape.upd_blocks, LaFinalize::cg_iter, st, t, threads)) break;
    double* const swap = p_old;
    p_old = p_new;
    p_new = swap;
  }
  if (blockIdx.x == 0) {
    store_state(args.direction.sums.state, words, t, threads);
    store_state(args.mirror, words, t, threads);  // pinned host memory, or null
    if (t == 0 && args.running != nullptr) *args.running = st.stop == 0 ? 1 : 0;
  }
}

/// *dst = value: the state travels as the kernel's argument, not as a copy from host memory
/// (an H200 ran the upload, a solve's first kernels and the final read 3 to 4 us sooner).
__global__ void set_state_kernel(LaKspState value, LaKspState* dst) {
  stream_order_prologue();
  store_state(dst, reinterpret_cast<const unsigned long long*>(&value),
              static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
}

__global__ void running_kernel(const LaKspState* state, std::int32_t* flag, LaKspState* mirror) {
  stream_order_prologue();
  if (threadIdx.x == 0) *flag = state->stop == 0 ? 1 : 0;
  store_state(mirror, reinterpret_cast<const unsigned long long*>(state),
              static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
}

/// The epilogue of a CSR product whose rows `v` cuSPARSE computed.
template <int NS>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    csr_epilogue_kernel(LaMatvecArgs mv, const double* v, Reducer red) {
  stream_order_prologue();
  if (mv.sums.state != nullptr) {  // see prefetch
    const std::size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < static_cast<std::size_t>(mv.A.csr.rows)) {
      prefetch(v, i);
      prefetch(mv.y, i);
      prefetch(mv.z, i);
    }
  }
  if (!logic::guard_runs(mv.sums.state, false)) return;
  const double a = m::value(mv.a);
  const auto n = static_cast<std::size_t>(mv.A.csr.rows);
  double acc = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    acc += m::epilogue(mv, v[i], a, i);
  }
  if constexpr (NS > 0) {
    const double mine[1] = {acc};
    reduce_and_finish<1>(m::Combine::sum, mine, red, blockIdx.x, gridDim.x, FinishSums<1>{mv.sums});
  }
}

/// The input of a CSR product that cuSPARSE cannot form itself: out = right .* (x + s x2), and
/// x_out = x + s x2 where asked.
__global__ void __launch_bounds__(kBlock)
    input_kernel(LaMatvecArgs mv, double* out, std::size_t n) {
  stream_order_prologue();
  if (!logic::guard_runs(mv.sums.state, false)) return;
  const auto in = m::input_of(mv);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const auto j = static_cast<std::int64_t>(i);
    if (mv.x_out != nullptr) mv.x_out[i] = in.raw(j);
    out[i] = mv.right.v != nullptr ? in(j) : mv.right.c * in.raw(j);
  }
}

__global__ void __launch_bounds__(kBlock)
    diagonal_kernel(LaOperator A, double* out, std::size_t n) {
  stream_order_prologue();
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (A.is_stencil) {
      out[i] = A.stencil.center;
      continue;
    }
    double d = 0;
    for (std::int32_t k = A.csr.row_ptr[i]; k < A.csr.row_ptr[i + 1]; ++k) {
      if (A.csr.col[k] == static_cast<std::int32_t>(i)) d += A.csr.val[k];
    }
    out[i] = d;
  }
}

}  // namespace
}  // namespace sluice::detail::cuda
