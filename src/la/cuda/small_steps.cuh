#pragma once
// What the small la kernels (cg_small.cu, tf_small.cu) share: the geometry of the steps they
// reproduce (small_geometry.hpp), the step blocks' sums formed as la_kernels.cu forms them, and
// the launch's device limits. For nvcc only (device code); included by those files alone.

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <set>

#include "backends/cuda/cuda_check.hpp"
#include "la/cuda/small_geometry.hpp"
#include "la/cuda/warp_spread.hpp"
#include "la/kernel_math.hpp"
#include "la/ksp_logic.hpp"
#include "sluice/backend.hpp"

namespace sluice::detail::cuda::small_steps {

namespace m = la_math;
namespace logic = ksp_logic;

constexpr int kWords = sizeof(LaKspState) / sizeof(unsigned long long);
static_assert(sizeof(LaKspState) % sizeof(unsigned long long) == 0);

// ---- device helpers -----------------------------------------------------------------------------

/// la_kernels.cu's stream_order_prologue: launched with programmatic stream serialization, the
/// kernel may start while the one before it finishes, and waits here before touching memory.
__device__ __forceinline__ void stream_order_prologue() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// la_kernels.cu's warp_combine for sums (the same shuffle tree).
__device__ __forceinline__ double warp_sum(double v) {
  for (int off = 16; off > 0; off /= 2) v = v + __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

/// warp_sum of each of `v`'s N values (valid in lane 0), the N trees interleaved: each value
/// takes exactly warp_sum's additions, and the latency is about one tree's.
template <int N>
__device__ __forceinline__ void warp_sums(double (&v)[N]) {
  for (int off = 16; off > 0; off /= 2) {
    double other[N];
    for (int k = 0; k < N; ++k) other[k] = __shfl_down_sync(0xffffffffu, v[k], off);
    for (int k = 0; k < N; ++k) v[k] = v[k] + other[k];
  }
}

/// warp_sums' N totals (N a power of 2 up to 16), spread over the lanes in fewer shuffles
/// (warp_spread.hpp): returns the total of sum spread_sum_of(lane, N), in every lane. Every lane
/// takes part.
template <int C>
__device__ __forceinline__ void spread_rounds(double* v, unsigned lane, int off) {
  if constexpr (C > 1) {
    const bool upper = (lane & static_cast<unsigned>(off)) != 0;
    double give[C / 2], got[C / 2];
    spread_give<C>(v, upper, give);
    for (int j = 0; j < C / 2; ++j) got[j] = __shfl_xor_sync(0xffffffffu, give[j], off);
    spread_keep<C>(v, upper, got);
    spread_rounds<C / 2>(v, lane, off / 2);
  } else {
    for (; off > 0; off /= 2) v[0] = v[0] + __shfl_xor_sync(0xffffffffu, v[0], off);
  }
}

template <int N>
__device__ __forceinline__ double warp_sums_spread(double (&v)[N]) {
  static_assert(N == 1 || N == 2 || N == 4 || N == 8 || N == 16);
  spread_rounds<N>(v, threadIdx.x % 32, 16);
  return v[0];
}

/// Step block v's partial of sum k as its block_combine forms it: 0, then its 8 warps' unit sums
/// in order (unit u's sum k at S[u * NS + k]).
template <int NS>
__device__ __forceinline__ double step_partial(const double* S, unsigned v, int k) {
  double s = 0;
  for (int w = 0; w < kStepWarps; ++w) s = s + S[(v * kStepWarps + w) * NS + k];
  return s;
}

/// Thread T's part of each of the NS sums in la_kernels.cu's combine_partials over 256 threads,
/// from the units' sums of `blocks` step blocks (step_partial).
template <int NS>
__device__ __forceinline__ void thread_part(const double* S, unsigned blocks, unsigned T,
                                            double (&part)[NS]) {
  const auto partial = [&](unsigned v, int k) { return step_partial<NS>(S, v, k); };
  for (int k = 0; k < NS; ++k) part[k] = 0;
  if (NS == 1 && blocks <= 4 * kStepThreads) {
    double v[4];
    for (int u = 0; u < 4; ++u) {
      const unsigned b = T + u * kStepThreads;
      v[u] = b < blocks ? partial(b, 0) : 0.0;
    }
    for (int u = 0; u < 4; ++u) part[0] = part[0] + v[u];
    return;
  }
  unsigned b = T;
  // Rolled loops: at the small kernels' sizes (at most 256 step blocks) a thread takes one step
  // block here, and unrolled copies would only grow the code.
#pragma unroll 1
  for (; b + 3 * kStepThreads < blocks; b += 4 * kStepThreads) {
    double v[4][NS];
    for (int u = 0; u < 4; ++u) {
      for (int k = 0; k < NS; ++k) v[u][k] = partial(b + u * kStepThreads, k);
    }
    for (int u = 0; u < 4; ++u) {
      for (int k = 0; k < NS; ++k) part[k] = part[k] + v[u][k];
    }
  }
#pragma unroll 1
  for (; b < blocks; b += kStepThreads) {
    for (int k = 0; k < NS; ++k) part[k] = part[k] + partial(b, k);
  }
}

/// A step's NS sums over its `blocks` step blocks as la_kernels.cu's combine_partials and
/// block_combine form them over 256 threads, in one warp (valid in lane 0): its lanes play the
/// 256 threads in 8 rounds of 32; where at most 32 step blocks hold every partial, one round,
/// and the other 7 warps' sums (+0.0) are not added: block_combine's total is 0.0 + the first
/// warp's sum, never -0.0, and x + 0.0 is x for every other x.
template <int NS>
struct WarpTotal {
  double v[NS];
};

template <int NS>
__device__ __noinline__ WarpTotal<NS> warp_total_wide(const double* S, unsigned blocks) {
  WarpTotal<NS> out;
  double(&v)[NS] = out.v;
  for (int k = 0; k < NS; ++k) v[k] = 0;
  const int lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll 1
  for (int w = 0; w < kStepWarps; ++w) {
    double part[NS];
    thread_part<NS>(S, blocks, static_cast<unsigned>(w * 32 + lane), part);
    for (int k = 0; k < NS; ++k) v[k] = v[k] + warp_sum(part[k]);
  }
  return out;
}

template <int NS>
__device__ inline void warp_total(const double* S, unsigned blocks, int lane, double (&v)[NS]) {
  if (blocks <= 32) {
    // thread_part of lane T: step block T's partial, then +0.0 terms (the other step blocks
    // lie past `blocks`); a partial (0 + ...) is never -0.0, so those additions change nothing.
    double part[NS];
    const auto T = static_cast<unsigned>(lane);
    for (int k = 0; k < NS; ++k) part[k] = T < blocks ? step_partial<NS>(S, T, k) : 0.0;
    warp_sums(part);
    for (int k = 0; k < NS; ++k) v[k] = 0.0 + part[k];
  } else {
    // More than 32 step blocks (above 8192 points): out of line, its registers not the kernel's.
    const WarpTotal<NS> wide = warp_total_wide<NS>(S, blocks);
    for (int k = 0; k < NS; ++k) v[k] = wide.v[k];
  }
}

/// The step's total (warp_total) and its solver logic in warp 0 alone, with no barrier: its lane
/// 0 runs `fin` on the block's state `st` (shared memory). Every lane of warp 0 calls it (t < 32);
/// the other warps may meanwhile do work that reads neither the state nor what the logic writes.
template <int NS>
__device__ inline void finish_in_warp0(const double* S, unsigned blocks, LaFinalize fin,
                                       LaKspState& st, int t) {
  double v[NS];
  warp_total<NS>(S, blocks, t, v);
  if (t == 0) {
    double total[m::kMaxSums] = {0, 0, 0};
    for (int k = 0; k < NS; ++k) total[k] = v[k];
    logic::finalize(fin, st, total);
  }
}

/// The step's total and its solver logic once per block: warp 0 forms the total (warp_total)
/// and its lane 0 runs the logic on the block's state `st` (shared memory); a block barrier then
/// hands the state to every thread. Returns false once the solve stopped (the same in every
/// thread, and in every block of a cluster, whose blocks all hold every unit's sums).
template <int NS>
__device__ inline bool finish_block(const double* S, unsigned blocks, LaFinalize fin,
                                    LaKspState& st, int t) {
  if (t < 32) finish_in_warp0<NS>(S, blocks, fin, st, t);
  __syncthreads();
  return st.stop == 0;
}

/// Stores the block's copy of the state to `dst` unless it is null, a word per thread.
__device__ inline void store_state(LaKspState* dst, const unsigned long long* words, int t,
                                   int threads) {
  if (dst == nullptr) return;
  auto* to = reinterpret_cast<unsigned long long*>(dst);
  for (int k = t; k < kWords; k += threads) to[k] = words[k];
}

// ---- launch limits ------------------------------------------------------------------------------

struct DeviceLimits {
  int major = 0;
  int smem_optin = 0;  // bytes of shared memory a block may opt into
};

inline DeviceLimits limits_of(int device, const OpInfo& op) {
  static std::mutex mutex;
  static auto* cache = new std::map<int, DeviceLimits>;  // never destroyed
  std::lock_guard lock(mutex);
  auto it = cache->find(device);
  if (it == cache->end()) {
    DeviceLimits d;
    check(cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, device),
          "cudaDeviceGetAttribute", op.where);
    check(cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
          "cudaDeviceGetAttribute", op.where);
    it = cache->emplace(device, d).first;
  }
  return it->second;
}

/// Lets `kernel` use all the shared memory the device allows beside its static shared memory,
/// and clusters of 16 (once per kernel and device). Returns the dynamic shared memory, in bytes,
/// that a launch of `kernel` may ask for.
inline std::size_t prepare_kernel(const void* kernel, int device, const DeviceLimits& d,
                                  const OpInfo& op) {
  static std::mutex mutex;
  static auto* done = new std::map<std::pair<const void*, int>, std::size_t>;  // never destroyed
  std::lock_guard lock(mutex);
  if (auto it = done->find({kernel, device}); it != done->end()) return it->second;
  const void* k = kernel;
  cudaFuncAttributes attr{};
  check(cudaFuncGetAttributes(&attr, k), "cudaFuncGetAttributes", op.where);
  // The opt-in limit counts static and dynamic shared memory together: asking for all of it as
  // dynamic memory is refused (cudaErrorInvalidValue) by a kernel with static shared arrays.
  const int dynamic = d.smem_optin - static_cast<int>(attr.sharedSizeBytes);
  check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic),
        "cudaFuncSetAttribute", op.where);
  if (d.major >= 9) {
    check(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
          "cudaFuncSetAttribute", op.where);
  }
  const auto bytes = static_cast<std::size_t>(dynamic);
  done->emplace(std::pair{kernel, device}, bytes);
  return bytes;
}

}  // namespace sluice::detail::cuda::small_steps
