// The cuda backend's la kernels (see la_kernels.hpp). What one element computes comes from
// src/la/kernel_math.hpp and the solvers' scalar logic from src/la/ksp_logic.hpp, shared with the
// host backend; this file holds the launch shapes and the reductions.
//
// Built with --fmad=false: the solver logic runs here in async mode and on the host in sync
// mode, and the two must round alike (the host never contracts a*b+c either).
//
// Reductions are deterministic: a block's threads accumulate in a fixed order, blocks combine
// through shuffles in a fixed shape, and the last block (found with an atomic ticket) adds the
// blocks' partials in block order. The launch shape depends only on the length, the kernel and
// the device, so a result is the same on every run.
//
// Launch shapes: grids are as large as the device keeps resident at once (its occupancy for the
// kernel, queried once), never more. Blocks that do not fit in one wave would run in a second,
// mostly empty one; and a reduction's partials stay few.

#include <cuda_runtime.h>
#include <cusparse.h>

#include <cooperative_groups.h>
#include <cuda/atomic>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_stream.hpp"
#include "core/context_impl.hpp"
#include "la/cuda/cg_small.hpp"
#include "la/cuda/fast_div.hpp"
#include "la/cuda/la_kernels.hpp"
#include "la/cuda/tf_small.hpp"
#include "la/kernel_math.hpp"
#include "la/ksp_logic.hpp"
#include "sluice/error.hpp"
#include "sluice/extension.hpp"

