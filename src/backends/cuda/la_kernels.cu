// The cuda backend's la kernels (see la_kernels.hpp). What one element computes comes from
// src/la/kernel_math.hpp and the solvers' scalar logic from src/la/ksp_logic.hpp, shared with the
// host backend; this file holds the launch shapes and the reductions.
//
// Built with --fmad=false: the solver logic runs here in async mode and on the host in sync
// mode, and the two must round alike (the host never contracts a*b+c either).
//
// Reductions are deterministic: a block's threads accumulate in a fixed order, blocks combine
// through shuffles in a fixed shape, and the last block (found with an atomic ticket) adds the
// blocks' partials in block order. The launch shape depends only on the length and the device,
// so a result is the same on every run.

#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_stream.hpp"
#include "backends/cuda/la_kernels.hpp"
#include "la/kernel_math.hpp"
#include "la/ksp_logic.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::cuda {
namespace {

namespace m = la_math;
namespace logic = ksp_logic;

constexpr int kBlock = 256;         // threads of a 1D block
constexpr int kStencilBlock = 128;  // threads of a stencil block (BX x BY)
constexpr int kMaxBlocks = 2048;    // blocks of a reduction: the partials buffer holds this many

// ---- per-stream scratch ------------------------------------------------------------------------

/// Reduction partials and a ticket counter per stream (kernels of one stream run one at a time,
/// so they share it), plus temporaries for the cuSPARSE path.
struct Scratch {
  double* partials = nullptr;
  unsigned int* counter = nullptr;
  double* temp[2] = {nullptr, nullptr};
  std::size_t temp_size = 0;  // doubles in each temp
  void* spmv = nullptr;
  std::size_t spmv_size = 0;
  int sms = 0;
};

std::mutex g_scratch_mutex;
std::unordered_map<const CudaStream*, Scratch>* g_scratch = nullptr;  // never destroyed

void cuda_check(cudaError_t err, const char* what, const OpInfo& op) {
  check(err, what, op.where);
}

Scratch& scratch_for(CudaStream& s, const OpInfo& op) {
  std::lock_guard lock(g_scratch_mutex);
  if (g_scratch == nullptr) g_scratch = new std::unordered_map<const CudaStream*, Scratch>;
  auto& sc = (*g_scratch)[&s];
  if (sc.partials == nullptr) {
    cuda_check(cudaDeviceGetAttribute(&sc.sms, cudaDevAttrMultiProcessorCount, s.device()),
               "cudaDeviceGetAttribute", op);
    cuda_check(cudaMalloc(&sc.partials, sizeof(double) * 3 * kMaxBlocks), "cudaMalloc", op);
    cuda_check(cudaMalloc(&sc.counter, sizeof(unsigned int)), "cudaMalloc", op);
    cuda_check(cudaMemsetAsync(sc.counter, 0, sizeof(unsigned int), s.handle()), "cudaMemsetAsync",
               op);
  }
  return sc;
}

int sms_of(CudaStream& s, const OpInfo& op) {
  {
    std::lock_guard lock(g_scratch_mutex);
    if (g_scratch != nullptr) {
      auto it = g_scratch->find(&s);
      if (it != g_scratch->end() && it->second.sms > 0) return it->second.sms;
    }
  }
  int sms = 0;
  cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, s.device()),
             "cudaDeviceGetAttribute", op);
  return std::max(1, sms);
}

/// Grows the stream's temporaries to n doubles each (waits for the stream first: rare).
void ensure_temps(CudaStream& s, Scratch& sc, std::size_t n, const OpInfo& op) {
  if (sc.temp_size >= n) return;
  cuda_check(cudaStreamSynchronize(s.handle()), "cudaStreamSynchronize", op);
  for (auto*& t : sc.temp) {
    if (t != nullptr) cudaFree(t);
    t = nullptr;
  }
  sc.temp_size = 0;
  for (auto*& t : sc.temp) cuda_check(cudaMalloc(&t, sizeof(double) * n), "cudaMalloc", op);
  sc.temp_size = n;
}

