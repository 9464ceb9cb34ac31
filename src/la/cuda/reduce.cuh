#pragma once
// Deterministic reductions: a block's threads in a fixed order, blocks through shuffles in a
// fixed shape, the last block (an atomic ticket) adding the partials in block order.
// Part of one translation unit: src/la/cuda/la_kernels.cu includes it (and says how the
// kernels work).

#include "la/cuda/shapes.cuh"

namespace sluice::detail::cuda {
namespace {

// ---- reductions ---------------------------------------------------------------------------------

__device__ double warp_combine(m::Combine c, double v) {
  for (int off = 16; off > 0; off /= 2) v = m::combine(c, v, __shfl_down_sync(0xffffffffu, v, off));
  return v;
}

/// Combines `acc` over the block into `out` (valid in thread 0). `t` is the linear thread id.
template <int NS>
__device__ void block_combine(m::Combine c, const double (&acc)[NS], double (&out)[NS], int t) {
  __shared__ double warps[32][NS];
  // Every la kernel's block has kBlock threads: thread 0's loop has a known length, and its
  // loads are issued together. H200, a CG iteration (cooperative kernel): 33.4 against 34.2 us
  // at 113^3, 8.9 against 9.84 at 2e5 rows, 44.4 against 45.3 at 2e6.
  static_assert(kStencilThreads == kBlock);
  constexpr int nwarps = kBlock / 32;
  const int lane = t % 32, warp = t / 32;
  for (int k = 0; k < NS; ++k) {
    const double v = warp_combine(c, acc[k]);
    if (lane == 0) warps[warp][k] = v;
  }
  __syncthreads();
  if (t == 0) {
    for (int k = 0; k < NS; ++k) {
      double v = m::identity_of(c);
      for (int w = 0; w < nwarps; ++w) v = m::combine(c, v, warps[w][k]);
      out[k] = v;
    }
  }
  __syncthreads();
}

/// Combines the partials of `blocks` blocks (NS sums each, block-major) in block order into
/// `total` (valid in thread 0): thread t adds blocks t, t + threads, ..., then the block combines.
/// kShared: plain loads, cached in L1 and so shared by the blocks of a multiprocessor, for
/// partials read after a grid barrier (its acquire orders them after every block's stores and
/// leaves no stale line in L1); otherwise through L2 alone (`__ldcg`).
template <int NS, bool kShared = false>
__device__ void combine_partials(m::Combine c, const double* partials, int blocks,
                                 double (&total)[NS], int t, int threads) {
  const auto load = [&](int i) { return kShared ? partials[i] : __ldcg(&partials[i]); };
  double part[NS];
  for (int k = 0; k < NS; ++k) part[k] = m::identity_of(c);
  if (NS == 1 && blocks <= 4 * threads) {
    // One round, its loads issued together (the same order of sums; an identity where a
    // block is missing). H200: a CG iteration at 113^3 34.1 against 34.3 us, at 2e5 rows 9.82
    // against 9.95 (the direction product's 528 partials in cg_block_kernel).
    double v[4];
    for (int u = 0; u < 4; ++u) {
      v[u] = t + u * threads < blocks ? load(t + u * threads) : m::identity_of(c);
    }
    for (int u = 0; u < 4; ++u) part[0] = m::combine(c, part[0], v[u]);
    block_combine<NS>(c, part, total, t);
    return;
  }
  int b = t;
  // Four blocks' partials per round, their loads issued together (the same order of sums):
  // 1.5 to 4% per CG solve from 3e6 to 1e7 nonzeros on an H200, where every block of the
  // cooperative kernel adds 528 or 2112 partials twice an iteration.
  for (; b + 3 * threads < blocks; b += 4 * threads) {
    double v[4][NS];
    for (int u = 0; u < 4; ++u) {
      for (int k = 0; k < NS; ++k) v[u][k] = load((b + u * threads) * NS + k);
    }
    for (int u = 0; u < 4; ++u) {
      for (int k = 0; k < NS; ++k) part[k] = m::combine(c, part[k], v[u][k]);
    }
  }
  for (; b < blocks; b += threads) {
    for (int k = 0; k < NS; ++k) part[k] = m::combine(c, part[k], load(b * NS + k));
  }
  block_combine<NS>(c, part, total, t);
}

/// Ends a reduction of NS sums: block partials, then the last block combines them in block
/// order and hands them to `finish`: `finish.load(t)` in each of its threads t first (while
/// the partials are read), then `finish(total, t)` (`total` is valid in thread 0).
template <int NS, class Finish>
__device__ void reduce_and_finish(m::Combine c, const double (&acc)[NS], const Reducer& red,
                                  int block, int blocks, const Finish& finish) {
  const int t = threadIdx.x + threadIdx.y * blockDim.x;
  const int threads = blockDim.x * blockDim.y;
  __shared__ bool last;
  double mine[NS];
  block_combine<NS>(c, acc, mine, t);
  if (t == 0) {
    for (int k = 0; k < NS; ++k) red.partials[block * NS + k] = mine[k];
    // Release (this block's partial) and acquire (every earlier block's) in one operation.
    ::cuda::atomic_ref<unsigned int, ::cuda::thread_scope_device> ticket(*red.counter);
    last = ticket.fetch_add(1u, ::cuda::memory_order_acq_rel) == static_cast<unsigned>(blocks - 1);
  }
  __syncthreads();
  if (!last) return;
  finish.load(t, threads);
  double total[NS];
  combine_partials<NS>(c, red.partials, blocks, total, t, threads);
  finish(total, t, threads);
  if (t == 0) *red.counter = 0;
}

/// The words of the solver state the last block of a reduction works on (one per block).
__device__ unsigned long long* state_words() {
  constexpr int kWords = sizeof(LaKspState) / sizeof(unsigned long long);
  static_assert(sizeof(LaKspState) % sizeof(unsigned long long) == 0);
  __shared__ unsigned long long words[kWords];
  return words;
}

/// Stores and finalizes a solver step's sums. The logic runs on a shared-memory copy of the
/// state that the block's threads load and store a word each: one round of loads (issued with
/// the partials') instead of a dependent global round trip per field, without the registers a
/// private copy would take from every thread of the kernel.
template <int NS>
struct FinishSums {
  static constexpr int kWords = sizeof(LaKspState) / sizeof(unsigned long long);
  const LaSums& sums;