namespace sluice::detail::cuda {
namespace {

namespace m = la_math;
namespace logic = ksp_logic;

constexpr int kBlock = 256;           // threads of a 1D block
constexpr int kStencilThreads = 256;  // threads of a stencil block
constexpr int kRowsPerThread = 2;     // rows of its tile each thread takes
constexpr int kMaxBlocks = 2048;      // blocks of a reduction: the partials buffer holds this many
// Resident blocks of 256 threads per multiprocessor the solver kernels are compiled for: 6, so
// registers are capped at 40 (75% occupancy). At 8 (32 registers) the stencil kernels spill
// hundreds of bytes; the stencil kernel keeps two rows' loads in flight per thread instead.
constexpr int kMinBlocks = 6;
// cg_direction_kernel is compiled for 4 (64 registers): its loads for two rows stay in flight
// without spilling. Measured on an H200 against 6: 2 to 4% faster per CG solve from 3e6 to 1e7
// nonzeros, the same above.
constexpr int kCgDirectionMinBlocks = 4;
// The fused solver steps are compiled for 8 (32 registers, full occupancy): more loads in
// flight per multiprocessor, though ptxas spills 44 bytes (68 in tf_dx). Measured on an H200
// against 6: CG solves 4% faster at 1e7 nonzeros, 1 to 2% at 3e7 and 1e8; 4 was slower.
constexpr int kFusedMinBlocks = 8;

// cg_block_kernel is compiled for 4 resident blocks (64 registers), and CG's direction product
// runs on 4 blocks per multiprocessor in both of its forms (cg_direction_grid): the cooperative
// grid then holds exactly one block of the direction product and two of the update (8 per
// multiprocessor) per block, so neither step leaves some blocks with twice the work of others.
// Measured on an H100 at 1e8 nonzeros against 5 (48 registers, the direction product's own
// occupancy, the update's blocks taken one or two per block): 12.8 ms per 20 iterations in 2D.
constexpr int cg_block_min_blocks(LaStencilKind) {
  return 4;
}
// Stencils of up to this many points run async CG in blocks of one kernel (cg_blocks_for).
constexpr std::int64_t kCgBlockMaxRows = 10'000'000;

// ---- per-context scratch -----------------------------------------------------------------------

void cuda_check(cudaError_t err, const char* what, const OpInfo& op) {
  check(err, what, op.where);
}

/// One device allocation of a context's scratch. Its last holder frees it: the context's state
/// (once the context drained, or once the stream passed the work issued before it was replaced)
/// or a graph captured with it (once the graph's launches completed).
struct ScratchBlock {
  void* ptr = nullptr;
  int device = 0;
  ScratchBlock(std::size_t bytes, int dev, const OpInfo& op) : device(dev) {
    // cudaMalloc, not the stream's pool: legal inside a (relaxed) stream capture, where a
    // stream-ordered allocation would become a node of the graph.
    cuda_check(cudaMalloc(&ptr, bytes), "cudaMalloc", op);
  }
  ScratchBlock(const ScratchBlock&) = delete;
  ScratchBlock& operator=(const ScratchBlock&) = delete;
  ~ScratchBlock() {
    int current = 0;
    const bool switched = cudaGetDevice(&current) == cudaSuccess && current != device &&
                          cudaSetDevice(device) == cudaSuccess;
    if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();  // a broken context only leaks
    if (switched) (void)cudaSetDevice(current);
  }
};
using BlockRef = std::shared_ptr<ScratchBlock>;

/// A context's la scratch, kept in its extension state (ContextImpl::extension_state_slot):
/// reduction partials and a ticket counter (kernels of one stream run one at a time, so they
/// share them), and the temporaries of the CSR path. It grows without waiting for the stream, so
/// also inside a capture: a larger block replaces a smaller one, which stays alive until the
/// stream passed the work issued before (an event, recorded outside captures) and no graph holds
/// it.
struct Scratch {
  double* partials = nullptr;
  unsigned int* counter = nullptr;
  double* temp[2] = {nullptr, nullptr};
  std::size_t temp_size = 0;  // doubles in each temp
  void* spmv = nullptr;
  std::size_t spmv_size = 0;
  int sms = 0;
  bool counter_zeroed = false;  // on the stream itself (not only inside a captured graph)
  BlockRef reduce_block;
  BlockRef temp_blocks[2];
  BlockRef spmv_block;
  struct Retired {
    BlockRef block;
    cudaEvent_t passed = nullptr;  // the stream's point after every use (null: not yet known)
  };
  std::vector<Retired> retired;

  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {  // the context drained before dropping its state: every block may go
    for (auto& r : retired) {
      if (r.passed != nullptr) (void)cudaEventDestroy(r.passed);
    }
  }
};

std::size_t scratch_slot() {
  static const std::size_t slot = next_extension_slot();
  return slot;
}

bool capturing(cudaStream_t st) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(st, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone;
}

/// A graph being recorded from this operation uses `block`: the graph keeps it alive.
void hold_for_capture(const BlockRef& block) {
  if (auto* sink = ContextImpl::issuing().capture; sink != nullptr && block) sink->adopt(block);
}

/// Frees retired blocks the stream is done with and no graph holds (outside captures only).
void collect_retired(Scratch& sc, cudaStream_t st, const OpInfo& op) {
  for (auto& r : sc.retired) {
    if (r.passed != nullptr) continue;
    cuda_check(cudaEventCreateWithFlags(&r.passed, cudaEventDisableTiming), "cudaEventCreate", op);
    cuda_check(cudaEventRecord(r.passed, st), "cudaEventRecord", op);
  }
  std::erase_if(sc.retired, [](Scratch::Retired& r) {
    if (r.block.use_count() > 1 || cudaEventQuery(r.passed) != cudaSuccess) {
      (void)cudaGetLastError();  // cudaErrorNotReady
      return false;
    }
    (void)cudaEventDestroy(r.passed);
    return true;
  });
}

void retire(Scratch& sc, BlockRef& block) {
  if (block) sc.retired.push_back({std::move(block), nullptr});
  block.reset();
}

/// The scratch of the context whose operation is being enqueued (made on first use).
Scratch& scratch_for(CudaStream& s, cudaStream_t st, const OpInfo& op) {
  auto* ctx = ContextImpl::issuing().ctx;
  auto* slot = ctx != nullptr ? ctx->extension_state_slot(scratch_slot()) : nullptr;
  if (slot == nullptr) {
    throw Error(Errc::invalid_state,
                ctx == nullptr ? "cuda la kernels called outside an operation of a context"
                               : "cuda la kernels: no per-context state slot left",
                op.where);
  }
  if (!*slot) {
    auto fresh = std::make_shared<Scratch>();
    cuda_check(cudaDeviceGetAttribute(&fresh->sms, cudaDevAttrMultiProcessorCount, s.device()),
               "cudaDeviceGetAttribute", op);
    constexpr std::size_t partial_bytes = sizeof(double) * 3 * kMaxBlocks;
    fresh->reduce_block =
        std::make_shared<ScratchBlock>(partial_bytes + sizeof(unsigned int), s.device(), op);
    fresh->partials = static_cast<double*>(fresh->reduce_block->ptr);
    fresh->counter = reinterpret_cast<unsigned int*>(
        static_cast<std::byte*>(fresh->reduce_block->ptr) + partial_bytes);
    *slot = std::move(fresh);
  }
  auto& sc = *static_cast<Scratch*>(slot->get());
  const bool captured = capturing(st);
  if (!sc.counter_zeroed || captured) {
    // The kernels leave the ticket at 0; it starts at 0 on the stream, and in every graph
    // recorded before the stream zeroed it (the graph may run first).
    cuda_check(cudaMemsetAsync(sc.counter, 0, sizeof(unsigned int), st), "cudaMemsetAsync", op);
    if (!captured) sc.counter_zeroed = true;
  }
  if (captured) {
    hold_for_capture(sc.reduce_block);
  } else if (!sc.retired.empty()) {
    collect_retired(sc, st, op);
  }
  return sc;
}

/// Blocks of `threads` threads that one multiprocessor of `device` keeps resident for `kernel`
/// (queried once per kernel and device).
int resident_blocks(const void* kernel, int threads, int device, const OpInfo& op) {
  static std::mutex mutex;
  static auto* cache = new std::map<std::pair<const void*, int>, int>;  // never destroyed
  std::lock_guard lock(mutex);
  auto [it, fresh] = cache->try_emplace({kernel, device}, 0);
  if (fresh) {
    int blocks = 0;
    const cudaError_t err =
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, 0);
    if (err != cudaSuccess) cache->erase(it);
    cuda_check(err, "cudaOccupancyMaxActiveBlocksPerMultiprocessor", op);
    it->second = std::max(1, blocks);
  }
  return it->second;
}

/// Grows the context's temporaries to n doubles each (never waits for the stream).
void ensure_temps(CudaStream& s, Scratch& sc, std::size_t n, const OpInfo& op) {
  if (sc.temp_size < n) {
    const std::size_t size = std::max(n, 2 * sc.temp_size);  // few growths, few retired blocks
    for (int i = 0; i < 2; ++i) {
      retire(sc, sc.temp_blocks[i]);
      sc.temp[i] = nullptr;
    }
    sc.temp_size = 0;
    for (int i = 0; i < 2; ++i) {
      sc.temp_blocks[i] = std::make_shared<ScratchBlock>(sizeof(double) * size, s.device(), op);
      sc.temp[i] = static_cast<double*>(sc.temp_blocks[i]->ptr);
    }
    sc.temp_size = size;
  }
  for (const auto& b : sc.temp_blocks) hold_for_capture(b);
}

void ensure_spmv_buffer(CudaStream& s, Scratch& sc, std::size_t bytes, const OpInfo& op) {
  if (sc.spmv_size < bytes) {
    const std::size_t size = std::max(bytes, 2 * sc.spmv_size);
    retire(sc, sc.spmv_block);
    sc.spmv = nullptr;
    sc.spmv_size = 0;
    sc.spmv_block = std::make_shared<ScratchBlock>(size, s.device(), op);
    sc.spmv = sc.spmv_block->ptr;
    sc.spmv_size = size;
  }
  hold_for_capture(sc.spmv_block);
}

struct Reducer {
  double* partials;
  unsigned int* counter;
};

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

/// A stencil product's tiles: width x height points of `depth` z planes each, numbered x
/// fastest, then y, then z. A block takes tiles blockIdx.x, blockIdx.x + gridDim.x, ...: the
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
  FastDiv by_tx, by_ty;     // division by tx and by ty
  FastDiv by_nx;            // flat: division by the stencil's nx

