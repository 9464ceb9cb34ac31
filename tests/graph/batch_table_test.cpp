// The cuda batched node's table and per-thread work (src/backends/cuda/cuda_batch_table.hpp), run
// on the host over every chunk and thread of random batches: the kernel's arithmetic (which
// member holds a chunk, aligned 16-byte slots, the bytes at a member's ends, copies whose source
// and destination are aligned differently) checked against memset and memcpy where no GPU is.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/cuda_batch_table.hpp"
#include "sluice/ext/graph_batches.hpp"

namespace sluice::test {
namespace {

using detail::cuda::BatchTable;

TEST(BatchTableTest, EveryThreadOfEveryChunkWritesWhatTheMembersWouldHave) {
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    std::mt19937_64 rng(seed);
    auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    // Two pools; members land anywhere in them (any alignment), some larger than a chunk.
    std::vector<std::vector<std::uint8_t>> pools(2, std::vector<std::uint8_t>(40000));
    for (auto& p : pools)
      for (auto& b : p) b = static_cast<std::uint8_t>(rng());
    auto expected = pools;
    ir::Graph g;
    const std::size_t count = 2 + pick(40);
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t bytes = pick(4) == 0 ? 1 + pick(12000) : 1 + pick(100);
      const int dp = static_cast<int>(pick(2)), sp = static_cast<int>(pick(2));
      ir::Node n;
      n.name = "op";
      auto* dst = pools[dp].data() + pick(40000 - bytes);
      if (pick(2) == 0) {
        n.params = ir::Memset{dst, static_cast<int>(rng()), bytes};
      } else {
        std::size_t off = pick(40000 - bytes);
        if (pick(3) == 0) off = off / 16 * 16 + (reinterpret_cast<std::uintptr_t>(dst) & 15u);
        if (off + bytes > 40000) off -= 16;
        n.params = ir::Copy{dst, pools[sp].data() + off, bytes};
      }
      g.nodes.push_back(std::move(n));
      if (i > 0) g.edges.emplace_back(static_cast<std::uint32_t>(i - 1), i);
    }
    const auto plan =
        ir::plan_batches(g, detail::cuda::kBatchCapacity, [](const ir::Node&) { return true; });
    // The chain in order on copies of the pools, each node by itself.
    auto at = [&](auto& pool_set, const void* p) {
      for (std::size_t k = 0; k < 2; ++k) {
        const auto* base = pools[k].data();
        if (p >= base && p < base + 40000) {
          return pool_set[k].data() + (static_cast<const std::uint8_t*>(p) - base);
        }
      }
      return static_cast<std::uint8_t*>(nullptr);
    };
    for (const auto& n : g.nodes) {
      if (const auto* m = std::get_if<ir::Memset>(&n.params)) {
        std::memset(at(expected, m->dst), m->value, m->bytes);
      } else {
        const auto& c = std::get<ir::Copy>(n.params);
        std::memmove(at(expected, c.dst), at(expected, c.src), c.bytes);
      }
    }
    // The same chain with each batch run as its kernel would: every chunk, every thread.
    std::vector<char> done(count, 0);
    for (std::uint32_t i = 0; i < count; ++i) {
      if (done[i]) continue;
      const auto& n = g.nodes[i];
      if (plan.batch_of[i] < 0) {
        if (const auto* m = std::get_if<ir::Memset>(&n.params)) {
          std::memset(m->dst, m->value, m->bytes);
        } else {
          const auto& c = std::get<ir::Copy>(n.params);
          std::memmove(c.dst, c.src, c.bytes);
        }
        continue;
      }
      const auto& members = plan.members[plan.batch_of[i]];
      BatchTable table;
      ASSERT_EQ(detail::cuda::make_batch_table(g, members, table), "");
      for (std::uint32_t c = 0; c < table.chunks; ++c)
        for (std::uint32_t t = 0; t < detail::cuda::kBatchThreads; ++t)
          detail::cuda::batch_slot(table, c, t);
      for (auto m : members) done[m] = 1;
    }
    for (std::size_t k = 0; k < 2; ++k) {
      for (std::size_t b = 0; b < 40000; ++b) {
        ASSERT_EQ(int{pools[k][b]}, int{expected[k][b]})
            << "seed " << seed << " pool " << k << " byte " << b;
      }
    }
  }
}

}  // namespace
}  // namespace sluice::test
