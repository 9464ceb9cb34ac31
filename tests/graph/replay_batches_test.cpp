// Replays of bodies of memsets, fills and copies against a sequential model of the bytes, with
// the backends' batched nodes on and off (SLUICE_GRAPH_COALESCE): random sizes, offsets (any
// alignment), element sizes and values, values and addresses changing between runs, overlapping
// ranges written and read in order, another context writing and reading the same buffers before
// and after each replay, and a body that grows (a new topology: a new instantiation).

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend_param.hpp"
#include "sluice/graph.hpp"

namespace sluice::test {
namespace {

constexpr int kBuffers = 3;
// One buffer larger than a batched node's chunk of 4096 bytes, so members span several blocks.
constexpr std::size_t kSizes[kBuffers] = {3000, 4096, 20000};

struct Pad3 {
  std::uint8_t b[3];
};

enum class Kind { memset, fill, copy };

struct Op {
  Kind kind;
  int dst, src;
  std::size_t off, off2, len;  // bytes; fills: len counts elements
  std::size_t elem;            // fills: 1, 2, 4, 8 or 3 (Pad3)
  std::uint64_t value;
};

/// A random op; `rng` decides everything.
Op random_op(std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  Op o{};
  o.kind = static_cast<Kind>(pick(3));
  o.dst = static_cast<int>(pick(kBuffers));
  o.src = static_cast<int>(pick(kBuffers));
  const std::size_t cap = std::min(kSizes[o.dst], kSizes[o.src]);
  o.len = 1 + (pick(8) == 0 ? pick(cap / 2) : pick(300));
  o.value = rng();
  if (o.kind == Kind::fill) {
    static constexpr std::size_t elems[] = {1, 2, 4, 8, 3};
    o.elem = elems[pick(5)];
    o.len = 1 + pick(std::min<std::size_t>(300, kSizes[o.dst] / o.elem / 2));
    // Typed elements at offsets aligned to their size (what a typed buffer gives).
    const std::size_t align = o.elem == 3 ? 1 : o.elem;
    o.off = pick((kSizes[o.dst] - o.len * o.elem) / align + 1) * align;
    return o;
  }
  o.off = pick(kSizes[o.dst] - o.len + 1);
  o.off2 = pick(kSizes[o.src] - o.len + 1);
  if (o.kind == Kind::copy && o.dst == o.src && o.off < o.off2 + o.len && o.off2 < o.off + o.len) {
    o.kind = Kind::memset;  // a copy never overlaps itself
  }
  return o;
}

using Model = std::vector<std::vector<std::uint8_t>>;

void apply_op(Model& m, const Op& o) {
  auto& d = m[o.dst];
  switch (o.kind) {
    case Kind::memset:
      std::memset(d.data() + o.off, static_cast<int>(o.value & 0xff), o.len);
      break;
    case Kind::fill:
      for (std::size_t i = 0; i < o.len; ++i) {
        std::memcpy(d.data() + o.off + i * o.elem, &o.value, o.elem);
      }
      break;
    case Kind::copy:
      std::memmove(d.data() + o.off, m[o.src].data() + o.off2, o.len);
      break;
  }
}

template <class T>
void fill_as(const Context& ctx, DeviceBuffer<std::uint8_t>& b, const Op& o) {
  T v;
  std::memcpy(&v, &o.value, sizeof(T));
  fill(ctx, std::span<T>(reinterpret_cast<T*>(b.data() + o.off), o.len), v);
}

void issue(const Context& ctx, std::vector<DeviceBuffer<std::uint8_t>>& bufs, const Op& o) {
  auto& d = bufs[o.dst];
  switch (o.kind) {
    case Kind::memset:
      memset(ctx, d.span().subspan(o.off, o.len), static_cast<int>(o.value & 0xff));
      break;
    case Kind::fill:
      switch (o.elem) {
        case 1:
          fill_as<std::uint8_t>(ctx, d, o);
          break;
        case 2:
          fill_as<std::uint16_t>(ctx, d, o);
          break;
        case 4:
          fill_as<std::uint32_t>(ctx, d, o);
          break;
        case 8:
          fill_as<std::uint64_t>(ctx, d, o);
          break;
        default:
          fill_as<Pad3>(ctx, d, o);
      }
      break;
    case Kind::copy:
      copy(ctx, d.span().subspan(o.off, o.len), bufs[o.src].span().subspan(o.off2, o.len));
      break;
  }
}

/// Sets SLUICE_GRAPH_COALESCE for one scope.
class CoalesceSetting {
 public:
  explicit CoalesceSetting(bool on) { ::setenv("SLUICE_GRAPH_COALESCE", on ? "1" : "0", 1); }
  ~CoalesceSetting() { ::unsetenv("SLUICE_GRAPH_COALESCE"); }
  CoalesceSetting(const CoalesceSetting&) = delete;
  CoalesceSetting& operator=(const CoalesceSetting&) = delete;
};

class ReplayBatchesTest : public BackendTest {
 protected:
  std::vector<DeviceBuffer<std::uint8_t>> make_buffers(const Context& ctx, Model& model,
                                                       std::uint64_t seed) {
    std::vector<DeviceBuffer<std::uint8_t>> bufs;
    model.clear();
    std::mt19937_64 rng(seed);
    for (int b = 0; b < kBuffers; ++b) {
      std::vector<std::uint8_t> init(kSizes[b]);
      for (auto& x : init) x = static_cast<std::uint8_t>(rng());
      bufs.emplace_back(ctx, kSizes[b]);
      copy(ctx, bufs.back(), init);
      model.push_back(std::move(init));
    }
    ctx.synchronize();
    return bufs;
  }

