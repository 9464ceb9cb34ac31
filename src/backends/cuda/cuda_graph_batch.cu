// The batched node's kernel (cuda_graph_batch.hpp): every block steps over chunks of kBatchChunk
// bytes of the members, each thread writes one 16-byte aligned slot of its chunk with one vector
// store where the slot lies inside the member (bytes at its ends one by one).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <variant>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_graph_batch.hpp"
#include "backends/cuda/kernel_preload.hpp"

namespace sluice::detail::cuda {
namespace {

__global__ void __launch_bounds__(kBatchThreads)
    batch_kernel(const __grid_constant__ BatchTable table) {
  for (std::uint32_t c = blockIdx.x; c < table.chunks; c += gridDim.x) {
    // The member holding chunk c: the last whose first chunk is at most c.
    std::uint32_t lo = 0, hi = table.count;
    while (hi - lo > 1) {
      const std::uint32_t mid = (lo + hi) / 2;
      if (table.entries[mid].first_chunk <= c) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    const BatchEntry& e = table.entries[lo];
    // Positions count from dst rounded down to 16 bytes: the member is [begin, end).
    const std::uint64_t begin = e.dst & 15u;
    const std::uint64_t end = begin + (e.bytes & ~kBatchCopyFlag);
    const std::uint64_t s =
        std::uint64_t{c - e.first_chunk} * kBatchChunk + std::uint64_t{threadIdx.x} * 16u;
    if (s >= end || s + 16 <= begin) continue;
    auto* out = reinterpret_cast<unsigned char*>(e.dst - begin);
    const bool whole = s >= begin && s + 16 <= end;
    if ((e.bytes & kBatchCopyFlag) == 0) {
      const auto* word = reinterpret_cast<const unsigned char*>(e.data);
      if (whole) {
        *reinterpret_cast<uint4*>(out + s) = *reinterpret_cast<const uint4*>(e.data);
      } else {
        for (unsigned t = 0; t < 16; ++t) {
          if (s + t >= begin && s + t < end) out[s + t] = word[t];
        }
      }
    } else {
      const auto* in = reinterpret_cast<const unsigned char*>(e.data[0] - begin);
      if (whole && ((e.data[0] - e.dst) & 15u) == 0) {
        *reinterpret_cast<uint4*>(out + s) = *reinterpret_cast<const uint4*>(in + s);
      } else {
        for (unsigned t = 0; t < 16; ++t) {
          if (s + t >= begin && s + t < end) out[s + t] = in[s + t];
        }
      }
    }
  }
}

SLUICE_CUDA_KERNEL_FILE(batch_kernel);

}  // namespace

std::string make_batch_table(const ir::Graph& g, std::span<const std::uint32_t> members,
                             BatchTable& table) {
  if (members.size() > kBatchCapacity) return "a batch of more than its capacity";
  table.count = static_cast<std::uint32_t>(members.size());
  std::uint32_t chunks = 0;
  for (std::size_t k = 0; k < members.size(); ++k) {
    const ir::Node& n = g.nodes[members[k]];
    BatchEntry& e = table.entries[k];
    std::size_t bytes = 0;
    if (const auto* m = std::get_if<ir::Memset>(&n.params)) {
      bytes = m->bytes;
      e.dst = reinterpret_cast<std::uint64_t>(m->dst);
      std::memset(e.data, m->value & 0xff, sizeof e.data);  // a byte pattern reads the same rotated
    } else if (const auto* cp = std::get_if<ir::Copy>(&n.params)) {
      bytes = cp->bytes;
      e.dst = reinterpret_cast<std::uint64_t>(cp->dst);
      e.data[0] = reinterpret_cast<std::uint64_t>(cp->src);
      e.data[1] = 0;
    } else {
      return "node '" + n.name + "' is neither a memset nor a copy";
    }
    if (bytes > kBatchMaxBytes) {
      return "node '" + n.name + "' (" + std::to_string(bytes) +
             " bytes) is too large for a batched node";
    }
    e.bytes = static_cast<std::uint32_t>(bytes) |
              (std::holds_alternative<ir::Copy>(n.params) ? kBatchCopyFlag : 0u);
    e.first_chunk = chunks;
    if (bytes != 0) {
      const std::uint64_t span = (e.dst & 15u) + bytes;
      chunks += static_cast<std::uint32_t>((span + kBatchChunk - 1) / kBatchChunk);
    }
  }
  table.chunks = chunks;
  return {};
}

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
