// Async CG blocks of small matrix-free problems (up to kMaxRows points) as one thread block, or
// as one thread-block cluster of up to 16 blocks (Hopper) whose blocks exchange data through
// distributed shared memory and meet at the cluster's hardware barrier. The vectors stay on chip
// for the whole block of iterations: each update element's x, r and p in the registers of the
// thread that owns it, the formed direction p and the product w in shared memory. What one step
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
// la_kernels.cu's combine_partials over the step blocks' partials (its thread layout emulated by
// the first 256 threads here), then block_combine. A warp of this kernel plays one warp of one
// step block at a time (a "unit": step block v, warp w), so its lanes are that warp's lanes and
// the shuffle tree is the same instruction sequence. Built with --fmad=false like la_kernels.cu.
//
// The units are split over the cluster's warps in order (first_of): a block's direction units are
// neighbouring tiles and its update units neighbouring chunks, so what a block reads of p lies in
// one window of the element range (its tiles with the stencil's reach, and its own elements).
// Tiles count from the start of the vectors and chunks from the end, so the update units go to
// the blocks in reverse order (upd_part): block b's tiles and elements then lie together and its
// window is about n / blocks elements plus the reach, not the whole vector (32^3 fits).
// Per iteration: (A) every block forms p = xs r + b p on its window, its own elements from
// registers, the others from the r their owners pushed to it; (B) the direction units compute
// w = A p and the terms of p'w, store each w to its owner's shared memory and publish each unit's
// sum to every block; a step end (cluster barrier); every block adds the sums and runs the
// solver logic (cg_dpi) on its own copy of the state (the same arithmetic in every block, so the
// same decisions); (C) the update units run x += a p, r -= a w with the norm and z'r, push the
// new r to the blocks whose windows hold it and publish their sums; a step end; cg_iter.
// A solve's first block may carry its set-up (LaCgBlockArgs::initial, from a zero guess): the
// state's value comes with the launch and CG's first pass (x = 0, r = b, p = 0 and its sums, as
// fused_kernel<cg_init> forms them) runs before the iterations, so a solve is one launch.

#include <cuda_runtime.h>

#include <cooperative_groups.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernel_preload.hpp"
#include "la/cuda/cg_small.hpp"
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

constexpr int kMaxCluster = 16;    // Hopper's largest (non-portable) cluster
constexpr int kMaxThreads = 1024;  // threads of a block here
// Update units a warp keeps in registers (x, r and p for each): 4 in one block, 2 in a cluster,
// whose code holds more (4 spills 48 to 84 bytes at the 64 registers of 1024 threads).
constexpr int kMaxUnitsPerWarp = 4;
constexpr int kMaxClusterUnitsPerWarp = 2;
// Points a block of the cluster takes by the size rule (auto): at about 64 bytes of shared
// memory traffic per point and iteration, 1024 points keep one multiprocessor's shared memory
// busy for about 0.3 us per iteration, the order of a step end.
constexpr int kPointsPerBlock = 1024;
// At most this many points: 16 blocks of 1024 threads with 2 update units per warp.
constexpr std::int64_t kMaxRows = 32768;
// Where the size rule (auto) takes the kernel at all, as measured on an H100
// (docs/bench/issue26.md): up to 1024 points it beats the default path (0.10 against 0.14 ms for
// 20 iterations); from 4096 points on it is 3-15 % slower. Asking for a shape still takes it.
constexpr std::int64_t kAutoMaxRows = 1024;

/// How the units are spread over the blocks, and each block's window of elements [lo, hi).
struct Layout {
  int blocks = 1;  // the cluster's size (1: one block, no cluster)
  int win = 0;     // doubles per window array (the largest window)
  int lo[kMaxCluster] = {};
  int hi[kMaxCluster] = {};
};

struct SmallArgs {
  LaCgBlockArgs a;
  Geometry g;
  Layout l;
  bool setup = false;  // a.initial's value is `start`, and a.init runs first
  LaKspState start;
};