  /// Tile t's first point: x (flat: the offset in the plane), y and the plane.
  struct Origin {
    unsigned x, y, z;
  };
  __device__ Origin origin(unsigned t) const {
    const unsigned rest = by_tx(t);
    const unsigned z = by_ty(rest);
    return {(t - rest * tx) * width, (rest - z * ty) * height, z * depth};
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

// ---- launch shapes ------------------------------------------------------------------------------

/// Blocks for `work` blocks' worth of work: no more than the device keeps resident for `kernel`
/// (a reduction: nor than the partials buffer holds).
template <class Kernel>
unsigned grid_for(Kernel* kernel, std::size_t work, int threads, bool reduction, CudaStream& s,
                  const Scratch& sc, const OpInfo& op) {
  std::size_t cap = static_cast<std::size_t>(sc.sms) *
                    resident_blocks(reinterpret_cast<const void*>(kernel), threads, s.device(), op);
  if (reduction) cap = std::min<std::size_t>(cap, kMaxBlocks);
  return static_cast<unsigned>(std::clamp<std::size_t>(work, 1, cap));
}

/// Points along x of a stencil tile: 32 in 2D; 128 in 3D unless 64 or 32 pads x less (measured
/// on an H200, 2D 5-point at 2e7 points: 500 us per CG iteration with 32, 514 with 128 or 256;
/// 3D 7-point at 1.4e7: 390 with 32, 371 with 128 or 256, while 256 is slower below 1e7
/// points). SLUICE_CUDA_TILE_X (32, 64, 128 or 256) overrides, to measure the choice again.
unsigned tile_width(bool three, std::int64_t nx) {
  static const unsigned forced = [] {
    const char* v = std::getenv("SLUICE_CUDA_TILE_X");
    const unsigned w = v != nullptr ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : 0u;
    return w == 32 || w == 64 || w == 128 || w == 256 ? w : 0u;
  }();
  if (forced != 0) return forced;
  if (!three) return 32u;
  // 3D: the widest of 128, 64, 32 that pads x least (a tile's threads past nx idle: at nx = 164,
  // 128 wide tiles leave 36% of them idle and 64 wide 15%; 64 measured 5% faster there).
  unsigned best = 128;
  for (unsigned w : {64u, 32u}) {
    if ((nx + w - 1) / w * w < (nx + best - 1) / best * best) best = w;
  }
  return best;
}

/// Calls `fn(kernel)` with the stencil kernel for product `a`: its kind, with or without its
/// sum, and its input's form.
template <class Fn>
void with_stencil_kernel(const LaMatvecArgs& a, bool sums, Fn&& fn) {
  using K = LaStencilKind;
  auto pick_input = [&](auto kind, auto ns) {
    constexpr K kKind = decltype(kind)::value;
    constexpr int kSums = decltype(ns)::value;
    if (a.right.v != nullptr) return fn(stencil_kernel<kKind, kSums, m::MatvecInput>);
    if (a.x2 != nullptr) return fn(stencil_kernel<kKind, kSums, m::ConstantRightInput<true>>);
    return fn(stencil_kernel<kKind, kSums, m::ConstantRightInput<false>>);
  };
  auto pick_sums = [&](auto kind) {
    if (sums) return pick_input(kind, std::integral_constant<int, 1>{});
    return pick_input(kind, std::integral_constant<int, 0>{});
  };
  m::with_stencil_kind(a.A.stencil.kind, pick_sums);
}

/// Whether the switch `name` (an environment variable, for measurements) is on: unless "0".
bool switched_on(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::string(v) != "0";
}

/// Whether CG's direction product has its own kernel (cg_direction_kernel);
/// SLUICE_CUDA_CG_KERNELS=0 runs it through the generic stencil kernel (to measure the gain).
bool cg_kernels() {
  static const bool on = switched_on("SLUICE_CUDA_CG_KERNELS");
  return on;
}

/// Whether a product is CG's direction product (p = z + b p; w = A p; p'w), which has a
/// kernel of its own.
bool is_cg_direction(const LaMatvecArgs& a) {
  return a.A.is_stencil && a.x2 != nullptr && a.right.v == nullptr && a.left.v == nullptr &&
         a.left.c == 1.0 && a.epilogue == LaEpilogue::store_dot && a.x_out != nullptr &&
         a.z == a.x_out && cg_kernels();
}

/// Whether CG's 3D 7-point direction product takes its points along z (cg_direction_columns);
/// SLUICE_CUDA_CG_COLUMNS=0 takes them along y as the other products do (to measure it).
bool cg_columns() {
  static const bool on = switched_on("SLUICE_CUDA_CG_COLUMNS");
  return on;
}

/// The tiles of a stencil product over `st`; `cg_direction`: of CG's direction product, whose
/// 3D 7-point form takes its points along z (cg_direction_columns).
Tiles tiles_for(const LaStencil& st, const OpInfo& op, bool cg_direction = false) {
  Tiles tiles;
  const bool columns = cg_direction && st.kind == LaStencilKind::d3p7 && cg_columns() &&
                       (kRowsPerThread + 1) * st.nx * st.ny <= std::int64_t{0x7fffffff};
  if (columns) {
    // Flat: at nx = 113, x lines padded to 128 left 12% of the threads idle, and the 3249 tiles
    // took 7 rounds of the 528 blocks of an H200 against 2850 in 6 flat. Measured on an H200
    // with cg_block_kernel's step-end prefetch: 35.3 against 35.5 us per iteration at 113^3,
    // 96.3 against 98.4 at 163^3; the step kernels at 243^3 320.7 against 317.1 (the division
    // by nx). Without that prefetch, flat tiles made cg_block_kernel spill (11% slower).
    tiles.width = kStencilThreads;
    tiles.height = 1;
    tiles.depth = kRowsPerThread;
    tiles.tx = static_cast<unsigned>((st.nx * st.ny + kStencilThreads - 1) / kStencilThreads);
    tiles.ty = 1;
    tiles.by_nx = FastDiv(static_cast<std::uint32_t>(st.nx));
  } else {
    tiles.width =
        tile_width(st.kind == LaStencilKind::d3p7 || st.kind == LaStencilKind::d3p27, st.nx);
    tiles.height = kStencilThreads / tiles.width * kRowsPerThread;
    tiles.tx = static_cast<unsigned>((st.nx + tiles.width - 1) / tiles.width);
    tiles.ty = static_cast<unsigned>((st.ny + tiles.height - 1) / tiles.height);
  }
  const std::int64_t count =
      std::int64_t{tiles.tx} * tiles.ty * ((st.nz + tiles.depth - 1) / tiles.depth);
  if (count > std::int64_t{0x7fffffff} || st.nx * st.ny > std::int64_t{0x7fffffff}) {
    throw Error(Errc::invalid_argument,
                "cuda: stencil grid " + std::to_string(st.nx) + " x " + std::to_string(st.ny) +
                    " x " + std::to_string(st.nz) +
                    " too large for one product (at most 2^31 - 1 points per plane)",
                op.where);
  }
  tiles.count = static_cast<unsigned>(count);
  tiles.by_tx = FastDiv(tiles.tx);
  tiles.by_ty = FastDiv(tiles.ty);
  return tiles;
}

/// Whether async CG iterations run as one cooperative kernel per block of iterations
/// (cg_block_kernel); SLUICE_CUDA_CG_BLOCKS=0 issues each step as its own kernel (to measure it).
bool cg_blocks() {
  static const bool on = switched_on("SLUICE_CUDA_CG_BLOCKS");
  return on;
}

/// Whether CG on a stencil of `rows` points runs its async iterations in blocks of one kernel
/// (cg_block_kernel). Up to kCgBlockMaxRows: above, an iteration moves so many bytes that the
/// kernel boundaries cost little, and the direction product on its own kernel's occupancy
/// (5 blocks per multiprocessor where cg_block_kernel holds 4) streams faster.
bool cg_blocks_for(std::int64_t rows) {
  return cg_blocks() && rows <= kCgBlockMaxRows;
}

/// Whether `device` can launch cooperative kernels (queried once per device).
bool cooperative(int device, const OpInfo& op) {
  static std::mutex mutex;
  static auto* cache = new std::map<int, bool>;  // never destroyed
  std::lock_guard lock(mutex);
  auto it = cache->find(device);
  if (it == cache->end()) {
    int v = 0;
    cuda_check(cudaDeviceGetAttribute(&v, cudaDevAttrCooperativeLaunch, device),
               "cudaDeviceGetAttribute", op);
    it = cache->emplace(device, v != 0).first;
  }
  return it->second;
}

/// Whether `s` is the device state's scalar at byte `offset` of `st`, read as is.
bool is_state_scalar(const LaScalar& s, const LaKspState* st, std::size_t offset) {
  return s.num == reinterpret_cast<const double*>(reinterpret_cast<const char*>(st) + offset) &&
         s.den == nullptr && s.factor == 1.0;
}

/// Whether a block of CG iterations fits cg_block_kernel: a stencil's direction product with its
/// own kernel, a constant preconditioner (z not stored), both steps on the async state and their
/// scalars b and a read from it.
bool fits_cg_block(const LaCgBlockArgs& a) {
  LaMatvecArgs m;
  LaFusedArgs f;
  cg_block_step(a, 0, m, f);
  const LaKspState* st = m.sums.state;
  const std::int64_t rows = m.A.stencil.nx * m.A.stencil.ny * m.A.stencil.nz;
  return is_cg_direction(m) && cg_blocks_for(rows) && st != nullptr && f.sums.state == st &&
         m.sums.finalize == LaFinalize::cg_dpi && f.sums.finalize == LaFinalize::cg_iter &&
         f.op == LaFusedOp::cg_update && f.pc.v == nullptr && f.z == nullptr && f.w == m.y &&
         f.n == static_cast<std::size_t>(rows) &&
         is_state_scalar(m.x2_scale, st, offsetof(LaKspState, b)) &&
         is_state_scalar(f.s[0], st, offsetof(LaKspState, a));
}

std::size_t blocks_of(std::size_t n) {
  return (n + kBlock - 1) / kBlock;
}

/// Blocks' worth of work for a 1D reduction of n elements: two elements per thread, as long as
/// that leaves two blocks per multiprocessor (grid_for caps it at the resident blocks). Half the
/// blocks, half the partials and tickets the last block waits for: on an H200, a CG iteration
/// at 2e5 rows took 14.3 us against 16.1 with one element per thread (3D 7-point at 1.4e5
/// rows: 14.4 against 15.6), while at 6e4 rows halving the blocks was 1 to 2% slower.
std::size_t reduction_blocks(std::size_t n, const Scratch& sc) {
  const std::size_t one = blocks_of(n), two = blocks_of((n + 1) / 2);
  return two >= 2 * static_cast<std::size_t>(sc.sms) ? two : one;
}

/// The grid of CG's direction product in both of its forms, cg_direction_kernel and the first
/// step of cg_block_kernel (their sums must be the same, so sync mode takes the block kernel's
/// shape wherever async mode uses it): what both keep resident at once.
unsigned cg_direction_grid(const LaStencil& st, const Tiles& tiles, CudaStream& s,
                           const Scratch& sc, const OpInfo& op) {
  return m::with_stencil_kind(st.kind, [&](auto k) {
    constexpr LaStencilKind kKind = decltype(k)::value;
    const unsigned own =
        grid_for(cg_direction_kernel<kKind>, tiles.count, kStencilThreads, true, s, sc, op);
    if (!cg_blocks_for(st.nx * st.ny * st.nz)) return own;
    return std::min(
        own, grid_for(cg_block_kernel<kKind>, tiles.count, kStencilThreads, true, s, sc, op));
  });
}

void check_launch(const OpInfo& op) {
  cuda_check(cudaGetLastError(), "kernel launch", op);
}

/// Whether kernels are launched with programmatic stream serialization (see
/// stream_order_prologue); SLUICE_CUDA_PDL=0 turns it off (to measure what it gains).
bool use_pdl() {
  static const bool on = switched_on("SLUICE_CUDA_PDL");
  return on;
}

/// kernel<<<grid, block, 0, stream>>>(args...) with launch attribute `attribute`, or none.
template <class... Params, class... Args>
void launch_as(cudaLaunchAttribute* attribute, void (*kernel)(Params...), dim3 grid, dim3 block,
               cudaStream_t stream, const OpInfo& op, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = attribute != nullptr ? 1 : 0;
  cuda_check(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), "cudaLaunchKernelEx",
             op);
}

/// kernel<<<grid, block, 0, stream>>>(args...), with programmatic stream serialization allowed.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, const OpInfo& op,
            Args&&... args) {
  cudaLaunchAttribute pdl{};
  pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl.val.programmaticStreamSerializationAllowed = 1;
  launch_as(use_pdl() ? &pdl : nullptr, kernel, grid, block, stream, op,
            std::forward<Args>(args)...);
}

