// The plan of batched nodes (sluice/ext/graph_batches.hpp) on IR graphs: which memsets and copies
// merge, and, on random DAGs, that merging never makes a cycle, never puts two members that need
// an order into one batch, and keeps every edge between units.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "sluice/ext/graph_batches.hpp"

namespace sluice::test {
namespace {

// Addresses only: the plan never dereferences them.
void* at(std::uintptr_t a) {
  return reinterpret_cast<void*>(a);
}

ir::Node memset_node(std::uintptr_t dst, std::size_t bytes, int value = 0) {
  ir::Node n;
  n.name = "memset";
  n.params = ir::Memset{at(dst), value, bytes};
  return n;
}
ir::Node copy_node(std::uintptr_t dst, std::uintptr_t src, std::size_t bytes) {
  ir::Node n;
  n.name = "copy";
  n.params = ir::Copy{at(dst), at(src), bytes};
  return n;
}
ir::Node empty_node() {
  ir::Node n;
  n.name = "empty";
  n.params = ir::Empty{};
  return n;
}

ir::Batches plan(const ir::Graph& g, std::size_t capacity = 120) {
  return ir::plan_batches(g, capacity, [](const ir::Node&) { return true; });
}

ir::Graph chain_of_memsets(int count, std::size_t stride = 256) {
  ir::Graph g;
  for (int i = 0; i < count; ++i) {
    g.nodes.push_back(memset_node(0x10000 + stride * static_cast<std::size_t>(i), 256));
    if (i > 0) g.edges.emplace_back(i - 1, i);
  }
  return g;
}

TEST(GraphBatchesTest, AChainOfDisjointMemsetsIsOneBatch) {
  const auto b = plan(chain_of_memsets(100));
  ASSERT_EQ(b.members.size(), 1u);
  EXPECT_EQ(b.members[0].size(), 100u);
  EXPECT_EQ(b.merged(), 100u);
}

TEST(GraphBatchesTest, CapacitySplitsAChainIntoOrderedBatches) {
  const auto g = chain_of_memsets(100);
  const auto b = plan(g, 40);
  ASSERT_EQ(b.members.size(), 3u);
  EXPECT_EQ(b.members[0].size(), 40u);
  EXPECT_EQ(b.members[1].size(), 40u);
  EXPECT_EQ(b.members[2].size(), 20u);
  EXPECT_EQ(b.batch_of[0], 0);
  EXPECT_EQ(b.batch_of[99], 2);
}

TEST(GraphBatchesTest, AnOverlapStartsANewBatchAfterTheFirst) {
  // memset A, memset B, memset A again (must come after the first), memset C.
  ir::Graph g;
  g.nodes = {memset_node(0x1000, 64), memset_node(0x2000, 64), memset_node(0x1020, 64),
             memset_node(0x3000, 64)};
  g.edges = {{0, 1}, {1, 2}, {2, 3}};
  const auto b = plan(g);
  ASSERT_EQ(b.members.size(), 2u);
  EXPECT_EQ(b.members[0], (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(b.members[1], (std::vector<std::uint32_t>{2, 3}));
}

TEST(GraphBatchesTest, ACopyReadingWhatAMemsetWroteIsNotBatchedWithIt) {
  ir::Graph g;
  g.nodes = {memset_node(0x1000, 64), copy_node(0x2000, 0x1010, 16), memset_node(0x3000, 8)};
  g.edges = {{0, 1}, {1, 2}};
  const auto b = plan(g);
  ASSERT_EQ(b.members.size(), 1u);
  EXPECT_EQ(b.batch_of[0], -1);
  EXPECT_EQ(b.members[0], (std::vector<std::uint32_t>{1, 2}));
  // Reads may share bytes: two copies from one source batch together.
  ir::Graph r;
  r.nodes = {copy_node(0x2000, 0x1000, 64), copy_node(0x3000, 0x1000, 64)};
  r.edges = {{0, 1}};
  EXPECT_EQ(plan(r).members.size(), 1u);
  // A copy whose source meets its destination is never batched.
  ir::Graph self;
  self.nodes = {copy_node(0x1010, 0x1000, 64), memset_node(0x3000, 8)};
  self.edges = {{0, 1}};
  EXPECT_EQ(plan(self).batch_of[0], -1);
}

TEST(GraphBatchesTest, ForkedMemsetsBetweenTwoNodesAreOneBatch) {
  ir::Graph g;
  g.nodes.push_back(empty_node());
  for (int i = 0; i < 10; ++i) {
    g.nodes.push_back(memset_node(0x1000 + 0x100 * static_cast<std::size_t>(i), 0x100));
    g.edges.emplace_back(0, i + 1);
    g.edges.emplace_back(i + 1, 11);
  }
  g.nodes.push_back(empty_node());
  const auto b = plan(g);
  ASSERT_EQ(b.members.size(), 1u);
  EXPECT_EQ(b.members[0].size(), 10u);
}

TEST(GraphBatchesTest, OtherNodesAndIneligibleOnesAreNotCrossed) {
  // memset, memset, empty, memset, memset: two batches, the empty node between them.
  ir::Graph g;
  g.nodes = {memset_node(0x1000, 8), memset_node(0x2000, 8), empty_node(), memset_node(0x3000, 8),
             memset_node(0x4000, 8)};
  g.edges = {{0, 1}, {1, 2}, {2, 3}, {3, 4}};
  auto b = plan(g);
  ASSERT_EQ(b.members.size(), 2u);
  EXPECT_EQ(b.batch_of[2], -1);
  // The backend's own condition (here: memsets of 8 bytes are not wanted) is respected.
  b = ir::plan_batches(
      g, 120, [](const ir::Node& n) { return std::get<ir::Memset>(n.params).dst != at(0x1000); });
  ASSERT_EQ(b.members.size(), 1u);
  EXPECT_EQ(b.batch_of[0], -1);
  EXPECT_EQ(b.batch_of[1], -1);  // alone in its batch: stays a plain node
  EXPECT_EQ(b.members[0], (std::vector<std::uint32_t>{3, 4}));
}

TEST(GraphBatchesTest, ConflictsAreFoundWhateverTheOrder) {
  ir::Graph g;
  g.nodes = {memset_node(0x1000, 16), memset_node(0x2000, 16), copy_node(0x3000, 0x100f, 4),
             copy_node(0x4000, 0x5000, 16), copy_node(0x6000, 0x5008, 16)};
  const std::vector<std::uint32_t> ok{0, 1, 3, 4};
  EXPECT_FALSE(ir::batch_conflicts(g, ok));
  const std::vector<std::uint32_t> read_of_write{4, 2, 1, 0};  // 2 reads byte 0x100f of 0
  EXPECT_TRUE(ir::batch_conflicts(g, read_of_write));
  g.nodes.push_back(memset_node(0x4008, 1));  // meets copy 3's destination
  const std::vector<std::uint32_t> write_write{5, 3};
  EXPECT_TRUE(ir::batch_conflicts(g, write_write));
  g.nodes.push_back(memset_node(0x5010, 1));  // meets copy 4's source
  const std::vector<std::uint32_t> write_read{4, 6};
  EXPECT_TRUE(ir::batch_conflicts(g, write_read));
}

/// Random DAGs of memsets, copies (on a small address space, so that many overlap) and empty
/// nodes: every plan must leave the merged graph acyclic, batches without conflicts, within
/// capacity, and every original edge between two units.
TEST(GraphBatchesTest, RandomDagsMergeSafely) {
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    std::mt19937_64 rng(seed);
    auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    const std::size_t count = 2 + pick(40);
    ir::Graph g;
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t kind = pick(5);
      const std::uintptr_t dst = 0x1000 + pick(1024), src = 0x1000 + pick(1024);
      const std::size_t bytes = 1 + pick(64);
      if (kind < 2) {
        g.nodes.push_back(memset_node(dst, bytes));
      } else if (kind < 4) {
        g.nodes.push_back(copy_node(dst, src, bytes));
      } else {
        g.nodes.push_back(empty_node());
      }
      // Edges from earlier nodes only: a DAG. Chains, forks and joins all appear.
      const std::size_t edges = i == 0 ? 0 : pick(3);
      std::set<std::uint32_t> from;
      for (std::size_t e = 0; e < edges; ++e) from.insert(static_cast<std::uint32_t>(pick(i)));
      if (i > 0 && pick(2) == 0) from.insert(static_cast<std::uint32_t>(i - 1));
      for (auto f : from) g.edges.emplace_back(f, static_cast<std::uint32_t>(i));
    }
    const std::size_t capacity = 2 + pick(6);
    const auto b = plan(g, capacity);
    ASSERT_EQ(b.batch_of.size(), count);
    for (std::size_t k = 0; k < b.members.size(); ++k) {
      ASSERT_GE(b.members[k].size(), 2u) << "seed " << seed;
      ASSERT_LE(b.members[k].size(), capacity) << "seed " << seed;
      ASSERT_FALSE(ir::batch_conflicts(g, b.members[k])) << "seed " << seed << " batch " << k;
      for (auto m : b.members[k]) ASSERT_EQ(b.batch_of[m], static_cast<std::int32_t>(k));
    }
    // The merged graph: units are batches or single nodes.
    auto unit = [&](std::uint32_t i) {
      return b.batch_of[i] >= 0 ? count + static_cast<std::size_t>(b.batch_of[i]) : i;
    };
    const std::size_t units = count + b.members.size();
    std::vector<std::set<std::size_t>> succ(units);
    for (auto [x, y] : g.edges) {
      if (unit(x) != unit(y)) succ[unit(x)].insert(unit(y));
    }
    // Acyclic: Kahn's algorithm over the units in use visits all of them.
    std::vector<int> indegree(units, 0);
    std::set<std::size_t> used;
    for (std::uint32_t i = 0; i < count; ++i) used.insert(unit(i));
    for (auto u : used)
      for (auto v : succ[u]) ++indegree[v];
    std::vector<std::size_t> ready;
    for (auto u : used)
      if (indegree[u] == 0) ready.push_back(u);
    std::size_t visited = 0;
    while (!ready.empty()) {
      const auto u = ready.back();
      ready.pop_back();
      ++visited;
      for (auto v : succ[u])
        if (--indegree[v] == 0) ready.push_back(v);
    }
    ASSERT_EQ(visited, used.size()) << "seed " << seed << ": merging made a cycle";
  }
}

}  // namespace
}  // namespace sluice::test
