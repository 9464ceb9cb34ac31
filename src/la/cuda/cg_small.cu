// Async CG blocks of small matrix-free problems (up to kMaxRows points) as one thread block, or
// as one thread-block cluster of up to 16 blocks (Hopper) whose blocks exchange data through
// distributed shared memory and meet at the cluster's hardware barrier. The vectors stay on chip
// for the whole block of iterations: each update element's x in the registers of the thread that
// owns it, r, the direction p (two buffers) and the product w in shared memory. What one step
// end costs here is a block or cluster barrier and a few shuffles, where cg_block_kernel (its
// sibling for larger problems in la_kernels.cu) pays a grid-wide barrier and every block's sum of
// hundreds of partials: at 64 x 64 points that kernel spends about 5.7 us per iteration on its
// two step ends.
//
// Bit-identical to sync mode, as cg_block_kernel is: every sum is formed exactly as the two
// kernels of an iteration form it when launched one by one (la_kernels.cu's cg_direction_kernel
// and fused_kernel<cg_update>), for the launch shapes la_kernels.cu hands over (CgSmallSteps).
// Those kernels' blocks of 256 threads are the "step blocks" here: a step block's thread T adds
// its points' terms in its kernel's order, each of its 8 warps sums the threads' values by the
// same shuffle tree, thread 0 adds the 8 warps' sums in order from 0, and the step's total is
// la_kernels.cu's combine_partials over the step blocks' partials (its 256 threads played by the
// lanes of warp 0: small_steps.cuh's finish_block), then block_combine. A warp of this kernel
// plays one warp of one step block at a time (a "unit": step block v, warp w), so its lanes are
// that warp's lanes and the shuffle tree is the same instruction sequence. Built with
// --fmad=false like la_kernels.cu.
//
// The units are split over the cluster's warps in order (first_of): a block's direction units are
// neighbouring tiles and its update units neighbouring chunks, so what a block reads of p lies in
// one window of the element range (its tiles with the stencil's reach, and its own elements).
// Tiles count from the start of the vectors and chunks from the end, so the update units go to
// the blocks in reverse order (upd_part): block b's tiles and elements then lie together and its
// window is about n / blocks elements plus the reach, not the whole vector (32^3 fits).
// Per iteration: (P) every block forms p = xs r + b p on its window into the direction's other
// buffer (from its r, which the owners pushed to it, and the direction before), and a block
// barrier; (D) the direction units compute w = A p reading that p, store each w to its owner's
// shared memory and publish each unit's sum to every block; a step end (block or cluster
// barrier); warp 0 of every block adds the sums and its lane 0 runs the solver logic (cg_dpi)
// on the block's state in shared memory, and a block barrier hands `a` to the block (every
// block computes the same bits: its copy of the sums is the same); (U) the update units run
// x += a p, r -= a w with the norm and z'r, push the new r to the blocks whose windows hold it
// and publish their sums; a step end; cg_iter in warp 0 and a block barrier.
// The version before ran the logic in every warp on a copy of the state per warp, with no block
// barrier after it, and formed each point's p where the product read it (10 shared loads per
// point of a 5-point product instead of 5): on an H100 its phase after the update's sums took
// 5.4 us per iteration in every warp (docs/bench/issue26.md).
// SLUICE_CUDA_CG_SMALL_PROFILE=FILE takes the kernel with its phase clock (Phase) and appends
// each launch's breakdown to FILE (bench/cuda/small_cg.cpp prints it).
// A solve's first block may carry its set-up (LaCgBlockArgs::initial, from a zero guess): the
// state's value comes with the launch and CG's first pass (x = 0, r = b, p = 0 and its sums, as
// fused_kernel<cg_init> forms them) runs before the iterations, so a solve is one launch.

#include <cuda_runtime.h>

