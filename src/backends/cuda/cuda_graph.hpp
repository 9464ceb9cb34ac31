#pragma once
// The cuda backend's graphs: the IR (sluice/ext/graph_ir.hpp) built into a cudaGraph_t with the
// CUDA runtime graph API and instantiated; captured operations are per-operation stream captures.

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "sluice/backend.hpp"
#include "sluice/ext/graph_ir.hpp"

namespace sluice::detail::cuda {

/// What a stream capture of one operation recorded: its graph, and what its host nodes point at.
struct CudaRecording {
  cudaGraph_t graph = nullptr;
  std::vector<std::shared_ptr<void>> keep_alive;
  CudaRecording() = default;
  CudaRecording(const CudaRecording&) = delete;
  CudaRecording& operator=(const CudaRecording&) = delete;
  ~CudaRecording();
};

/// Instantiates `graph` for cuda device `device`.
[[nodiscard]] std::unique_ptr<GraphExecutable> instantiate_cuda_graph(const ir::GraphPtr& graph,
                                                                      int device);

/// Enqueues a one-thread kernel node into `graph` after `deps` that sets conditional `handle` to
/// whether the integer at `value` (4 or 8 bytes, device memory) is non-zero.
cudaGraphNode_t add_set_condition_node(cudaGraph_t graph, const cudaGraphNode_t* deps,
                                       std::size_t ndeps, cudaGraphConditionalHandle handle,
                                       const void* value, int bytes);

/// The arguments of a kernel node that writes a conditional node's default into its condition.
struct AssignDefault {
  void* cell = nullptr;
  long long value = 0;
  int bytes = 4;
  void* args[3] = {};
};
/// Kernel node parameters for `a` (pointing into `a`, which must outlive their use).
[[nodiscard]] cudaKernelNodeParams assign_default_params(AssignDefault& a);

}  // namespace sluice::detail::cuda