/// Runs `f(stream)` as the operation `op` on `s` (the device current, the op recorded for fault
/// reports).
template <class F>
void run_on(CudaStream& s, const OpInfo& op, F&& f) {
  auto call = [](void* state, CUstream_st* stream) { (*static_cast<F*>(state))(stream); };
  s.run_user(call, static_cast<void*>(&f), op);
}

// ---- cuSPARSE -----------------------------------------------------------------------------------

void sparse_check(cusparseStatus_t st, const char* what, const OpInfo& op) {
  if (st != CUSPARSE_STATUS_SUCCESS) {
    throw Error(Errc::backend_failure,
                std::string("cuda: ") + what + " failed: " + cusparseGetErrorName(st) + " (" +
                    cusparseGetErrorString(st) + ")",
                op.where);
  }
}

/// A matrix's cuSPARSE descriptor and the SpMV buffer size it needs (queried on first use).
struct Prepared {
  cusparseSpMatDescr_t mat = nullptr;
  std::mutex mutex;
  bool sized = false;
  std::size_t buffer_bytes = 0;
  ~Prepared() {
    if (mat != nullptr) cusparseDestroySpMat(mat);
  }
};

/// out = A in (cuSPARSE on the stream's handle). CSR_ALG2: bit-wise deterministic, so that sync
/// and async solves (and repeated runs) agree exactly.
void spmv(CudaStream& s, Scratch& sc, const LaCsr& A, const double* in, double* out,
          const OpInfo& op) {
  if (A.nnz == 0) {  // cuSPARSE wants arrays to describe; the product is zero
    cuda_check(
        cudaMemsetAsync(out, 0, sizeof(double) * static_cast<std::size_t>(A.rows), s.handle()),
        "cudaMemsetAsync", op);
    return;
  }
  auto* prepared = static_cast<Prepared*>(const_cast<void*>(A.prepared));
  if (prepared == nullptr || prepared->mat == nullptr) {
    throw Error(Errc::invalid_state, "cuda: CSR matrix without a cuSPARSE descriptor", op.where);
  }
  cusparseHandle_t h = s.sparse();
  sparse_check(cusparseSetPointerMode(h, CUSPARSE_POINTER_MODE_HOST), "cusparseSetPointerMode", op);
  cusparseDnVecDescr_t vx = nullptr, vy = nullptr;
  sparse_check(cusparseCreateDnVec(&vx, A.cols, const_cast<double*>(in), CUDA_R_64F),
               "cusparseCreateDnVec", op);
  sparse_check(cusparseCreateDnVec(&vy, A.rows, out, CUDA_R_64F), "cusparseCreateDnVec", op);
  const double one = 1.0, zero = 0.0;
  try {
    std::size_t bytes = 0;
    {
      std::lock_guard lock(prepared->mutex);
      if (!prepared->sized) {
        sparse_check(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one,
                                             prepared->mat, vx, &zero, vy, CUDA_R_64F,
                                             CUSPARSE_SPMV_CSR_ALG2, &prepared->buffer_bytes),
                     "cusparseSpMV_bufferSize", op);
        prepared->sized = true;
      }
      bytes = prepared->buffer_bytes;
    }
    if (bytes > 0) ensure_spmv_buffer(s, sc, bytes, op);
    // One host thread at a time per matrix: cuSPARSE may keep analysis in the descriptor.
    std::lock_guard lock(prepared->mutex);
    sparse_check(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, prepared->mat, vx, &zero,
                              vy, CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG2, sc.spmv),
                 "cusparseSpMV", op);
  } catch (...) {
    cusparseDestroyDnVec(vx);
    cusparseDestroyDnVec(vy);
    throw;
  }
  cusparseDestroyDnVec(vx);
  cusparseDestroyDnVec(vy);
}