#include <cooperative_groups.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernel_preload.hpp"
#include "la/cuda/cg_small.hpp"
#include "la/cuda/cg_small_layout.hpp"
#include "la/cuda/small_rule.hpp"
#include "la/cuda/small_steps.cuh"
#include "la/kernel_math.hpp"
#include "la/ksp_logic.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::cuda {
namespace {

namespace m = la_math;
namespace logic = ksp_logic;
namespace cgs = cooperative_groups;
using namespace small_steps;  // NOLINT: the shared pieces of the small kernels

constexpr int kMaxThreads = 1024;  // threads of a block here
// Update units a warp keeps in registers (x for each): 4 in one block, 2 in a cluster, whose code
// holds more (4 spilled 48 to 84 bytes at the 64 registers of 1024 threads).
constexpr int kMaxUnitsPerWarp = 4;
constexpr int kMaxClusterUnitsPerWarp = 2;
// Points a block of the cluster takes by the size rule (auto): at about 100 bytes of shared
// memory traffic per point and iteration (5-point: the direction formed and read by the product,
// w, the update), 1024 points keep one multiprocessor's shared memory busy for about 0.5 us per
// iteration, the order of a step end.
constexpr int kPointsPerBlock = 1024;
// At most this many points: 16 blocks of 1024 threads with 2 update units per warp.
constexpr std::int64_t kMaxRows = 32768;
// Tiles of the direction product whose first points a block keeps in shared memory.
constexpr unsigned kMaxTiles = 256;

struct Profile;

struct SmallArgs {
  LaCgBlockArgs a;
  Geometry g;
  Layout l;
  bool setup = false;  // a.initial's value is `start`, and a.init runs first
  LaKspState start;
  Profile* prof = nullptr;  // the phase clock's results (the kProf kernel only)
};

// ---- cluster helpers ---------------------------------------------------------------------------

/// `local`'s counterpart in block `b` of the cluster (distributed shared memory), or `local`.
template <class T>
__device__ __forceinline__ T* in_block(T* local, int blocks, unsigned rank, unsigned b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (blocks > 1 && b != rank) return cgs::this_cluster().map_shared_rank(local, b);
#endif
  (void)blocks, (void)rank, (void)b;
  return local;
}

/// Where a step kernel would end: the cluster's barrier (release and acquire, so every block's
/// stores into any block's shared memory before it are visible after it), or the block's.
__device__ __forceinline__ void step_end(int blocks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (blocks > 1) {
    cgs::this_cluster().sync();
    return;
  }
#endif
  (void)blocks;
  __syncthreads();
}

// ---- phase timing (SLUICE_CUDA_CG_SMALL_PROFILE) ------------------------------------------------

/// Where an iteration's time goes, per warp: `clock64` cycles at the end of each phase, summed
/// over the iterations. Only the kProf instantiation keeps them (the normal one has no trace).
enum Phase : int {
  kLoad,       // the state, the vectors and the set-up, before the first iteration
  kForm,       // p on the window, and the block barrier after it
  kDirection,  // w = A p with p'w's unit sums published
  kDirEnd,     // the step end after it (block or cluster barrier): waiting for the slowest
  kDirFinish,  // p'w's total and cg_dpi in warp 0, and the block barrier after them
  kUpdate,     // x += a p, r -= a w with the norm's and z'r's unit sums published
  kUpdEnd,     // the step end after it
  kUpdFinish,  // the two totals and cg_iter in warp 0, and the block barrier after them
  kTail,       // what the steps leave in memory, the last step end and the state's store
  kPhases
};

constexpr const char* kPhaseNames[kPhases] = {"load (once)", "form p",         "direction",
                                              "step end",    "finish cg_dpi",  "update",
                                              "step end",    "finish cg_iter", "tail (once)"};

constexpr int kMaxWarps = kMaxThreads / 32;

/// What a profiled launch leaves in device memory.
struct Profile {
  unsigned long long ns_start = 0, ns_end = 0;  // %globaltimer, warp 0 of block 0
  long long clk_start = 0, clk_end = 0;         // clock64 there
  int iterations = 0;                           // iterations whose direction product ran
  unsigned cycles[kMaxCluster][kMaxWarps][kPhases] = {};
};

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long v = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
  return v;
}

/// The phase clock of one warp (its lane 0); empty unless kProf.
template <bool kProf>
struct PhaseClock {
  __device__ void start(bool) {}
  __device__ void mark(Phase) {}
  __device__ void store(Profile*, unsigned, unsigned, int) {}
};

template <>
struct PhaseClock<true> {
  long long first = 0, last = 0;
  unsigned long long ns_first = 0;
  unsigned* acc = nullptr;  // the warp's sums, in shared memory (no registers taken from the code)
  bool on = false;
  __device__ void start(bool lane0) {
    __shared__ unsigned sums[kMaxWarps][kPhases];
    on = lane0;
    if (!on) return;
    acc = sums[threadIdx.x / 32];
    for (int k = 0; k < kPhases; ++k) acc[k] = 0;
    ns_first = global_ns();
    first = last = clock64();
  }
  __device__ void mark(Phase ph) {
    if (!on) return;
    const long long now = clock64();
    acc[ph] += static_cast<unsigned>(now - last);
    last = now;
  }
  __device__ void store(Profile* to, unsigned rank, unsigned warp, int iterations) {
    if (!on || to == nullptr) return;
    for (int k = 0; k < kPhases; ++k) to->cycles[rank][warp][k] = acc[k];
    if (rank == 0 && warp == 0) {
      to->ns_start = ns_first;
      to->ns_end = global_ns();
      to->clk_start = first;
      to->clk_end = clock64();
      to->iterations = iterations;
    }
  }
};

// ---- the kernel ---------------------------------------------------------------------------------

