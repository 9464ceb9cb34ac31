// The one kernel conditional nodes need: it reads a sluice Managed integer on the device and sets
// the node's condition from it, so a loop's test never involves the host.
#include <cuda_runtime.h>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_graph.hpp"
#include "backends/cuda/kernel_preload.hpp"

namespace sluice::detail::cuda {
namespace {

__global__ void set_condition_kernel(cudaGraphConditionalHandle handle, const void* value,
                                     int bytes) {
  const bool nonzero = bytes == 8 ? *static_cast<const long long*>(value) != 0
                                  : *static_cast<const int*>(value) != 0;
  cudaGraphSetConditional(handle, nonzero ? 1u : 0u);
}

__global__ void assign_default_kernel(void* cell, long long value, int bytes) {
  if (bytes == 8) {
    *static_cast<long long*>(cell) = value;
  } else {
    *static_cast<int*>(cell) = static_cast<int>(value);
  }
}

// Every kernel of this file, loaded ahead where one process drives several GPUs
// (backends/cuda/kernel_preload.hpp).
SLUICE_CUDA_KERNEL_FILE(set_condition_kernel);

}  // namespace

cudaKernelNodeParams assign_default_params(AssignDefault& a) {
  a.args[0] = &a.cell;
  a.args[1] = &a.value;
  a.args[2] = &a.bytes;
  cudaKernelNodeParams p{};
  p.func = reinterpret_cast<void*>(&assign_default_kernel);
  p.gridDim = dim3(1);
  p.blockDim = dim3(1);
  p.kernelParams = a.args;
  return p;
}

cudaGraphNode_t add_set_condition_node(cudaGraph_t graph, const cudaGraphNode_t* deps,
                                       std::size_t ndeps, cudaGraphConditionalHandle handle,
                                       const void* value, int bytes) {
  void* args[] = {&handle, &value, &bytes};
  cudaKernelNodeParams p{};
  p.func = reinterpret_cast<void*>(&set_condition_kernel);
  p.gridDim = dim3(1);
  p.blockDim = dim3(1);
  p.kernelParams = args;
  cudaGraphNode_t node = nullptr;
  check(cudaGraphAddKernelNode(&node, graph, deps, ndeps, &p),
        "cudaGraphAddKernelNode (condition of a conditional node)");
  return node;
}

}  // namespace sluice::detail::cuda