// ---- the interface ------------------------------------------------------------------------------

class CudaLaKernels final : public LaKernels {
 public:
  void vector(Stream& stream, const LaVecArgs& args, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la vector operation");
    run_on(s, op, [&](cudaStream_t st) {
      auto& sc = scratch_for(s, st, op);
      const unsigned grid = grid_for(vec_kernel, blocks_of(args.n), kBlock, false, s, sc, op);
      launch(vec_kernel, grid, kBlock, st, op, args);
      check_launch(op);
    });
  }

  void reduce(Stream& stream, const LaReduceArgs& args, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la reduction");
    run_on(s, op, [&](cudaStream_t st) {
      auto& sc = scratch_for(s, st, op);
      const Reducer red{sc.partials, sc.counter};
      const unsigned grid =
          grid_for(reduce_kernel, reduction_blocks(args.n, sc), kBlock, true, s, sc, op);
      launch(reduce_kernel, grid, kBlock, st, op, args, red);
      check_launch(op);
    });
  }

  void fused(Stream& stream, const LaFusedArgs& args, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la solver step");
    run_on(s, op, [&](cudaStream_t st) {
      auto& sc = scratch_for(s, st, op);
      const Reducer red{sc.partials, sc.counter};
      m::with_fused_op(args.op, [&](auto o) {
        constexpr LaFusedOp kOp = decltype(o)::value;
        auto* kernel = fused_kernel<kOp>;
        const bool sums = m::fused_sums(kOp) > 0;
        const unsigned grid =
            grid_for(kernel, sums ? reduction_blocks(args.n, sc) : blocks_of(args.n), kBlock, sums,
                     s, sc, op);
        launch(kernel, grid, kBlock, st, op, args, red);
      });
      check_launch(op);
    });
  }