/// `sa.a.iterations` CG iterations (see the top of this file). UPW: the most update units a warp
/// holds (1, 2 or 4); kCluster: launched as a cluster of sa.l.blocks blocks (else one block, whose
/// code keeps no cluster paths: fewer registers); kProf: with the phase clock (sa.prof).
template <LaStencilKind K, int UPW, bool kCluster, bool kProf>
__global__ void __launch_bounds__(kMaxThreads, 1)
    cg_small_kernel(const __grid_constant__ SmallArgs sa) {
  stream_order_prologue();
  extern __shared__ double smem[];
  // The block's copy of the state: warp 0's lane 0 runs the solver logic on it (finish_block)
  // and a block barrier hands it to the other warps.
  __shared__ unsigned long long words[kWords];
  __shared__ Origin origins[kMaxTiles];  // each tile's first point, formed once
  const Geometry& g = sa.g;
  const Layout& l = sa.l;
  const LaMatvecArgs& mv = sa.a.direction;
  const LaFusedArgs& f = sa.a.update;
  const int blocks = kCluster ? l.blocks : 1;
  unsigned rank = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (kCluster && blocks > 1) rank = cgs::this_cluster().block_rank();
#endif
  const int t = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  const int lane = t % 32;
  const unsigned wt = static_cast<unsigned>(t / 32);
  PhaseClock<kProf> clock;
  clock.start(lane == 0);
  const int lo = l.lo[rank], hi = l.hi[rank];
  // Shared memory (the same layout in every block): the window's direction in two buffers (the
  // one before this iteration's update, read; the one after it, written), its r (the owners
  // write it; in a cluster they push it to every block whose window holds it), its w (from the
  // direction units; read for the block's own elements), and every unit's sums.
  double* const P0 = smem;
  double* const P1 = P0 + l.win;
  double* const R = P1 + l.win;
  double* const W = R + l.win;
  double* const Sd = W + l.win;
  double* const Su = Sd + g.dir_units;

  // The state: its initial value with the set-up (the value travelled with the launch), else
  // where the solve left it; one copy per block, complete after the step end below.
  const auto* from = sa.setup ? reinterpret_cast<const unsigned long long*>(&sa.start)
                              : reinterpret_cast<const unsigned long long*>(mv.sums.state);
  // A block past the stop: every thread reads that, so none reaches a barrier.
  if (reinterpret_cast<const LaKspState*>(from)->stop != 0) {
    if (rank == 0 && wt == 0) {
      store_state(sa.a.mirror, from, lane, 32);
      if (lane == 0 && sa.a.running != nullptr) *sa.a.running = 0;
    }
    return;
  }
  for (int k = t; k < kWords; k += threads) words[k] = from[k];
  LaKspState& st = *reinterpret_cast<LaKspState*>(words);

  // The warp's units among the cluster's warps, and the block's own update units. Update units
  // count chunks from the end of the vectors, tiles from the start: block `rank` takes the
  // update units of part blocks - 1 - rank (upd_part), so that its tiles and its elements lie
  // together and its window is about n / blocks elements (see layout_for).
  const unsigned all_warps = static_cast<unsigned>(blocks * threads / 32);
  const unsigned wpb = static_cast<unsigned>(threads / 32);
  const unsigned pw = rank * wpb + wt;
  const unsigned upw_part = upd_part(blocks, rank) * wpb + wt;
  const unsigned d0 = first_of(g.dir_units, all_warps, pw);
  const unsigned d1 = first_of(g.dir_units, all_warps, pw + 1);
  const unsigned u0 = first_of(g.upd_units, all_warps, upw_part);
  const unsigned u1 = first_of(g.upd_units, all_warps, upw_part + 1);
  const unsigned own0 =
      first_of(g.upd_units, static_cast<unsigned>(blocks), upd_part(blocks, rank));
  const unsigned own1 =
      first_of(g.upd_units, static_cast<unsigned>(blocks), upd_part(blocks, rank) + 1);

  // The warp's elements (g.n: none).
  const auto element = [&](int k) {
    const unsigned u = u0 + static_cast<unsigned>(k);
    return u < u1 ? update_element(g, u, lane) : g.n;
  };
  // x in the registers of its owner; r and p in shared memory only (the owner's r in R, its p
  // in the direction's buffer), which leaves the registers to the code (64 at 1024 threads).
  // With the set-up, the values its pass gives them (fused_elem<cg_init> from a zero guess:
  // x = 0, r = b, p = 0).
  const double* r_from = sa.setup ? sa.a.init.b : f.r;
  double x[UPW];
  for (int k = 0; k < UPW; ++k) {
    x[k] = 0;
    if (const int j = element(k); j < g.n && !sa.setup) x[k] = f.x[j];
  }
  for (int j = lo + t; j < hi; j += threads) {
    P0[j - lo] = sa.setup ? 0.0 : sa.a.p[0][j];
    R[j - lo] = r_from[j];
  }
  for (unsigned k = static_cast<unsigned>(t); k < g.tiles; k += static_cast<unsigned>(threads)) {
    origins[k] = tile_origin(g, k);
  }
  // Every block of the cluster runs before any reaches into another's shared memory (and the
  // block's state is complete). Block 0 alone writes the history.
  step_end(blocks);
  if (t == 0 && rank != 0) st.hist_cap = 0;

  const LaStencil& s = mv.A.stencil;
  const double xs = mv.x_scale, rc = mv.right.c, pc = f.pc.c;
  const int sy = g.nx, sz = g.nx * g.ny;
  int last = -1;  // the last iteration whose direction product ran
  bool iterate = true;
  if (sa.setup) {
    // The set-up pass's sums (fused_elem<cg_init>: the norm's term by type, z'r with z = c r),
    // formed as fused_kernel<cg_init> forms them (the update's shape), then cg_init.
    const LaFusedArgs& in = sa.a.init;
    for (int k = 0; k < UPW; ++k) {
      const unsigned u = u0 + static_cast<unsigned>(k);
      if (u >= u1) break;  // the same in every lane
      double acc[2] = {0, 0};
      if (const int j = element(k); j < g.n) {
        const double rj = R[j - lo];
        const double z = in.pc.c * rj;
        acc[0] += in.norm_type == 1 ? z * z : in.norm_type == 2 ? rj * rj : 0.0;
        acc[1] += z * rj;
      }
      const double s0 = __shfl_sync(0xffffffffu, warp_sum(acc[0]), 0);
      const double s1 = __shfl_sync(0xffffffffu, warp_sum(acc[1]), 0);
      if (lane < blocks) {
        double* to = in_block(Su, blocks, rank, static_cast<unsigned>(lane));
        to[2 * u] = s0;
        to[2 * u + 1] = s1;
      }
    }
    step_end(blocks);
    iterate = finish_block<2>(Su, g.chunks, LaFinalize::cg_init, st, t);
  }
  clock.mark(kLoad);
  // Per iteration two step ends, each followed by the logic in warp 0 and a block barrier, and
  // one block barrier between forming the direction and reading it.
  // Iteration `it` reads the direction before from P0 if `it` is even (else P1) and forms the
  // new one into the other buffer.
  for (int it = 0; iterate && it < sa.a.iterations; ++it) {
    const double b = st.b;
    const double* const Po = it % 2 == 0 ? P0 : P1;
    double* const Pn = it % 2 == 0 ? P1 : P0;
    // (P) p = xs r + b p on the window (cg_direction_tiles' input, formed once per element)
    // into the other buffer, from the r the owners pushed and the direction before.
    for (int j = lo + t; j < hi; j += threads) Pn[j - lo] = xs * R[j - lo] + b * Po[j - lo];
    last = it;
    __syncthreads();
    clock.mark(kForm);
    // (D) w = A p and the terms of p'w, two units at a time (lane T % 32 of each one's step
    // block warp), their sums reduced together (warp_sums_spread: unit u + lane / 16's total
    // in each lane). The two units run through one copy of the code (a rolled loop): the
    // kernel's code is what each iteration fetches again.
    const auto in = [&](int j) { return Pn[j - lo]; };
    for (unsigned u = d0; u < d1; u += 2) {
      double acc[2] = {0, 0};
      const int units = d1 - u < 2 ? 1 : 2;  // the same in every lane
#pragma unroll 1
      for (int h = 0; h < units; ++h) {
        const unsigned uh = u + static_cast<unsigned>(h);
        const Origin o = origins[uh / kStepWarps];
        const int T = static_cast<int>(uh % kStepWarps) * 32 + lane;
        double sum = 0;
        // The 27-point rows one after another: both rows' 54 loads in flight spilled registers.
#pragma unroll(K == LaStencilKind::d3p27 ? 1 : kRows)
        for (int row = 0; row < kRows; ++row) {
          const Point q = tile_point(g, o, T, row);
          if (q.i < 0) continue;
          const double c = in(q.i);
          const double w =
              rc * (s.neighbor * m::stencil_neighbors<K>(s, in, q.ix, q.iy, q.iz, q.i, sy, sz) +
                    s.center * c);
          if constexpr (kCluster) {
            const unsigned uu = update_unit(g, q.i);
            const unsigned ob =
                uu >= own0 && uu < own1
                    ? rank
                    : upd_part(blocks, owner_of(g.upd_units, static_cast<unsigned>(blocks), uu));
            in_block(W, blocks, rank, ob)[q.i - l.lo[ob]] = w;
          } else {
            W[q.i - lo] = w;
          }
          sum += w * c;
        }
        if (h == 0) {
          acc[0] = sum;
        } else {
          acc[1] = sum;
        }
      }
      const double total = warp_sums_spread(acc);
      const unsigned uh = u + static_cast<unsigned>(spread_sum_of(lane, 2));
      // Each of the 16 lanes holding a unit's total publishes it to one block (at most 16).
      if (uh < d1 && lane % 16 < blocks) {
        in_block(Sd, blocks, rank, static_cast<unsigned>(lane % 16))[uh] = total;
      }
    }
    clock.mark(kDirection);
    step_end(blocks);
    clock.mark(kDirEnd);
    const bool go = finish_block<1>(Sd, g.tiles, LaFinalize::cg_dpi, st, t);
    clock.mark(kDirFinish);
    if (!go) break;
    // (U) x += a p, r -= a w, with the norm's and z'r's terms (fused_elem<cg_update>); the new
    // r into the window of every block that holds it.
    const double a = st.a;
    double acc[2 * UPW];
    for (int k = 0; k < 2 * UPW; ++k) acc[k] = 0;
    for (int k = 0; k < UPW; ++k) {
      if (const int j = element(k); j < g.n) {
        const auto next = m::cg_update_at(x[k], Pn[j - lo], R[j - lo], W[j - lo], a, pc,
                                          f.norm_type, acc + 2 * k);
        x[k] = next.x;
        R[j - lo] = next.r;
        if constexpr (kCluster) {
#pragma unroll 1
          for (int to = 0; to < blocks; ++to) {
            if (to != static_cast<int>(rank) && l.lo[to] <= j && j < l.hi[to]) {
              in_block(R, blocks, rank, static_cast<unsigned>(to))[j - l.lo[to]] = next.r;
            }
          }
        }
      }
    }
    // The units' 2 x UPW sums reduced together (warp_sums_spread): a lane holds the total of sum
    // spread_sum_of(lane, 2 UPW) = 2 k + i, unit u0 + k's sum i (a unit past u1 sums zeros,
    // unpublished), and each block gets it from one of the lanes that hold it.
    const double total = warp_sums_spread(acc);
    constexpr int kLanesPerSum = 32 / (2 * UPW);
    const int sum = spread_sum_of(lane, 2 * UPW);
    if (u0 + static_cast<unsigned>(sum / 2) < u1) {
#pragma unroll 1
      for (int to = lane % kLanesPerSum; to < blocks; to += kLanesPerSum) {
        in_block(Su, blocks, rank, static_cast<unsigned>(to))[2 * u0 + sum] = total;
        if constexpr (kLanesPerSum >= kMaxCluster) break;  // one block per lane
      }
    }
    clock.mark(kUpdate);
    step_end(blocks);
    clock.mark(kUpdEnd);
    const bool more = finish_block<2>(Su, g.chunks, LaFinalize::cg_iter, st, t);
    clock.mark(kUpdFinish);
    if (!more) break;
  }

  // What the steps launched one by one leave in memory that is read again: x, r, the last
  // direction and the last product w, each element by its owner. (The direction before the last
  // one, which the next block overwrites before reading, keeps what it held; so does the set-up's
  // zeroed direction, which the first product reads as 0 here.)
  if (sa.setup || last >= 0) {
    double* p_out = last >= 0 ? sa.a.p[(last + 1) % 2] : nullptr;
    for (int k = 0; k < UPW; ++k) {
      if (const int j = element(k); j < g.n) {
        f.x[j] = x[k];
        f.r[j] = R[j - lo];
        if (p_out != nullptr) {
          p_out[j] = (last % 2 == 0 ? P1 : P0)[j - lo];
          mv.y[j] = W[j - lo];
        }
      }
    }
  }
  if (blocks > 1) step_end(blocks);  // no block leaves while another may reach its memory
  if (rank == 0 && wt == 0) {
    store_state(mv.sums.state, words, lane, 32);
    store_state(sa.a.mirror, words, lane, 32);  // pinned host memory, or null
    if (lane == 0 && sa.a.running != nullptr) *sa.a.running = st.stop == 0 ? 1 : 0;
  }
  clock.mark(kTail);
  clock.store(sa.prof, rank, wt, last + 1);
}

