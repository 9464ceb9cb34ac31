// The batched node's kernel (cuda_graph_batch.hpp): every block steps over chunks of kBatchChunk
// bytes of the members; each thread writes one 16-byte aligned slot of its chunk
// (cuda_batch_table.hpp's batch_slot).
#include <cuda_runtime.h>

#include <algorithm>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_graph_batch.hpp"
#include "backends/cuda/kernel_preload.hpp"

namespace sluice::detail::cuda {
namespace {

__global__ void __launch_bounds__(kBatchThreads)
    batch_kernel(const __grid_constant__ BatchTable table) {
  for (std::uint32_t c = blockIdx.x; c < table.chunks; c += gridDim.x) {
    batch_slot(table, c, threadIdx.x);
  }
}

SLUICE_CUDA_KERNEL_FILE(batch_kernel);

}  // namespace

cudaKernelNodeParams batch_params(const BatchTable& table, void*& arg) {
  arg = const_cast<BatchTable*>(&table);
  cudaKernelNodeParams p{};
  p.func = reinterpret_cast<void*>(&batch_kernel);
  p.gridDim = dim3(table.chunks == 0 ? 1u : std::min(table.chunks, kBatchMaxBlocks));
  p.blockDim = dim3(kBatchThreads);
  p.kernelParams = &arg;
  return p;
}

bool kernel_reaches(const void* p, int device) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    clear_error();
    return false;
  }
  switch (a.type) {
    case cudaMemoryTypeDevice:
    case cudaMemoryTypeManaged:
      return a.device == device;
    case cudaMemoryTypeHost:
      return a.devicePointer == p;
    case cudaMemoryTypeUnregistered:
      return false;
  }
  return false;
}

}  // namespace sluice::detail::cuda