void ensure_spmv_buffer(CudaStream& s, Scratch& sc, std::size_t bytes, const OpInfo& op) {
  if (sc.spmv_size >= bytes) return;
  cuda_check(cudaStreamSynchronize(s.handle()), "cudaStreamSynchronize", op);
  if (sc.spmv != nullptr) cudaFree(sc.spmv);
  sc.spmv = nullptr;
  sc.spmv_size = 0;
  cuda_check(cudaMalloc(&sc.spmv, bytes), "cudaMalloc", op);
  sc.spmv_size = bytes;
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
__device__ void block_combine(m::Combine c, const double (&acc)[NS], double (&out)[NS], int t,
                              int threads) {
  __shared__ double warps[32][NS];
  const int lane = t % 32, warp = t / 32, nwarps = threads / 32;
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

/// Ends a reduction of NS sums: block partials, then the last block combines them in block
/// order and calls `finish(total)` in one thread.
template <int NS, class Finish>
__device__ void reduce_and_finish(m::Combine c, const double (&acc)[NS], const Reducer& red,
                                  int block, int blocks, Finish&& finish) {
  const int t = threadIdx.x + threadIdx.y * blockDim.x;
  const int threads = blockDim.x * blockDim.y;
  __shared__ bool last;
  double mine[NS];
  block_combine<NS>(c, acc, mine, t, threads);
  if (t == 0) {
    for (int k = 0; k < NS; ++k) red.partials[block * NS + k] = mine[k];
    __threadfence();
    last = atomicAdd(red.counter, 1u) == static_cast<unsigned>(blocks - 1);
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  double part[NS];
  for (int k = 0; k < NS; ++k) part[k] = m::identity_of(c);
  for (int b = t; b < blocks; b += threads) {
    for (int k = 0; k < NS; ++k)
      part[k] = m::combine(c, part[k], __ldcg(&red.partials[b * NS + k]));
  }
  double total[NS];
  block_combine<NS>(c, part, total, t, threads);
  if (t == 0) {
    finish(total);
    *red.counter = 0;
  }
}

/// Stores and finalizes a solver step's sums.
template <int NS>
__device__ void finish_sums(const LaSums& sums, const double (&total)[NS]) {
  if (sums.out != nullptr) {
    for (int k = 0; k < NS; ++k) sums.out[k] = total[k];
  }
  if (sums.state != nullptr) {
    double s[m::kMaxSums] = {0, 0, 0};
    for (int k = 0; k < NS; ++k) s[k] = total[k];
    logic::finalize(sums.finalize, *sums.state, s);
  }
}

// ---- kernels -----------------------------------------------------------------------------------

__global__ void __launch_bounds__(kBlock) vec_kernel(LaVecArgs a) {
  const double alpha = m::value(a.alpha);
  const double beta = m::value(a.beta);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride) {
    m::vec_elem(a, alpha, beta, i);
  }
}

__global__ void __launch_bounds__(kBlock) reduce_kernel(LaReduceArgs a, Reducer red) {
  const auto c = m::combine_of(a.op);
  double acc[1] = {m::identity_of(c)};
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += stride) {
    acc[0] = m::combine(c, acc[0], m::reduce_elem(a, i));
  }
  reduce_and_finish<1>(c, acc, red, blockIdx.x, gridDim.x, [&](const double(&total)[1]) {
    *a.out = m::reduce_result(a, total[0], a.n);
  });
}

template <int NS>
__global__ void __launch_bounds__(kBlock) fused_kernel(LaFusedArgs f, Reducer red) {
  const LaKspState* st = f.sums.state;
  if (!logic::guard_runs(st, f.op == LaFusedOp::tf_dx)) return;
  const int steps = logic::tf_steps(st, f.steps);
  double s[4];
  for (int k = 0; k < 4; ++k) s[k] = m::value(f.s[k]);
  double acc[m::kMaxSums] = {0, 0, 0};
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < f.n; i += stride) {
    m::fused_elem(f, s, steps, i, acc);
  }
  if constexpr (NS > 0) {
    double mine[NS];
    for (int k = 0; k < NS; ++k) mine[k] = acc[k];
    reduce_and_finish<NS>(m::Combine::sum, mine, red, blockIdx.x, gridDim.x,
                          [&](const double(&total)[NS]) { finish_sums<NS>(f.sums, total); });
  }
}

/// How a stencil product is laid out: threads of a block tile x (and y in 3D); each thread then
/// marches along the slowest dimension (z in 3D, y in 2D) through its block's chunk, so that the
/// neighbours in that direction come from its own previous and next steps (L1) and every point
/// is read from memory about once. Warps read consecutive x: coalesced.
struct StencilShape {
  std::int64_t nt = 1;     // extent of the tiled second dimension (ny in 3D, 1 in 2D)
  std::int64_t nm = 1;     // extent of the marching dimension (nz in 3D, ny in 2D)
  std::int64_t chunk = 1;  // marching steps per block
};