// ---- the launch ---------------------------------------------------------------------------------

using Kernel = void (*)(SmallArgs);

template <int UPW, bool kCluster, bool kProf>
Kernel kernel_for(LaStencilKind kind) {
  return m::with_stencil_kind(kind, [](auto k) -> Kernel {
    return cg_small_kernel<decltype(k)::value, UPW, kCluster, kProf>;
  });
}

template <bool kProf>
Kernel kernel_for(LaStencilKind kind, int upw, bool cluster) {
  if (upw <= 1) {
    return cluster ? kernel_for<1, true, kProf>(kind) : kernel_for<1, false, kProf>(kind);
  }
  if (upw <= 2) {
    return cluster ? kernel_for<2, true, kProf>(kind) : kernel_for<2, false, kProf>(kind);
  }
  return kernel_for<4, false, kProf>(kind);
}

/// SLUICE_CUDA_CG_SMALL: unset or auto (the size rule), 0 or off, block, cluster:N; with
/// `require` (comma-separated) not fitting is an error. Read at every block (tests change it).
struct Mode {
  bool off = false;
  bool require = false;
  int blocks = 0;  // 0: by size
};

Mode mode_from_env(const OpInfo& op) {
  Mode mode;
  const char* v = std::getenv("SLUICE_CUDA_CG_SMALL");
  if (v == nullptr) return mode;
  each_switch_word(v, [&](const std::string& word) {
    if (word == "0" || word == "off") {
      mode.off = true;
    } else if (word == "require") {
      mode.require = true;
    } else if (word == "block") {
      mode.blocks = 1;
    } else if (word.rfind("cluster:", 0) == 0) {
      const int c = std::atoi(word.c_str() + 8);
      if (c != 1 && c != 2 && c != 4 && c != 8 && c != 16) {
        throw Error(Errc::invalid_argument,
                    "SLUICE_CUDA_CG_SMALL: cluster:" + word.substr(8) +
                        " is not a cluster size; use 1, 2, 4, 8 or 16",
                    op.where);
      }
      mode.blocks = c;
    } else {
      throw Error(Errc::invalid_argument,
                  "SLUICE_CUDA_CG_SMALL: unknown word '" + word +
                      "'; use auto, off, block, cluster:N (N = 2, 4, 8, 16) and require",
                  op.where);
    }
  });
  return mode;
}

