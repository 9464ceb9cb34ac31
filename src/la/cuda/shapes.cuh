#pragma once
// The la kernels' constants (block sizes, the occupancies they are compiled for) and the
// per-context scratch: reduction partials, tickets and temporaries.
// Part of one translation unit: src/la/cuda/la_kernels.cu includes it (and says how the
// kernels work).

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
#include "backends/cuda/cuda_release.hpp"
#include "backends/cuda/cuda_stream.hpp"
#include "core/context_impl.hpp"
#include "la/cuda/cg_small.hpp"
#include "la/cuda/fast_div.hpp"
#include "la/cuda/la_kernels.hpp"
#include "la/cuda/tf_small.hpp"
#include "la/cuda/tile_walk.hpp"
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
    // cudaFree waits for the whole device: not while a HostAccessor's gate holds work back.
    sluice::detail::cuda::release_device_wide([p = ptr, dev = device] {
      int current = 0;
      const bool switched = cudaGetDevice(&current) == cudaSuccess && current != dev &&
                            cudaSetDevice(dev) == cudaSuccess;
      if (cudaFree(p) != cudaSuccess) (void)cudaGetLastError();  // a broken context only leaks
      if (switched) (void)cudaSetDevice(current);
    });
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

}  // namespace
}  // namespace sluice::detail::cuda
