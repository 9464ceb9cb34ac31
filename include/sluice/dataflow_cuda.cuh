#pragma once
/// @file
/// Opt-in header for nvcc users: include it (instead of, and before, <sluice/dataflow.hpp>) in a
/// file compiled by nvcc with `--extended-lambda`, and the kernels named in that file also run
/// on cuda devices, each compiled as a CUDA kernel and launched as one operation of the queue's
/// context. Kernel lambdas must be `__host__ __device__` (`[=] SLUICE_KERNEL (...)`), so the same
/// kernel still runs on the host backend.
///
/// Mapping: a range kernel is a grid-stride 1D grid of 256-thread blocks; an nd_range kernel is
/// one block per work-group, SYCL dimension D-1 on x (the fastest), D-2 on y, 0 on z for 3D;
/// local_accessor memory is dynamic shared memory; reductions combine per warp, then atomically.

#if !defined(__CUDACC__)
#error "<sluice/dataflow_cuda.cuh> is for nvcc; plain C++ includes <sluice/dataflow.hpp>"
#endif
#if defined(SLUICE_DATAFLOW_HANDLER_HPP) && !defined(SLUICE_DATAFLOW_CUDA)
#error "include <sluice/dataflow_cuda.cuh> before any other sluice/dataflow header"
#endif
#define SLUICE_DATAFLOW_CUDA 1

#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "sluice/dataflow.hpp"

namespace sluice::dataflow::detail {

constexpr unsigned kRangeBlock = 256;

template <class F>
__global__ void single_kernel(F f) {
  f();
}

template <int D, class F>
__global__ void range_kernel(RangeTask<D, F> t, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    t.f(item<D>(delinearize<D>(i, t.r), t.r));
  }
}

/// `*out = op(*out, v)` atomically (a compare-and-swap loop: any 4- or 8-byte T).
template <class T, class Op>
__device__ void atomic_combine(T* out, T v) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "device reductions need a 4- or 8-byte type");
  using Word = std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>;
  Word* addr = reinterpret_cast<Word*>(out);
  Word seen = *addr, assumed;
  do {
    assumed = seen;
    T cur;
    memcpy(&cur, &assumed, sizeof(T));
    const T next = Op{}(cur, v);
    Word w;
    memcpy(&w, &next, sizeof(T));
    seen = atomicCAS(addr, assumed, w);
  } while (seen != assumed);
}

template <class T>
__global__ void set_value_kernel(T* out, T v) {
  *out = v;
}

template <int D, class F, class T, class Op>
__global__ void reduce_kernel(ReduceTask<D, F, T, Op> t, std::size_t n) {
  static_assert(std::is_arithmetic_v<T>, "device reductions need an arithmetic type");
  Reducer<T, Op> red(t.identity);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    t.f(item<D>(delinearize<D>(i, t.r), t.r), red);
  }
  T v = red.partial();
  for (int off = 16; off > 0; off /= 2) v = Op{}(v, __shfl_down_sync(0xffffffffu, v, off));
  if ((threadIdx.x & 31u) == 0) atomic_combine<T, Op>(t.out, v);
}

template <int D>
__device__ inline nd_item<D> this_nd_item(const nd_range<D>& r) {
  id<D> g, l;
  g[D - 1] = blockIdx.x;
  l[D - 1] = threadIdx.x;
  if constexpr (D >= 2) {
    g[D - 2] = blockIdx.y;
    l[D - 2] = threadIdx.y;
  }
  if constexpr (D == 3) {
    g[0] = blockIdx.z;
    l[0] = threadIdx.z;
  }
  return nd_item<D>(g, l, r.get_group_range(), r.local);
}

template <int D, class F>
__global__ void nd_kernel(NdTask<D, F> t) {
  t.f(this_nd_item<D>(t.r));
}

template <int D, class F, class T, class Op>
__global__ void nd_reduce_kernel(NdReduceTask<D, F, T, Op> t) {
  static_assert(std::is_arithmetic_v<T>, "device reductions need an arithmetic type");
  Reducer<T, Op> red(t.identity);
  t.f(this_nd_item<D>(t.r), red);
  // Per warp, then one compare-and-swap per warp. A group's size need not be a multiple of 32:
  // the last warp shuffles among the lanes it has (threads are numbered x fastest).
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  const unsigned linear = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned lane = linear & 31u;
  const unsigned lanes = threads - (linear & ~31u) < 32u ? threads - (linear & ~31u) : 32u;
  const unsigned mask = lanes == 32u ? 0xffffffffu : (1u << lanes) - 1u;
  T v = red.partial();
  for (unsigned off = 16; off > 0; off /= 2) {
    const T other = __shfl_down_sync(mask, v, off);
    if (lane + off < lanes) v = Op{}(v, other);
  }
  if (lane == 0) atomic_combine<T, Op>(t.out, v);
}