/// Whether a cluster of `config`'s shape can be resident on the device at all (queried once per
/// shape): a cluster's blocks must share one GPC, and a GPC of a part may have fewer than 16
/// multiprocessors left.
bool cluster_fits(Kernel kernel, const cudaLaunchConfig_t& config, int device) {
  static std::mutex mutex;
  static auto* cache = new std::map<std::tuple<Kernel, int, unsigned, unsigned, std::size_t>,
                                    bool>;  // never destroyed
  std::lock_guard lock(mutex);
  const auto key =
      std::make_tuple(kernel, device, config.gridDim.x, config.blockDim.x, config.dynamicSmemBytes);
  auto it = cache->find(key);
  if (it == cache->end()) {
    int clusters = 0;
    const cudaError_t err =
        cudaOccupancyMaxActiveClusters(&clusters, reinterpret_cast<const void*>(kernel), &config);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      clusters = 0;
    }
    it = cache->emplace(key, clusters > 0).first;
  }
  return it->second;
}

unsigned pow2_at_least(unsigned v) {
  unsigned p = 1;
  while (p < v) p *= 2;
  return p;
}

/// SLUICE_CUDA_CG_SMALL_PROFILE=FILE: launches take the kernel with its phase clock, each is
/// waited for and its breakdown appended to FILE (a diagnosis: the solve's time is measured
/// without it). Not while the stream is captured (graph mode), which cannot wait.
std::string profile_path(cudaStream_t stream, const OpInfo& op) {
  const char* v = std::getenv("SLUICE_CUDA_CG_SMALL_PROFILE");
  if (v == nullptr || *v == '\0') return {};
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  if (capturing != cudaStreamCaptureStatusNone) return {};
  // A path that cannot be written is said before anything is issued.
  std::FILE* out = std::fopen(v, "a");
  if (out == nullptr) {
    throw Error(Errc::invalid_argument,
                std::string("SLUICE_CUDA_CG_SMALL_PROFILE: cannot append to '") + v +
                    "': " + std::strerror(errno) + "; give a writable file, or unset it",
                op.where);
  }
  std::fclose(out);
  return v;
}