  void matvec(Stream& stream, const LaMatvecArgs& args, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la matrix-vector product");
    const bool sums = m::matvec_sums(args.epilogue) > 0;
    if (args.A.is_stencil) {
      const bool cg_direction = is_cg_direction(args);
      const Tiles tiles = tiles_for(args.A.stencil, op, cg_direction);
      run_on(s, op, [&](cudaStream_t stream_) {
        auto& sc = scratch_for(s, stream_, op);
        const Reducer red{sc.partials, sc.counter};
        auto with_kernel = [&](auto&& fn) {
          if (!cg_direction) return with_stencil_kernel(args, sums, fn);
          return m::with_stencil_kind(args.A.stencil.kind, [&](auto kind) {
            return fn(cg_direction_kernel<decltype(kind)::value>);
          });
        };
        with_kernel([&](auto* kernel) {
          const unsigned grid =
              cg_direction ? cg_direction_grid(args.A.stencil, tiles, s, sc, op)
                           : grid_for(kernel, tiles.count, kStencilThreads, sums, s, sc, op);
          launch(kernel, grid, dim3(tiles.width, kStencilThreads / tiles.width), stream_, op, args,
                 red, tiles);
        });
        check_launch(op);
      });
      return;
    }
    const auto& A = args.A.csr;
    const auto n = static_cast<std::size_t>(A.rows);
    const bool identity_right = args.right.v == nullptr && args.right.c == 1.0;
    const bool direct_input =
        identity_right && args.x2 == nullptr && args.x_out == nullptr && args.x_scale == 1.0;
    const bool plain = args.epilogue == LaEpilogue::store && direct_input &&
                       args.left.v == nullptr && args.left.c == 1.0 && args.sums.state == nullptr;
    run_on(s, op, [&](cudaStream_t st) {
      auto& sc = scratch_for(s, st, op);
      const Reducer red{sc.partials, sc.counter};
      if (plain) {  // y = A x: cuSPARSE straight into y
        spmv(s, sc, A, args.x, args.y, op);
        return;
      }
      ensure_temps(s, sc, std::max<std::size_t>(n, static_cast<std::size_t>(A.cols)), op);
      const double* in = args.x;
      if (!direct_input) {
        const auto cols = static_cast<std::size_t>(A.cols);
        const unsigned grid = grid_for(input_kernel, blocks_of(cols), kBlock, false, s, sc, op);
        launch(input_kernel, grid, kBlock, st, op, args, sc.temp[0], cols);
        check_launch(op);
        in = sc.temp[0];
      }
      spmv(s, sc, A, in, sc.temp[1], op);
      auto* kernel = sums ? csr_epilogue_kernel<1> : csr_epilogue_kernel<0>;
      const unsigned grid =
          grid_for(kernel, sums ? reduction_blocks(n, sc) : blocks_of(n), kBlock, sums, s, sc, op);
      launch(kernel, grid, kBlock, st, op, args, sc.temp[1], red);
      check_launch(op);
    });
  }