  __device__ void load(int t, int threads) const {
    if (sums.state == nullptr) return;
    const auto* global = reinterpret_cast<const unsigned long long*>(sums.state);
    for (int k = t; k < kWords; k += threads) state_words()[k] = global[k];
  }

  __device__ void operator()(const double (&total)[NS], int t, int threads) const {
    if (sums.state == nullptr) {
      if (t == 0 && sums.out != nullptr) {
        for (int k = 0; k < NS; ++k) sums.out[k] = total[k];
      }
      return;
    }
    __syncthreads();  // the state words are in
    if (t == 0) {
      if (sums.out != nullptr) {
        for (int k = 0; k < NS; ++k) sums.out[k] = total[k];
      }
      double s[m::kMaxSums] = {0, 0, 0};
      for (int k = 0; k < NS; ++k) s[k] = total[k];
      logic::finalize(sums.finalize, *reinterpret_cast<LaKspState*>(state_words()), s);
    }
    __syncthreads();
    auto* global = reinterpret_cast<unsigned long long*>(sums.state);
    for (int k = t; k < kWords; k += threads) global[k] = state_words()[k];
  }
};

/// A plain reduction's result, stored by thread 0.
struct FinishResult {
  const LaReduceArgs& a;
  __device__ void load(int, int) const {}
  __device__ void operator()(const double (&total)[1], int t, int) const {
    if (t == 0) *a.out = m::reduce_result(a, total[0], a.n);
  }
};

}  // namespace
}  // namespace sluice::detail::cuda