/// Appends one launch's breakdown to `path`: per phase, warp 0 of block 0 and the slowest and
/// fastest warp of the cluster, in us per iteration (the load and the tail: us once).
void write_profile(const std::string& path, const Profile& pr, const SmallArgs& sa,
                   const cudaLaunchConfig_t& config, double issue_us) {
  std::FILE* out = std::fopen(path.c_str(), "a");
  if (out == nullptr) return;
  const double ns = static_cast<double>(pr.ns_end - pr.ns_start);
  const double cycles = static_cast<double>(pr.clk_end - pr.clk_start);
  const double ghz = ns > 0 ? cycles / ns : 1.0;
  const int its = std::max(pr.iterations, 1);
  const int blocks = static_cast<int>(config.gridDim.x);
  const int warps = static_cast<int>(config.blockDim.x / 32);
  std::fprintf(out,
               "cg_small profile: %d points, %s of %d block(s) x %u threads, %d iterations: "
               "kernel %.2f us (%.0f cycles at %.2f GHz), host issue %.2f us\n",
               sa.g.n, blocks > 1 ? "cluster" : "block", blocks, config.blockDim.x, pr.iterations,
               ns * 1e-3, cycles, ghz, issue_us);
  std::fprintf(out, "  %-16s %10s %10s %10s\n", "phase", "warp 0", "max warp", "min warp");
  double per_it = 0;
  for (int ph = 0; ph < kPhases; ++ph) {
    const bool once = ph == kLoad || ph == kTail;
    unsigned hi = 0, lo = ~0u;
    for (int b = 0; b < blocks; ++b) {
      for (int w = 0; w < warps; ++w) {
        hi = std::max(hi, pr.cycles[b][w][ph]);
        lo = std::min(lo, pr.cycles[b][w][ph]);
      }
    }
    const auto us = [&](unsigned c) { return c / ghz * 1e-3 / (once ? 1 : its); };
    if (!once) per_it += us(pr.cycles[0][0][ph]);
    std::fprintf(out, "  %-16s %10.3f %10.3f %10.3f%s\n", kPhaseNames[ph], us(pr.cycles[0][0][ph]),
                 us(hi), us(lo), once ? "  (us, once)" : "");
  }
  std::fprintf(out, "  %-16s %10.3f us per iteration (warp 0)\n", "iteration", per_it);
  std::fclose(out);
}