  void cg_block(Stream& stream, const LaCgBlockArgs& args, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la CG iterations");
    if (args.iterations <= 0) return;
    if (!fits_cg_block(args) || !cooperative(s.device(), op)) {
      LaKernels::cg_block(stream, args, op);
      return;
    }
    const LaStencil& stencil = args.direction.A.stencil;
    CgBlockShape shape;
    shape.tiles = tiles_for(stencil, op, true);
    shape.chunks = blocks_of(args.update.n);
    run_on(s, op, [&](cudaStream_t st) {
      auto& sc = scratch_for(s, st, op);
      m::with_stencil_kind(stencil.kind, [&](auto kind) {
        constexpr LaStencilKind kKind = decltype(kind)::value;
        shape.dir_blocks = cg_direction_grid(stencil, shape.tiles, s, sc, op);
        shape.upd_blocks = grid_for(fused_kernel<LaFusedOp::cg_update>,
                                    reduction_blocks(args.update.n, sc), kBlock, true, s, sc, op);
        const unsigned init_grid =
            args.initial == nullptr
                ? 0u
                : grid_for(fused_kernel<LaFusedOp::cg_init>, reduction_blocks(args.init.n, sc),
                           kBlock, true, s, sc, op);
        // Small problems: one block or cluster with the vectors on chip (cg_small.cu).
        if (cg_small_block(args, small_steps(shape, init_grid), s.device(), st, op)) return;
        if (args.initial != nullptr) {  // the set-up first, as set_state and fused issue it
          launch(set_state_kernel, 1, 32, st, op, *args.initial, args.direction.sums.state);
          launch(fused_kernel<LaFusedOp::cg_init>, init_grid, kBlock, st, op, args.init,
                 Reducer{sc.partials, sc.counter});
        }
        auto* kernel = cg_block_kernel<kKind>;
        // Resident at once (a cooperative launch must be), and no more than the steps' grids
        // need: a block past them would only wait at the barriers. It hosts every block of the
        // direction product: cg_direction_grid caps that at this kernel's residency.
        // (Any grid gives the same sums: blocks loop over the steps' blocks. Fewer blocks do
        // not make a small solve faster: on an H100, CG at 64^2 took 5.7 us per iteration with
        // 8 to 128 blocks, more with fewer; the two step ends cost that, not the work.)
        const unsigned grid =
            grid_for(kernel, std::max<std::size_t>(shape.dir_blocks, (shape.upd_blocks + 1) / 2),
                     kStencilThreads, false, s, sc, op);
        cudaLaunchAttribute cooperative{};
        cooperative.id = cudaLaunchAttributeCooperative;
        cooperative.val.cooperative = 1;
        launch_as(&cooperative, kernel, grid,
                  dim3(shape.tiles.width, kStencilThreads / shape.tiles.width), st, op, args,
                  sc.partials, shape);
      });
      check_launch(op);
    });
  }

