#pragma once
// The table of a batched node (cuda_graph_batch.hpp) and the work of one thread on it, in plain
// C++ so that the host test suite checks the kernel's arithmetic (tests/graph/batch_table_test)
// where there is no GPU; cuda_graph_batch.cu runs the same code on the device.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <variant>

#include "sluice/ext/graph_ir.hpp"

#if defined(__CUDACC__)
#define SLUICE_BATCH_HD __host__ __device__
#else
#define SLUICE_BATCH_HD
#endif

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

/// Thread `thread` of the block that runs chunk `c`: writes its 16-byte aligned slot of the
/// member holding the chunk, with one 16-byte store where the slot lies inside the member.
SLUICE_BATCH_HD inline void batch_slot(const BatchTable& table, std::uint32_t c,
                                       std::uint32_t thread) {
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
      std::uint64_t{c - e.first_chunk} * kBatchChunk + std::uint64_t{thread} * 16u;
  if (s >= end || s + 16 <= begin) return;
  auto* out = reinterpret_cast<unsigned char*>(e.dst - begin);
  const bool whole = s >= begin && s + 16 <= end;
  const bool copy = (e.bytes & kBatchCopyFlag) != 0;
  const auto* in = copy ? reinterpret_cast<const unsigned char*>(e.data[0] - begin)
                        : reinterpret_cast<const unsigned char*>(e.data);
  // A fill's pattern is indexed by position modulo 16, a copy's source by position.
  const std::uint64_t from = copy ? s : 0;
  if (whole && (!copy || ((e.data[0] - e.dst) & 15u) == 0)) {
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<uint4*>(out + s) = *reinterpret_cast<const uint4*>(in + from);
#else
    std::memcpy(out + s, in + from, 16);
#endif
    return;
  }
  for (unsigned t = 0; t < 16; ++t) {
    if (s + t >= begin && s + t < end) out[s + t] = in[from + t];
  }
}

/// The table of `members` (memset or copy nodes of `g`), or why it cannot be made (a member too
/// large for an entry).
[[nodiscard]] inline std::string make_batch_table(const ir::Graph& g,
                                                  std::span<const std::uint32_t> members,
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

}  // namespace sluice::detail::cuda