template <int NS>
__global__ void __launch_bounds__(kStencilBlock)
    stencil_kernel(LaMatvecArgs mv, Reducer red, StencilShape shape) {
  if (!logic::guard_runs(mv.sums.state, false)) return;
  const LaStencil& s = mv.A.stencil;
  const bool three = s.kind == LaStencilKind::d3p7 || s.kind == LaStencilKind::d3p27;
  const double a = m::value(mv.a);
  const auto in = m::input_of(mv);
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.z) * shape.chunk;
  const std::int64_t m1 = m0 + shape.chunk < shape.nm ? m0 + shape.chunk : shape.nm;
  double acc = 0;
  for (std::int64_t it = static_cast<std::int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
       it < shape.nt; it += static_cast<std::int64_t>(gridDim.y) * blockDim.y) {
    for (std::int64_t ix = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
         ix < s.nx; ix += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
      for (std::int64_t im = m0; im < m1; ++im) {
        const std::int64_t i = ix + s.nx * (it + shape.nt * im);
        const double v =
            three ? m::stencil_row(s, in, ix, it, im, i) : m::stencil_row(s, in, ix, im, 0, i);
        acc += m::finish_row(mv, in, v, a, static_cast<std::size_t>(i));
      }
    }
  }
  if constexpr (NS > 0) {
    const double mine[1] = {acc};
    const int block =
        static_cast<int>(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
    reduce_and_finish<1>(m::Combine::sum, mine, red, block,
                         static_cast<int>(gridDim.x * gridDim.y * gridDim.z),
                         [&](const double(&total)[1]) { finish_sums<1>(mv.sums, total); });
  }
}

/// The epilogue of a CSR product whose rows `v` cuSPARSE computed.
template <int NS>
__global__ void __launch_bounds__(kBlock)
    csr_epilogue_kernel(LaMatvecArgs mv, const double* v, Reducer red) {
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
    reduce_and_finish<1>(m::Combine::sum, mine, red, blockIdx.x, gridDim.x,
                         [&](const double(&total)[1]) { finish_sums<1>(mv.sums, total); });
  }
}

