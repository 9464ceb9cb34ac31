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
/// local_accessor memory is dynamic shared memory; group algorithms are warp shuffles and a few
/// bytes of static shared memory; reductions leave one partial result per block (a work-group of
/// an nd_range kernel; at most 1024 blocks of a range kernel) in stream-ordered scratch memory,
/// which a second one-block kernel combines in order, so results do not depend on timing.

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
#include <utility>

#include "sluice/dataflow.hpp"

namespace sluice::dataflow::detail {

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

/// Each reduction's block result (a work-group reduction of the threads' partial results) into
/// its partial array at index `slot`.
template <class Reducers, class... R, std::size_t... I>
__device__ void store_partials(const Pack<R...>& reds, const Reducers& red, unsigned char* scratch,
                               std::size_t blocks, std::size_t slot, std::index_sequence<I...>) {
  auto one = [&](auto index) {
    constexpr std::size_t k = decltype(index)::value;
    const auto& reduction = pack_get<k>(reds);
    using T = typename std::remove_cvref_t<decltype(reduction)>::value_type;
    const T v = block_reduce(pack_get<k>(red).partial(), reduction.op);
    if (block_linear_id() == 0) {
      reinterpret_cast<T*>(scratch + partials_offset<k, R...>(blocks))[slot] = v;
    }
  };
  (one(std::integral_constant<std::size_t, I>{}), ...);
}

/// One block: every reduction's partial results combined in order (thread t takes t, t + 256,
/// ..., then the block's tree), then with the destination's value unless it starts from the
/// identity.
template <class... R, std::size_t... I>
__device__ void finish_partials(const Pack<R...>& reds, const unsigned char* scratch,
                                std::size_t blocks, std::index_sequence<I...>) {
  auto one = [&](auto index) {
    constexpr std::size_t k = decltype(index)::value;
    const auto& reduction = pack_get<k>(reds);
    using T = typename std::remove_cvref_t<decltype(reduction)>::value_type;
    const T* part = reinterpret_cast<const T*>(scratch + partials_offset<k, R...>(blocks));
    T acc = reduction.identity;
    for (std::size_t b = threadIdx.x; b < blocks; b += blockDim.x) {
      acc = apply_op(reduction.op, acc, part[b]);
    }
    acc = block_reduce(acc, reduction.op);
    if (threadIdx.x == 0) {
      const T start = reduction.initialize_to_identity ? reduction.identity : *reduction.out;
      *reduction.out = apply_op(reduction.op, start, acc);
    }
  };
  (one(std::integral_constant<std::size_t, I>{}), ...);
}

template <class... R>
__global__ void finish_kernel(Pack<R...> reds, const unsigned char* scratch, std::size_t blocks) {
  finish_partials(reds, scratch, blocks, std::index_sequence_for<R...>{});
}

template <int D, class F, class... R>
__global__ void reduce_kernel(ReduceTask<D, F, R...> t, std::size_t n, unsigned char* scratch) {
  auto red = make_reducers(t.reds);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    call_reducing(t.f, item<D>(delinearize<D>(i, t.r), t.r), red, std::index_sequence_for<R...>{});
  }
  store_partials(t.reds, red, scratch, gridDim.x, blockIdx.x, std::index_sequence_for<R...>{});
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

template <int D, class F, class... R>
__global__ void nd_reduce_kernel(NdReduceTask<D, F, R...> t, unsigned char* scratch) {
  auto red = make_reducers(t.reds);
  const nd_item<D> it = this_nd_item<D>(t.r);
  call_reducing(t.f, it, red, std::index_sequence_for<R...>{});
  store_partials(t.reds, red, scratch, t.r.get_group_range().size(), it.get_group_linear_id(),
                 std::index_sequence_for<R...>{});
}

template <class F>
const char* launch_task(const SingleTask<F>& t, cudaStream_t s, std::size_t, void*) {
  single_kernel<<<1, 1, 0, s>>>(t.f);
  return nullptr;
}

template <int D, class F>
const char* launch_task(const RangeTask<D, F>& t, cudaStream_t s, std::size_t, void*) {
  const std::size_t n = t.r.size();
  range_kernel<D, F><<<range_blocks(n), kRangeBlock, 0, s>>>(t, n);
  return nullptr;
}

template <int D, class F, class... R>
const char* launch_task(const ReduceTask<D, F, R...>& t, cudaStream_t s, std::size_t,
                        void* scratch) {
  const std::size_t n = t.r.size();
  auto* part = static_cast<unsigned char*>(scratch);
  const unsigned blocks = reduce_blocks(n);
  if (n != 0) reduce_kernel<D, F, R...><<<blocks, kRangeBlock, 0, s>>>(t, n, part);
  finish_kernel<R...><<<1, kRangeBlock, 0, s>>>(t.reds, part, n != 0 ? blocks : 0);
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

/// Launches `kernel(args...)` over nd_range `r` with `local_bytes` of dynamic shared memory.
template <int D, class... Params, class... Args>
const char* launch_nd(void (*kernel)(Params...), const nd_range<D>& r, cudaStream_t s,
                      std::size_t local_bytes, const Args&... args) {
  dim3 grid, block;
  if (const char* why = nd_shape(r, grid, block)) return why;
  if (r.get_group_range().size() == 0) return nullptr;
  if (local_bytes > 48 * 1024) {
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(local_bytes)) != cudaSuccess) {
      return cudaGetErrorName(cudaGetLastError());
    }
  }
  kernel<<<grid, block, local_bytes, s>>>(args...);
  return nullptr;
}

template <int D, class F>
const char* launch_task(const NdTask<D, F>& t, cudaStream_t s, std::size_t local_bytes, void*) {
  return launch_nd(nd_kernel<D, F>, t.r, s, local_bytes, t);
}

template <int D, class F, class... R>
const char* launch_task(const NdReduceTask<D, F, R...>& t, cudaStream_t s, std::size_t local_bytes,
                        void* scratch) {
  auto* part = static_cast<unsigned char*>(scratch);
  const std::size_t groups = t.r.get_group_range().size();
  if (const char* why = launch_nd(nd_reduce_kernel<D, F, R...>, t.r, s, local_bytes, t, part)) {
    return why;
  }
  finish_kernel<R...><<<1, kRangeBlock, 0, s>>>(t.reds, part, groups);
  return nullptr;
}

template <class Task>
const char* cuda_launch(void* stream, const void* task, std::size_t local_bytes, void* scratch) {
  if (const char* why = launch_task(*static_cast<const Task*>(task),
                                    static_cast<cudaStream_t>(stream), local_bytes, scratch)) {
    return why;
  }
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorName(err);
}

}  // namespace sluice::dataflow::detail