/// The first and last element of tile t (host: the blocks' windows).
void tile_range(const Geometry& g, unsigned t, long long& first, long long& last) {
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
long long reach_of(const LaStencil& s) {
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

// ---- cluster helpers ---------------------------------------------------------------------------

/// The part of the update units (first_of over `blocks` parts) that block `rank` takes, and the
/// block that takes part `rank` (its own inverse): the parts in reverse block order.
__host__ __device__ __forceinline__ unsigned upd_part(int blocks, unsigned rank) {
  return static_cast<unsigned>(blocks) - 1 - rank;
}

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

// ---- the kernel ---------------------------------------------------------------------------------

/// `sa.a.iterations` CG iterations (see the top of this file). UPW: the most update units a warp
/// holds (1, 2 or 4); kCluster: launched as a cluster of sa.l.blocks blocks (else one block, whose
/// code keeps no cluster paths: fewer registers).
template <LaStencilKind K, int UPW, bool kCluster>
__global__ void __launch_bounds__(kMaxThreads, 1)
    cg_small_kernel(const __grid_constant__ SmallArgs sa) {
  stream_order_prologue();
  extern __shared__ double smem[];
  __shared__ unsigned long long words[kWords];
  __shared__ double warp_sums[kStepWarps][2];
  const Geometry& g = sa.g;
  const Layout& l = sa.l;
  const LaMatvecArgs& mv = sa.a.direction;
  const LaFusedArgs& f = sa.a.update;
  const int blocks = kCluster ? l.blocks : 1;
  unsigned rank = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (blocks > 1) rank = cgs::this_cluster().block_rank();
#endif
  const int t = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  const int lane = t % 32;
  const int lo = l.lo[rank], hi = l.hi[rank];
  // Shared memory (the same layout in every block): the window's p, its r (pushed by the
  // elements' owners; clusters only), its w (from the direction units; read for the block's own
  // elements), and every unit's sums.
  double* const P = smem;
  double* const R = P + l.win;
  double* const W = R + (blocks > 1 ? l.win : 0);
  double* const Sd = W + l.win;
  double* const Su = Sd + g.dir_units;

  // The state: its initial value with the set-up (the value travelled with the launch), else
  // where the solve left it.
  const auto* from = sa.setup ? reinterpret_cast<const unsigned long long*>(&sa.start)
                              : reinterpret_cast<const unsigned long long*>(mv.sums.state);
  for (int k = t; k < kWords; k += threads) words[k] = from[k];
  __syncthreads();
  LaKspState& st = *reinterpret_cast<LaKspState*>(words);
  if (st.stop != 0) {  // every block read the same state: none reaches a barrier
    if (rank == 0) {
      store_state(sa.a.mirror, words, t, threads);
      if (t == 0 && sa.a.running != nullptr) *sa.a.running = 0;
    }
    return;
  }
  __syncthreads();                           // everyone read stop before thread 0 changes the state
  if (rank != 0 && t == 0) st.hist_cap = 0;  // block 0 alone writes the history

  // The warp's units among the cluster's warps, and the block's own update units. Update units
  // count chunks from the end of the vectors, tiles from the start: block `rank` takes the
  // update units of part blocks - 1 - rank (upd_part), so that its tiles and its elements lie
  // together and its window is about n / blocks elements (see layout_for).
  const unsigned all_warps = static_cast<unsigned>(blocks * threads / 32);
  const unsigned wpb = static_cast<unsigned>(threads / 32), wt = static_cast<unsigned>(t / 32);
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

  // The warp's elements (g.n: none): x, r and the direction p.
  const auto element = [&](int k) {
    const unsigned u = u0 + static_cast<unsigned>(k);
    return u < u1 ? update_element(g, u, lane) : g.n;
  };
  // With the set-up, the values its pass gives them (fused_elem<cg_init> from a zero guess:
  // x = 0, r = b, p = 0).
  const double* r_from = sa.setup ? sa.a.init.b : f.r;
  double x[UPW], r[UPW], p[UPW];
  for (int k = 0; k < UPW; ++k) {
    x[k] = r[k] = p[k] = 0;
    if (const int j = element(k); j < g.n) {
      r[k] = r_from[j];
      if (!sa.setup) {
        x[k] = f.x[j];
        p[k] = sa.a.p[0][j];
      }
    }
  }
  for (int j = lo + t; j < hi; j += threads) {
    P[j - lo] = sa.setup ? 0.0 : sa.a.p[0][j];
    if (blocks > 1) R[j - lo] = r_from[j];
  }
  // Every block of the cluster runs before any reaches into another's shared memory.
  step_end(blocks);

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
      if (element(k) < g.n) {
        const double z = in.pc.c * r[k];
        acc[0] += in.norm_type == 1 ? z * z : in.norm_type == 2 ? r[k] * r[k] : 0.0;
        acc[1] += z * r[k];
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
    iterate = finish_step<2>(Su, g.chunks, LaFinalize::cg_init, st, warp_sums, t);
  }
  for (int it = 0; iterate && it < sa.a.iterations; ++it) {
    // (A) p = xs r + b p on the window (cg_direction_tiles' input, formed once per element).
    const double b = st.b;
    for (int k = 0; k < UPW; ++k) {
      if (const int j = element(k); j < g.n) {
        p[k] = xs * r[k] + b * p[k];
        P[j - lo] = p[k];
      }
    }
    if (blocks > 1) {
      for (int j = lo + t; j < hi; j += threads) {
        const unsigned u = update_unit(g, j);
        if (u < own0 || u >= own1) P[j - lo] = xs * R[j - lo] + b * P[j - lo];
      }
    }
    __syncthreads();
    last = it;
    // (B) w = A p and the terms of p'w, unit by unit: lane T % 32 of the step block's warp.
    const auto in = [&](int j) { return P[j - lo]; };
    for (unsigned u = d0; u < d1; ++u) {
      const Origin o = tile_origin(g, u / kStepWarps);
      const int T = static_cast<int>(u % kStepWarps) * 32 + lane;
      double acc = 0;
      for (int row = 0; row < kRows; ++row) {
        const Point q = tile_point(g, o, T, row);
        if (q.i < 0) continue;
        const double c = P[q.i - lo];
        const double w =
            rc * (s.neighbor * m::stencil_neighbors<K>(s, in, q.ix, q.iy, q.iz, q.i, sy, sz) +
                  s.center * c);
        const unsigned ob = upd_part(
            blocks, owner_of(g.upd_units, static_cast<unsigned>(blocks), update_unit(g, q.i)));
        in_block(W, blocks, rank, ob)[q.i - l.lo[ob]] = w;
        acc += w * c;
      }
      const double sum = __shfl_sync(0xffffffffu, warp_sum(acc), 0);
      if (lane < blocks) in_block(Sd, blocks, rank, static_cast<unsigned>(lane))[u] = sum;
    }
    step_end(blocks);
    if (!finish_step<1>(Sd, g.tiles, LaFinalize::cg_dpi, st, warp_sums, t)) break;
    // (C) x += a p, r -= a w, with the norm's and z'r's terms (fused_elem<cg_update>).
    const double a = st.a;
    for (int k = 0; k < UPW; ++k) {
      const unsigned u = u0 + static_cast<unsigned>(k);
      if (u >= u1) break;  // the same in every lane
      double acc[2] = {0, 0};
      if (const int j = element(k); j < g.n) {
        const auto next = m::cg_update_at(x[k], p[k], r[k], W[j - lo], a, pc, f.norm_type, acc);
        x[k] = next.x;
        r[k] = next.r;
        // The new r to the other blocks whose windows hold it.
        for (int to = 0; to < blocks; ++to) {
          if (to != static_cast<int>(rank) && l.lo[to] <= j && j < l.hi[to]) {
            in_block(R, blocks, rank, static_cast<unsigned>(to))[j - l.lo[to]] = next.r;
          }
        }
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
    if (!finish_step<2>(Su, g.chunks, LaFinalize::cg_iter, st, warp_sums, t)) break;
  }

  // What the steps launched one by one leave in memory that is read again: x, r, the last
  // direction and the last product w, each element by its owner. (The direction before the last
  // one, which the next block overwrites before reading, keeps what it held; so does the set-up's
  // zeroed direction, which the first product reads as 0 here.)
  if (sa.setup || last >= 0) {
    double* newest = last >= 0 ? sa.a.p[(last + 1) % 2] : nullptr;
    for (int k = 0; k < UPW; ++k) {
      if (const int j = element(k); j < g.n) {
        f.x[j] = x[k];
        f.r[j] = r[k];
        if (newest != nullptr) {
          newest[j] = p[k];
          mv.y[j] = W[j - lo];
        }
      }
    }
  }
  if (blocks > 1) step_end(blocks);  // no block leaves while another may reach its memory
  if (rank == 0) {
    store_state(mv.sums.state, words, t, threads);
    store_state(sa.a.mirror, words, t, threads);  // pinned host memory, or null
    if (t == 0 && sa.a.running != nullptr) *sa.a.running = st.stop == 0 ? 1 : 0;
  }
}

// ---- the launch ---------------------------------------------------------------------------------

using Kernel = void (*)(SmallArgs);

template <int UPW, bool kCluster>
Kernel kernel_for(LaStencilKind kind) {
  return m::with_stencil_kind(
      kind, [](auto k) -> Kernel { return cg_small_kernel<decltype(k)::value, UPW, kCluster>; });
}

Kernel kernel_for(LaStencilKind kind, int upw, bool cluster) {
  if (upw <= 1) return cluster ? kernel_for<1, true>(kind) : kernel_for<1, false>(kind);
  if (upw <= 2) return cluster ? kernel_for<2, true>(kind) : kernel_for<2, false>(kind);
  return kernel_for<4, false>(kind);
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
  const std::string all(v);
  std::size_t at = 0;
  while (at <= all.size()) {
    const std::size_t end = std::min(all.find(',', at), all.size());
    const std::string word = all.substr(at, end - at);
    at = end + 1;
    if (word.empty() || word == "auto" || word == "1") continue;
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
  }
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

/// The blocks' windows for a cluster of `blocks` (see the top of this file).
Layout layout_for(const Geometry& g, const LaStencil& s, int blocks) {
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

// Every kernel of this file, loaded ahead where one process drives several GPUs
// (backends/cuda/kernel_preload.hpp).
SLUICE_CUDA_KERNEL_FILE(cg_small_kernel<LaStencilKind::d2p5, 1, false>);

}  // namespace

bool cg_small_block(const LaCgBlockArgs& args, const CgSmallSteps& steps, int device,
                    CUstream_st* stream, const OpInfo& op) {
  const Mode mode = mode_from_env(op);
  if (mode.off) return false;
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
  if (mode.blocks == 0 && !mode.require && rows > kAutoMaxRows) return false;  // the size rule
  if (steps.dir_blocks != steps.tiles || steps.upd_blocks != steps.chunks) {
    return no("the steps' blocks take more than one tile or chunk each");
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
    const std::size_t bytes =
        sizeof(double) * (static_cast<std::size_t>(sa.l.win) * (blocks > 1 ? 3 : 2) + g.dir_units +
                          2 * std::size_t{g.upd_units});
    const Kernel kernel = kernel_for(s.kind, static_cast<int>(upw), blocks > 1);
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
    check(cudaLaunchKernelEx(&config, kernel, sa), "cudaLaunchKernelEx", op.where);
    check(cudaGetLastError(), "kernel launch", op.where);
    return true;
  }
  return no(why);
}

}  // namespace sluice::detail::cuda