  void expect_equal(const Context& ctx, const std::vector<DeviceBuffer<std::uint8_t>>& bufs,
                    const Model& model, const std::string& where) {
    for (int b = 0; b < kBuffers; ++b) {
      const auto got = to_vector(ctx, bufs[b]);
      ASSERT_EQ(got.size(), model[b].size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(int{got[i]}, int{model[b][i]})
            << where << ": buffer " << b << " byte " << i << " differs";
      }
    }
  }

  /// Random bodies replayed 6 times each: values change every run, addresses in some runs, the
  /// body grows by one op in run 4; another context writes before and reads after each run.
  void run_programs(bool coalesce) {
    CoalesceSetting setting(coalesce);
    const char* env = std::getenv("SLUICE_REPLAY_BATCH_PROGRAMS");
    const int programs = env != nullptr ? std::atoi(env) : 6;
    for (int p = 1; p <= programs; ++p) {
      const auto seed = static_cast<std::uint64_t>(p) * 7919u + (coalesce ? 1 : 0);
      std::mt19937_64 rng(seed);
      Context ctx = make_context();
      Context other = make_context();
      Model model;
      auto bufs = make_buffers(ctx, model, seed);
      // Mostly memsets and copies (what batches), some fills.
      std::vector<Op> body;
      const int nops = 20 + static_cast<int>(rng() % 30);
      for (int i = 0; i < nops; ++i) body.push_back(random_op(rng));
      Replay replay(ReplayOptions{.eager_when_cheaper = false});
      int instantiated = 0;
      replay.on_event([&](const ReplayEvent& e) {
        if (e.kind == ReplayEvent::Kind::instantiated ||
            e.kind == ReplayEvent::Kind::reinstantiated) {
          ++instantiated;
        }
        EXPECT_NE(e.kind, ReplayEvent::Kind::eager) << e.reason;
      });
      DeviceBuffer<std::uint8_t> seen(other, kSizes[0]);
      for (int run = 0; run < 6; ++run) {
        for (auto& o : body) {
          o.value = rng();
          if (run % 2 == 1 && rng() % 4 == 0) o = random_op(rng);  // new addresses and sizes
        }
        if (run == 4) body.push_back(random_op(rng));
        // Another context writes a buffer the body uses; the replay must follow it.
        Op before{};
        before.kind = Kind::memset;
        before.dst = static_cast<int>(rng() % kBuffers);
        before.len = kSizes[before.dst];
        before.value = rng();
        issue(other, bufs, before);
        apply_op(model, before);
        replay.run(ctx, "body", [&] {
          for (const auto& o : body) issue(ctx, bufs, o);
        });
        for (const auto& o : body) apply_op(model, o);
        // ... and reads what the replay wrote.
        copy(other, seen, bufs[0]);
        const auto got = to_vector(other, seen);
        ASSERT_EQ(got, model[0]) << "program " << p << " run " << run
                                 << ": another context read buffer 0 out of order";
        expect_equal(ctx, bufs, model,
                     "program " + std::to_string(p) + " run " + std::to_string(run));
        if (HasFatalFailure()) return;
      }
      // The first run instantiates, and so does the run whose body grew; others may (an
      // address change that makes batched members overlap).
      EXPECT_GE(instantiated, 2) << "program " << p;
    }
  }
};

TEST_P(ReplayBatchesTest, RandomBodiesMatchASequentialModelWithBatching) {
  run_programs(true);
}

TEST_P(ReplayBatchesTest, RandomBodiesMatchASequentialModelWithoutBatching) {
  run_programs(false);
}

/// A replay as the first work of a fresh context (its buffers' allocation aside).
TEST_P(ReplayBatchesTest, AFreshContextReplaysFirst) {
  for (bool coalesce : {true, false}) {
    CoalesceSetting setting(coalesce);
    Context ctx = make_context();
    std::vector<DeviceBuffer<std::uint8_t>> bufs;
    for (int i = 0; i < 50; ++i) bufs.emplace_back(ctx, 100 + static_cast<std::size_t>(i));
    Replay replay(ReplayOptions{.eager_when_cheaper = false});
    for (int v = 1; v <= 3; ++v) {
      replay.run(ctx, "fresh", [&] {
        for (auto& b : bufs) memset(ctx, b, v);
      });
      for (auto& b : bufs) {
        const auto got = to_vector(ctx, b);
        ASSERT_EQ(got, std::vector<std::uint8_t>(b.size(), static_cast<std::uint8_t>(v)));
      }
    }
  }
}

/// The counters: a graph of 100 small memsets becomes one batched node on cuda, none on the host
/// (its graphs run a memset node as a plain call: nothing to merge), and none with
/// SLUICE_GRAPH_COALESCE=0.
TEST_P(ReplayBatchesTest, CountsTheNodesItBatches) {
  Context ctx = make_context();
  std::vector<DeviceBuffer<std::uint8_t>> bufs;
  for (int i = 0; i < 100; ++i) bufs.emplace_back(ctx, 256);
  Graph g;
  {
    Capture cap(ctx);
    for (auto& b : bufs) memset(ctx, b, 3);
    g = cap.end();
  }
  for (bool coalesce : {true, false}) {
    CoalesceSetting setting(coalesce);
    const auto before = graph::stats();
    GraphExec exec(g, ctx.device());
    const auto after = graph::stats();
    const bool batches = coalesce && !is_host();
    EXPECT_EQ(after.coalesced_nodes - before.coalesced_nodes, batches ? 100u : 0u);
    EXPECT_EQ(after.batched_nodes - before.batched_nodes, batches ? 1u : 0u);
    exec.launch(ctx);
    for (auto& b : bufs) ASSERT_EQ(to_vector(ctx, b), std::vector<std::uint8_t>(256, 3));
  }
}

/// An explicit graph whose memsets and copies lie between a fork and a join (an independent set:
/// one batch on cuda), launched, then updated in place with new values and a copy's new source;
/// then two members moved onto the same bytes (the update refused, a new instantiation).
TEST_P(ReplayBatchesTest, ForkedNodesBatchAndUpdateInPlace) {
  Context ctx = make_context();
  std::vector<DeviceBuffer<std::uint8_t>> bufs;
  for (int i = 0; i < 12; ++i) bufs.emplace_back(ctx, 1000);
  DeviceBuffer<std::uint8_t> src(ctx, 1000), src2(ctx, 1000);
  fill(ctx, src, std::uint8_t{42});
  fill(ctx, src2, std::uint8_t{43});
  auto build = [&](int value, std::uint8_t* copy_from, std::uint8_t* last_dst) {
    Graph g("fork");
    const Node root = g.add_empty();
    std::vector<Node> mid;
    for (int i = 0; i < 10; ++i) {
      mid.push_back(g.add_memset(i == 9 ? last_dst : bufs[i].data(), value + i, 1000,
                                 NodeOptions{.after = {root}}));
    }
    mid.push_back(g.add_copy(bufs[10].data(), copy_from, 1000, NodeOptions{.after = {root}}));
    g.add_empty(NodeOptions{.after = mid});
    return g;
  };
  const auto before = graph::stats();
  GraphExec exec(build(1, src.data(), bufs[9].data()), ctx.device());
  const auto after = graph::stats();
  const bool batches = !is_host();
  EXPECT_EQ(after.coalesced_nodes - before.coalesced_nodes, batches ? 11u : 0u);
  EXPECT_EQ(after.batched_nodes - before.batched_nodes, batches ? 1u : 0u);
  auto check = [&](int value, std::uint8_t copied) {
    for (int i = 0; i < 10; ++i) {
      ASSERT_EQ(to_vector(ctx, bufs[i]),
                std::vector<std::uint8_t>(1000, static_cast<std::uint8_t>(value + i)));
    }
    ASSERT_EQ(to_vector(ctx, bufs[10]), std::vector<std::uint8_t>(1000, copied));
  };
  exec.launch(ctx);
  check(1, 42);
  exec.update(build(5, src2.data(), bufs[9].data()));
  const auto updated = graph::stats();
  EXPECT_EQ(updated.instantiations, after.instantiations) << "updated in place";
  exec.launch(ctx);
  check(5, 43);
  // Node 9 now writes what node 8 writes: unordered writes of the same bytes, as the user
  // asked (the last value wins or not: only the other buffers are checked), and on cuda the
  // batch cannot hold both: a new instantiation. On the host the two memsets would run on two
  // pool threads at once, a data race ThreadSanitizer rightly reports, so there node 9 moves
  // onto a buffer of its own and the update stays in place.
  std::uint8_t* const moved = batches ? bufs[8].data() : bufs[11].data();
  exec.update(build(7, src.data(), moved));
  EXPECT_EQ(graph::stats().instantiations - updated.instantiations, batches ? 1u : 0u);
  exec.launch(ctx);
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(to_vector(ctx, bufs[i]),
              std::vector<std::uint8_t>(1000, static_cast<std::uint8_t>(7 + i)));
  }
  if (!batches) {
    ASSERT_EQ(to_vector(ctx, bufs[11]), std::vector<std::uint8_t>(1000, 16));
  }
  ASSERT_EQ(to_vector(ctx, bufs[10]), std::vector<std::uint8_t>(1000, 42));
}

SLUICE_INSTANTIATE_BACKENDS(ReplayBatchesTest);

}  // namespace
}  // namespace sluice::test
