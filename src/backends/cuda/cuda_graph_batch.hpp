#pragma once
// Batched nodes of cuda graphs: runs of small memset and copy nodes (sluice/ext/graph_batches.hpp
// decides which) performed by one kernel node whose parameters are a table of the members. A
// CUDA graph's launch costs roughly in proportion to its node count, so a replayed body of 100
// small memsets launches as one kernel instead of 100 memset nodes; a changed value or address
// rewrites the table with one cudaGraphExecKernelNodeSetParams (CUDA copies kernel parameters at
// that call, so launches already issued keep theirs). The table lives in the kernel's parameters
// (under the classic 4 KB limit), read in place through __grid_constant__.

#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_batch_table.hpp"

namespace sluice::detail::cuda {

/// A batched node's kernel parameters, pointing at `table` (which must outlive their use).
[[nodiscard]] cudaKernelNodeParams batch_params(const BatchTable& table, void*& arg);

/// Whether a kernel running on `device` reaches `p` (its device or managed memory, or pinned host
/// memory mapped at the same address).
[[nodiscard]] bool kernel_reaches(const void* p, int device);

}  // namespace sluice::detail::cuda