/// The profiled launch: the kernel with its phase clock, waited for, its breakdown written.
void profiled_launch(const std::string& path, cudaLaunchConfig_t config, Kernel kernel,
                     SmallArgs sa, std::chrono::steady_clock::time_point issue_start,
                     const OpInfo& op) {
  // The host's issue: choosing the shape before this call, and the launch call itself (not the
  // profile's own allocation).
  using us = std::chrono::duration<double, std::micro>;
  const double choose_us = us(std::chrono::steady_clock::now() - issue_start).count();
  Profile* dev = nullptr;
  check(cudaMalloc(&dev, sizeof(Profile)), "cudaMalloc", op.where);
  check(cudaMemsetAsync(dev, 0, sizeof(Profile), config.stream), "cudaMemsetAsync", op.where);
  sa.prof = dev;
  const auto before = std::chrono::steady_clock::now();
  const cudaError_t launched = cudaLaunchKernelEx(&config, kernel, sa);
  const double issue_us = choose_us + us(std::chrono::steady_clock::now() - before).count();
  auto host = std::make_unique<Profile>();
  cudaError_t err = launched;
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err == cudaSuccess) {
    err = cudaMemcpyAsync(host.get(), dev, sizeof(Profile), cudaMemcpyDeviceToHost, config.stream);
  }
  if (err == cudaSuccess) err = cudaStreamSynchronize(config.stream);
  (void)cudaFree(dev);
  check(err, "the profiled small CG kernel", op.where);
  write_profile(path, *host, sa, config, issue_us);
}

// Every kernel of this file, loaded ahead where one process drives several GPUs
// (backends/cuda/kernel_preload.hpp).
SLUICE_CUDA_KERNEL_FILE(cg_small_kernel<LaStencilKind::d2p5, 1, false, false>);

}  // namespace