/// The input of a CSR product that cuSPARSE cannot form itself: out = right .* (x + s x2), and
/// x_out = x + s x2 where asked.
__global__ void __launch_bounds__(kBlock)
    input_kernel(LaMatvecArgs mv, double* out, std::size_t n) {
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

unsigned elementwise_blocks(std::size_t n, const Scratch& sc) {
  const std::size_t want = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(
      std::clamp<std::size_t>(want, 1, static_cast<std::size_t>(sc.sms) * 16));
}

unsigned reduction_blocks(std::size_t n, const Scratch& sc) {
  const std::size_t want = (n + kBlock - 1) / kBlock;
  const std::size_t cap = std::min<std::size_t>(kMaxBlocks, static_cast<std::size_t>(sc.sms) * 8);
  return static_cast<unsigned>(std::clamp<std::size_t>(want, 1, cap));
}

void check_launch(const OpInfo& op) {
  cuda_check(cudaGetLastError(), "kernel launch", op);
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
      auto& sc = scratch_for(s, op);
      vec_kernel<<<elementwise_blocks(args.n, sc), kBlock, 0, st>>>(args);
      check_launch(op);
    });
  }

  void reduce(Stream& stream, const LaReduceArgs& args, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la reduction");
    run_on(s, op, [&](cudaStream_t st) {
      auto& sc = scratch_for(s, op);
      const Reducer red{sc.partials, sc.counter};
      reduce_kernel<<<reduction_blocks(args.n, sc), kBlock, 0, st>>>(args, red);
      check_launch(op);
    });
  }

  void fused(Stream& stream, const LaFusedArgs& args, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la solver step");
    const int ns = m::fused_sums(args.op);
    run_on(s, op, [&](cudaStream_t st) {
      auto& sc = scratch_for(s, op);
      const Reducer red{sc.partials, sc.counter};
      switch (ns) {
        case 0:
          fused_kernel<0><<<elementwise_blocks(args.n, sc), kBlock, 0, st>>>(args, red);
          break;
        case 1:
          fused_kernel<1><<<reduction_blocks(args.n, sc), kBlock, 0, st>>>(args, red);
          break;
        case 2:
          fused_kernel<2><<<reduction_blocks(args.n, sc), kBlock, 0, st>>>(args, red);
          break;
        default:
          fused_kernel<3><<<reduction_blocks(args.n, sc), kBlock, 0, st>>>(args, red);
          break;
      }
      check_launch(op);
    });
  }

  void matvec(Stream& stream, const LaMatvecArgs& args, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la matrix-vector product");
    const bool sums = m::matvec_sums(args.epilogue) > 0;
    if (args.A.is_stencil) {
      const auto& st = args.A.stencil;
      const bool three = st.kind == LaStencilKind::d3p7 || st.kind == LaStencilKind::d3p27;
      StencilShape shape;
      shape.nt = three ? st.ny : 1;
      shape.nm = three ? st.nz : st.ny;
      // 3D tiles are 64 x 2 at most, so that half of the y neighbours come from the block itself.
      const std::int64_t bx =
          std::min<std::int64_t>(three ? kStencilBlock / 2 : kStencilBlock, (st.nx + 31) / 32 * 32);
      const std::int64_t by = three ? kStencilBlock / bx : 1;
      const std::int64_t target = std::min(kMaxBlocks, sms_of(s, op) * 8);
      const std::int64_t gx = std::clamp<std::int64_t>((st.nx + bx - 1) / bx, 1, target);
      const std::int64_t gt = std::clamp<std::int64_t>((shape.nt + by - 1) / by, 1,
                                                       std::max<std::int64_t>(1, target / gx));
      const std::int64_t gm = std::clamp<std::int64_t>(target / (gx * gt), 1, shape.nm);
      shape.chunk = (shape.nm + gm - 1) / gm;
      const std::int64_t chunks = (shape.nm + shape.chunk - 1) / shape.chunk;
      const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gt),
                      static_cast<unsigned>(chunks));
      const dim3 block(static_cast<unsigned>(bx), static_cast<unsigned>(by));
      run_on(s, op, [&](cudaStream_t stream_) {
        auto& sc = scratch_for(s, op);
        const Reducer red{sc.partials, sc.counter};
        if (sums) {
          stencil_kernel<1><<<grid, block, 0, stream_>>>(args, red, shape);
        } else {
          stencil_kernel<0><<<grid, block, 0, stream_>>>(args, red, shape);
        }
        check_launch(op);
      });
      return;
    }
    const auto& A = args.A.csr;
    const auto n = static_cast<std::size_t>(A.rows);
    const bool identity_right = args.right.v == nullptr && args.right.c == 1.0;
    const bool direct_input = identity_right && args.x2 == nullptr && args.x_out == nullptr;
    const bool plain = args.epilogue == LaEpilogue::store && direct_input &&
                       args.left.v == nullptr && args.left.c == 1.0 && args.sums.state == nullptr;
    run_on(s, op, [&](cudaStream_t st) {
      auto& sc = scratch_for(s, op);
      const Reducer red{sc.partials, sc.counter};
      if (plain) {  // y = A x: cuSPARSE straight into y
        spmv(s, sc, A, args.x, args.y, op);
        return;
      }
      ensure_temps(s, sc, std::max<std::size_t>(n, static_cast<std::size_t>(A.cols)), op);
      const double* in = args.x;
      if (!direct_input) {
        input_kernel<<<elementwise_blocks(static_cast<std::size_t>(A.cols), sc), kBlock, 0, st>>>(
            args, sc.temp[0], static_cast<std::size_t>(A.cols));
        check_launch(op);
        in = sc.temp[0];
      }
      spmv(s, sc, A, in, sc.temp[1], op);
      if (sums) {
        csr_epilogue_kernel<1><<<reduction_blocks(n, sc), kBlock, 0, st>>>(args, sc.temp[1], red);
      } else {
        csr_epilogue_kernel<0><<<elementwise_blocks(n, sc), kBlock, 0, st>>>(args, sc.temp[1], red);
      }
      check_launch(op);
    });
  }

  void diagonal(Stream& stream, const LaOperator& A, double* out, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la diagonal");
    const auto n = static_cast<std::size_t>(
        A.is_stencil ? A.stencil.nx * A.stencil.ny * A.stencil.nz : A.csr.rows);
    run_on(s, op, [&](cudaStream_t st) {
      auto& sc = scratch_for(s, op);
      diagonal_kernel<<<elementwise_blocks(n, sc), kBlock, 0, st>>>(A, out, n);
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