  void tf_block(Stream& stream, const LaTfBlockArgs& args, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la TFQMR iterations");
    bool small = false;
    if (args.iterations > 0 && args.residual.A.is_stencil && args.v.A.is_stencil) {
      // Small problems: one block with the vectors on chip (tf_small.cu), given the shapes the
      // five operations launched one by one would take.
      run_on(s, op, [&](cudaStream_t st) {
        auto& sc = scratch_for(s, st, op);
        const Tiles tiles = tiles_for(args.residual.A.stencil, op);
        TfSmallSteps steps;
        steps.tile_width = tiles.width;
        steps.tile_height = tiles.height;
        steps.tiles_x = tiles.tx;
        steps.tiles_y = tiles.ty;
        steps.tiles = tiles.count;
        with_stencil_kernel(args.residual, true, [&](auto* kernel) {
          steps.residual_blocks = grid_for(kernel, tiles.count, kStencilThreads, true, s, sc, op);
        });
        with_stencil_kernel(args.v, true, [&](auto* kernel) {
          steps.v_blocks = grid_for(kernel, tiles.count, kStencilThreads, true, s, sc, op);
        });
        steps.dx_blocks = grid_for(fused_kernel<LaFusedOp::tf_dx>, reduction_blocks(args.dx.n, sc),
                                   kBlock, true, s, sc, op);
        steps.chunks = blocks_of(args.dx.n);
        small = tiles.depth == 1 && tf_small_block(args, steps, s.device(), st, op);
      });
    }
    if (!small) LaKernels::tf_block(stream, args, op);
  }

  void set_state(Stream& stream, LaKspState* dst, const LaKspState& value,
                 const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la solver state");
    run_on(s, op, [&](cudaStream_t st) {
      launch(set_state_kernel, 1, 32, st, op, value, dst);
      check_launch(op);
    });
  }

  void running(Stream& stream, const LaKspState* state, std::int32_t* flag, LaKspState* mirror,
               const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la solver running flag");
    run_on(s, op, [&](cudaStream_t st) {
      launch(running_kernel, 1, 32, st, op, state, flag, mirror);
      check_launch(op);
    });
  }

  void diagonal(Stream& stream, const LaOperator& A, double* out, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la diagonal");
    const auto n = static_cast<std::size_t>(
        A.is_stencil ? A.stencil.nx * A.stencil.ny * A.stencil.nz : A.csr.rows);
    run_on(s, op, [&](cudaStream_t st) {
      auto& sc = scratch_for(s, st, op);
      const unsigned grid = grid_for(diagonal_kernel, blocks_of(n), kBlock, false, s, sc, op);
      launch(diagonal_kernel, grid, kBlock, st, op, A, out, n);
      check_launch(op);
    });
  }

  std::shared_ptr<void> prepare(const LaCsr& csr) override {
    auto p = std::make_shared<Prepared>();
    if (csr.nnz == 0) return p;
    const OpInfo op{0, "cusparseCreateCsr", std::source_location::current()};
    sparse_check(cusparseCreateCsr(
                     &p->mat, csr.rows, csr.cols, csr.nnz, const_cast<std::int32_t*>(csr.row_ptr),
                     const_cast<std::int32_t*>(csr.col), const_cast<double*>(csr.val),
                     CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F),
                 "cusparseCreateCsr", op);
    return p;
  }
};

}  // namespace

LaKernels& la_kernels() {
  static CudaLaKernels kernels;
  return kernels;
}

}  // namespace sluice::detail::cuda
