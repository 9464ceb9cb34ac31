#pragma once
// Batched nodes of cuda graphs: runs of small memset and copy nodes (sluice/ext/graph_batches.hpp
// decides which) performed by one kernel node whose parameters are a table of the members. A
// CUDA graph's launch costs roughly in proportion to its node count, so a replayed body of 100
// small memsets launches as one kernel instead of 100 memset nodes; a changed value or address
// rewrites the table with one cudaGraphExecKernelNodeSetParams (CUDA copies kernel parameters at
// that call, so launches already issued keep theirs). The table lives in the kernel's parameters
// (under the classic 4 KB limit), read in place through __grid_constant__.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "sluice/ext/graph_ir.hpp"

namespace sluice::detail::cuda {

/// One member: a fill of `bytes` at `dst` with a 16-byte pattern, or a copy from `src`.
struct alignas(16) BatchEntry {
  std::uint64_t dst = 0;
  std::uint32_t bytes = 0;        ///< the top bit marks a copy
  std::uint32_t first_chunk = 0;  ///< the entry's first chunk of the launch (see kBatchChunk)
  /// A fill: the bytes written at addresses equal to 0..15 modulo 16; a copy: data[0] = src.
  std::uint64_t data[2] = {0, 0};
};

/// Members per batched node: the table fits the 4 KB of kernel parameters every device takes.
constexpr std::size_t kBatchCapacity = 120;
constexpr std::uint32_t kBatchThreads = 256;
/// Bytes a block writes per step: 16 per thread, at 16-byte aligned addresses.
constexpr std::uint32_t kBatchChunk = kBatchThreads * 16;
/// The largest member (the top bit of BatchEntry::bytes is the kind).
constexpr std::size_t kBatchMaxBytes = 0x7fffffffu;
constexpr std::uint32_t kBatchCopyFlag = 0x80000000u;
/// Members at instantiation are at most this large: beyond it a node's own run is not
/// launch-bound and the driver's memset or copy engine does at least as well.
constexpr std::size_t kBatchMemsetLimit = std::size_t{1} << 20;
constexpr std::size_t kBatchCopyLimit = std::size_t{64} << 10;
/// At most this many blocks; each loops over the chunks.
constexpr std::uint32_t kBatchMaxBlocks = 1024;

struct BatchTable {
  std::uint32_t count = 0;
  std::uint32_t chunks = 0;
  std::uint64_t reserved = 0;
  BatchEntry entries[kBatchCapacity];
};
static_assert(sizeof(BatchTable) <= 4096, "a batched node's table must fit the kernel parameters");

/// The table of `members` (memset or copy nodes of `g`), or why it cannot be made (a member too
/// large for an entry).
[[nodiscard]] std::string make_batch_table(const ir::Graph& g,
                                           std::span<const std::uint32_t> members,
                                           BatchTable& table);

/// A batched node's kernel parameters, pointing at `table` (which must outlive their use).
[[nodiscard]] cudaKernelNodeParams batch_params(const BatchTable& table, void*& arg);

/// Whether a kernel running on `device` reaches `p` (its device or managed memory, or pinned host
/// memory mapped at the same address).
[[nodiscard]] bool kernel_reaches(const void* p, int device);

}  // namespace sluice::detail::cuda