bool cg_small_block(const LaCgBlockArgs& args, const CgSmallSteps& steps, int device,
                    CUstream_st* stream, const OpInfo& op) {
  const auto issue_start = std::chrono::steady_clock::now();
  const Mode mode = mode_from_env(op);
  if (mode.off) return false;
  const std::string profile = profile_path(stream, op);
  auto no = [&](const std::string& why) {
    if (mode.require) {
      throw Error(Errc::invalid_state,
                  "cuda: the small CG kernel does not take this block (SLUICE_CUDA_CG_SMALL "
                  "contains 'require'): " +
                      why,
                  op.where);
    }
    return false;
  };
  const LaMatvecArgs& mv = args.direction;
  const LaStencil& s = mv.A.stencil;
  const std::int64_t rows = s.nx * s.ny * s.nz;
  if (rows > kMaxRows) {
    return no(std::to_string(rows) + " points, more than " + std::to_string(kMaxRows));
  }
  const std::int64_t auto_max = auto_max_rows(s.kind);                     // small_rule.hpp
  if (mode.blocks == 0 && !mode.require && rows > auto_max) return false;  // the size rule
  if (steps.dir_blocks != steps.tiles || steps.upd_blocks != steps.chunks) {
    return no("the steps' blocks take more than one tile or chunk each");
  }
  if (steps.tiles > kMaxTiles) {
    return no(std::to_string(steps.tiles) + " tiles, more than " + std::to_string(kMaxTiles));
  }
  if (mv.x != args.update.r) return no("the product's input is not the update's r");
  const bool setup = args.initial != nullptr;
  if (setup &&
      (args.init.op != LaFusedOp::cg_init || args.init.b == nullptr ||
       args.init.x != args.update.x || args.init.r != args.update.r || args.init.p != args.p[0] ||
       args.init.z != nullptr || args.init.pc.v != nullptr || steps.init_blocks != steps.chunks)) {
    return no("the set-up is not the zero-guess pass the kernel reproduces");
  }
  const DeviceLimits d = limits_of(device, op);
  if (d.major < 9) return no("the device is older than sm_90");

  Geometry g;
  g.nx = static_cast<int>(s.nx);
  g.ny = static_cast<int>(s.ny);
  g.nz = static_cast<int>(s.nz);
  g.n = static_cast<int>(rows);
  g.width = steps.tile_width;
  g.wshift = log2_if_pow2(steps.tile_width);
  g.height = steps.tile_height;
  g.depth = steps.tile_depth;
  g.tx = steps.tiles_x;
  g.ty = steps.tiles_y;
  g.tiles = steps.tiles;
  g.chunks = static_cast<unsigned>(steps.chunks);
  g.dir_units = g.tiles * kStepWarps;
  g.upd_units = g.chunks * kStepWarps;

  // The cluster sizes to try: the one asked for, or by size (about kPointsPerBlock points a
  // block), then larger ones (a window or the registers did not fit), then smaller ones (a
  // cluster of that size is not resident on this part).
  std::vector<int> sizes;
  if (mode.blocks > 0) {
    sizes.push_back(mode.blocks);
  } else {
    const int first = static_cast<int>(std::min<unsigned>(
        kMaxCluster,
        pow2_at_least(static_cast<unsigned>((rows + kPointsPerBlock - 1) / kPointsPerBlock))));
    for (int c = first; c <= kMaxCluster; c *= 2) sizes.push_back(c);
    for (int c = first / 2; c >= 1; c /= 2) sizes.push_back(c);
  }
  std::string why;
  for (int blocks : sizes) {
    // Threads: enough warps for the larger of the two steps' unit counts, 256 to 1024.
    const unsigned units = std::max(g.dir_units, g.upd_units);
    const unsigned threads =
        blocks == 1 ? kMaxThreads
                    : std::clamp<unsigned>(
                          pow2_at_least((units + blocks - 1) / static_cast<unsigned>(blocks)) * 32,
                          kStepThreads, kMaxThreads);
    const unsigned all_warps = static_cast<unsigned>(blocks) * threads / 32;
    const unsigned upw = (g.upd_units + all_warps - 1) / all_warps;
    if (upw > static_cast<unsigned>(blocks > 1 ? kMaxClusterUnitsPerWarp : kMaxUnitsPerWarp)) {
      why += (why.empty() ? "" : "; ") + std::to_string(blocks) +
             " block(s): " + std::to_string(upw) + " update units per warp";
      continue;
    }
    SmallArgs sa;
    sa.a = args;
    sa.g = g;
    sa.l = layout_for(g, s, blocks);
    sa.setup = setup;
    if (setup) sa.start = *args.initial;
    const std::size_t bytes = sizeof(double) * cg_small_shared_doubles(sa.l, g);
    const Kernel kernel = profile.empty()
                              ? kernel_for<false>(s.kind, static_cast<int>(upw), blocks > 1)
                              : kernel_for<true>(s.kind, static_cast<int>(upw), blocks > 1);
    if (bytes > prepare_kernel(reinterpret_cast<const void*>(kernel), device, d, op)) {
      why += (why.empty() ? "" : "; ") + std::to_string(blocks) +
             " block(s): " + std::to_string(bytes) + " bytes of shared memory";
      continue;
    }
    cudaLaunchAttribute attrs[2] = {};
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>(blocks));
    config.blockDim = dim3(threads);
    config.dynamicSmemBytes = bytes;
    config.stream = stream;
    config.attrs = attrs;
    config.numAttrs = 0;
    if (blocks > 1) {
      auto& a = attrs[config.numAttrs++];
      a.id = cudaLaunchAttributeClusterDimension;
      a.val.clusterDim.x = static_cast<unsigned>(blocks);
      a.val.clusterDim.y = 1;
      a.val.clusterDim.z = 1;
      if (!cluster_fits(kernel, config, device)) {
        why += (why.empty() ? "" : "; ") + std::string("a cluster of ") + std::to_string(blocks) +
               " blocks of " + std::to_string(threads) + " threads is not resident on this device";
        continue;
      }
    }
    static const bool pdl = [] {
      const char* v = std::getenv("SLUICE_CUDA_PDL");
      return v == nullptr || std::string(v) != "0";
    }();
    if (pdl) {
      auto& a = attrs[config.numAttrs++];
      a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      a.val.programmaticStreamSerializationAllowed = 1;
    }
    if (!profile.empty()) {
      profiled_launch(profile, config, kernel, sa, issue_start, op);
      return true;
    }
    check(cudaLaunchKernelEx(&config, kernel, sa), "cudaLaunchKernelEx", op.where);
    check(cudaGetLastError(), "kernel launch", op.where);
    return true;
  }
  return no(why);
}

}  // namespace sluice::detail::cuda