inline unsigned range_blocks(std::size_t n) {
  const std::size_t b = (n + kRangeBlock - 1) / kRangeBlock;
  return static_cast<unsigned>(b < (1u << 20) ? b : (1u << 20));
}

template <class F>
const char* launch_task(const SingleTask<F>& t, cudaStream_t s, std::size_t) {
  single_kernel<<<1, 1, 0, s>>>(t.f);
  return nullptr;
}

template <int D, class F>
const char* launch_task(const RangeTask<D, F>& t, cudaStream_t s, std::size_t) {
  const std::size_t n = t.r.size();
  range_kernel<D, F><<<range_blocks(n), kRangeBlock, 0, s>>>(t, n);
  return nullptr;
}

template <int D, class F, class T, class Op>
const char* launch_task(const ReduceTask<D, F, T, Op>& t, cudaStream_t s, std::size_t) {
  if (t.initialize_to_identity) set_value_kernel<T><<<1, 1, 0, s>>>(t.out, t.identity);
  const std::size_t n = t.r.size();
  if (n != 0) reduce_kernel<D, F, T, Op><<<range_blocks(n), kRangeBlock, 0, s>>>(t, n);
  return nullptr;
}

/// The grid and blocks of an nd_range (dimension D-1 on x), or why it does not fit a cuda grid.
template <int D>
const char* nd_shape(const nd_range<D>& r, dim3& grid, dim3& block) {
  const range<D> groups = r.get_group_range();
  grid = dim3(1, 1, 1);
  block = dim3(1, 1, 1);
  grid.x = static_cast<unsigned>(groups[D - 1]);
  block.x = static_cast<unsigned>(r.local[D - 1]);
  if constexpr (D >= 2) {
    grid.y = static_cast<unsigned>(groups[D - 2]);
    block.y = static_cast<unsigned>(r.local[D - 2]);
  }
  if constexpr (D == 3) {
    grid.z = static_cast<unsigned>(groups[0]);
    block.z = static_cast<unsigned>(r.local[0]);
  }
  if (groups[D - 1] > 0x7fffffffu || (D >= 2 && groups[D > 1 ? D - 2 : 0] > 65535u) ||
      (D == 3 && groups[0] > 65535u)) {
    return "too many work-groups for a cuda grid";
  }
  return nullptr;
}

/// Launches `kernel(t)` over nd_range `r` with `local_bytes` of dynamic shared memory.
template <int D, class Task>
const char* launch_nd(void (*kernel)(Task), const Task& t, const nd_range<D>& r, cudaStream_t s,
                      std::size_t local_bytes) {
  dim3 grid, block;
  if (const char* why = nd_shape(r, grid, block)) return why;
  if (r.get_group_range().size() == 0) return nullptr;
  if (local_bytes > 48 * 1024) {
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(local_bytes)) != cudaSuccess) {
      return cudaGetErrorName(cudaGetLastError());
    }
  }
  kernel<<<grid, block, local_bytes, s>>>(t);
  return nullptr;
}

template <int D, class F>
const char* launch_task(const NdTask<D, F>& t, cudaStream_t s, std::size_t local_bytes) {
  return launch_nd(nd_kernel<D, F>, t, t.r, s, local_bytes);
}

template <int D, class F, class T, class Op>
const char* launch_task(const NdReduceTask<D, F, T, Op>& t, cudaStream_t s,
                        std::size_t local_bytes) {
  if (t.initialize_to_identity) set_value_kernel<T><<<1, 1, 0, s>>>(t.out, t.identity);
  return launch_nd(nd_reduce_kernel<D, F, T, Op>, t, t.r, s, local_bytes);
}

template <class Task>
const char* cuda_launch(void* stream, const void* task, std::size_t local_bytes) {
  if (const char* why = launch_task(*static_cast<const Task*>(task),
                                    static_cast<cudaStream_t>(stream), local_bytes)) {
    return why;
  }
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorName(err);
}

}  // namespace sluice::dataflow::detail
