// Invariant 6 (DESIGN.md): randomized programs over several contexts (copies, memsets, Managed
// evaluations, cross-context waits and the tracker's own ordering) give the same results run
// eagerly as captured and launched, launch after launch, and replayed over changing buffers.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <random>
#include <vector>

#include "backend_param.hpp"
#include "graph/graph_data.hpp"
#include "sluice/graph.hpp"

namespace sluice::test {
namespace {

constexpr int kContexts = 3;
constexpr int kBuffers = 4;
constexpr std::size_t kBytes = 1024;

struct Op {
  int kind, ctx, ctx2, src, dst;
  std::size_t off, off2, len;
  int value;
};

std::vector<Op> random_program(std::uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  std::vector<Op> ops;
  for (int i = 0; i < count; ++i) {
    Op o{};
    o.kind = static_cast<int>(pick(4));
    o.ctx = static_cast<int>(pick(kContexts));
    o.ctx2 = static_cast<int>(pick(kContexts));
    o.src = static_cast<int>(pick(kBuffers));
    o.dst = static_cast<int>((o.src + 1 + pick(kBuffers - 1)) % kBuffers);
    o.len = 1 + pick(kBytes / 2);
    o.off = pick(kBytes - o.len + 1);
    o.off2 = pick(kBytes - o.len + 1);
    o.value = static_cast<int>(pick(256));
    ops.push_back(o);
  }
  return ops;
}

struct State {
  std::vector<DeviceBuffer<std::uint8_t>> bufs;
  std::optional<Managed<double>> acc;
};

/// Issues `ops` on `ctxs` against `s`. Every context first waits for ctxs[0] and ctxs[0] waits
/// for all at the end, so that under a capture all of them are joined in and back.
void issue(const std::vector<Context>& ctxs, const std::vector<Op>& ops, State& s) {
  for (int c = 1; c < kContexts; ++c) ctxs[c].wait_for(ctxs[0]);
  for (const auto& o : ops) {
    const auto& c = ctxs[o.ctx];
    switch (o.kind) {
      case 0:
        memset(c, s.bufs[o.dst].span().subspan(o.off, o.len), o.value);
        break;
      case 1:
        copy(c, s.bufs[o.dst].span().subspan(o.off2, o.len),
             s.bufs[o.src].span().subspan(o.off, o.len));
        break;
      case 2:
        c.wait_for(ctxs[o.ctx2]);
        break;
      case 3:
        s.acc->assign(*s.acc * 0.5 + static_cast<double>(o.value), c);
        break;
    }
  }
  for (int c = 1; c < kContexts; ++c) ctxs[0].wait_for(ctxs[c]);
}

/// The program run sequentially on the host: what both runs must give.
void simulate(const std::vector<Op>& ops, std::vector<std::vector<std::uint8_t>>& bufs,
              double& acc) {
  for (const auto& o : ops) {
    switch (o.kind) {
      case 0:
        std::fill_n(bufs[o.dst].begin() + static_cast<std::ptrdiff_t>(o.off), o.len,
                    static_cast<std::uint8_t>(o.value));
        break;
      case 1:
        std::copy_n(bufs[o.src].begin() + static_cast<std::ptrdiff_t>(o.off), o.len,
                    bufs[o.dst].begin() + static_cast<std::ptrdiff_t>(o.off2));
        break;
      case 3:
        acc = acc * 0.5 + static_cast<double>(o.value);
        break;
      default:
        break;
    }
  }
}

class GraphDifferentialTest : public BackendTest {
 protected:
  std::vector<Context> contexts() const {
    std::vector<Context> v;
    for (int i = 0; i < kContexts; ++i) v.push_back(make_context());
    return v;
  }
  State make_state(const Context& ctx, std::uint64_t seed) const {
    State s;
    std::mt19937_64 rng(seed);
    std::vector<std::vector<std::uint8_t>> init(kBuffers, std::vector<std::uint8_t>(kBytes));
    for (int b = 0; b < kBuffers; ++b) {
      s.bufs.emplace_back(ctx, kBytes);
      for (auto& v : init[b]) v = static_cast<std::uint8_t>(rng());
      copy(ctx, s.bufs.back(), init[b]);  // pageable: `init` lives until the synchronize
    }
    s.acc.emplace(static_cast<double>(seed % 7), ctx);
    ctx.synchronize();
    return s;
  }
  static std::vector<std::vector<std::uint8_t>> contents(const Context& ctx, State& s,
                                                         double* acc) {
    std::vector<std::vector<std::uint8_t>> out;
    for (auto& b : s.bufs) {
      out.emplace_back(kBytes);
      copy(ctx, out.back(), b);
    }
    ctx.synchronize();
    *acc = s.acc->value();
    return out;
  }
};

TEST_P(GraphDifferentialTest, CapturedProgramsMatchEagerOnes) {
  // SLUICE_GRAPH_DIFF_OPS=n: programs of n operations (to shrink a failing case).
  const char* env = std::getenv("SLUICE_GRAPH_DIFF_OPS");
  const int nops = env != nullptr ? std::atoi(env) : 30;
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    auto ctxs = contexts();
    const auto ops = random_program(seed, nops);
    State eager = make_state(ctxs[0], seed);
    State captured = make_state(ctxs[0], seed);
    double expected_acc = 0;
    auto expected = contents(ctxs[0], eager, &expected_acc);
    Graph g;
    {
      Capture cap(ctxs[0], "program " + std::to_string(seed));
      issue(ctxs, ops, captured);
      g = cap.end();
    }
    // Every two nodes whose declared accesses conflict must be ordered by a path.
    {
      const auto n = g.size();
      std::vector<std::vector<char>> reach(n, std::vector<char>(n, 0));
      for (auto [a, b] : g.edges()) reach[a][b] = 1;
      for (std::size_t k = 0; k < n; ++k)
        for (std::size_t i = 0; i < n; ++i)
          if (reach[i][k])
            for (std::size_t j = 0; j < n; ++j)
              if (reach[k][j]) reach[i][j] = 1;
      auto data = g.data();
      for (std::uint32_t i = 0; i < n; ++i) {
        for (std::uint32_t j = i + 1; j < n; ++j) {
          for (const auto& u : data->nodes[i].uses) {
            for (const auto& v : data->nodes[j].uses) {
              if (u.id != v.id) continue;
              if (u.mode == Access::read && v.mode == Access::read) continue;
              const auto ue = u.range.offset + u.range.size, ve = v.range.offset + v.range.size;
              if (u.range.offset >= ve || v.range.offset >= ue) continue;
              ASSERT_TRUE(reach[i][j]) << "seed " << seed << ": nodes " << i << " and " << j
                                       << " conflict but are unordered\n"
                                       << g.dot();
            }
          }
        }
      }
    }
    GraphExec exec(g, device());
    for (int launch = 0; launch < 3; ++launch) {
      issue(ctxs, ops, eager);
      exec.launch(ctxs[launch % kContexts]);
      double ea = 0, ca = 0;
      auto e = contents(ctxs[0], eager, &ea);
      auto c = contents(ctxs[0], captured, &ca);
      simulate(ops, expected, expected_acc);
      ASSERT_EQ(e, expected) << "eager run, seed " << seed << " launch " << launch;
      ASSERT_EQ(ea, expected_acc) << "eager run, seed " << seed << " launch " << launch;
      std::string desc;
      for (const auto& o : ops) {
        desc += " [k" + std::to_string(o.kind) + " c" + std::to_string(o.ctx) + " c2 " +
                std::to_string(o.ctx2) + " s" + std::to_string(o.src) + " d" +
                std::to_string(o.dst) + " off" + std::to_string(o.off) + " off2 " +
                std::to_string(o.off2) + " len" + std::to_string(o.len) + "]";
      }
      ASSERT_EQ(e.size(), c.size());
      for (std::size_t b = 0; b < e.size(); ++b) {
        std::size_t diffs = 0, first = kBytes;
        for (std::size_t i = 0; i < kBytes; ++i) {
          if (e[b][i] != c[b][i]) {
            ++diffs;
            first = std::min(first, i);
          }
        }
        ASSERT_EQ(diffs, 0u) << "buffer " << b << " first " << first << " seed " << seed
                             << " launch " << launch << desc << "\n"
                             << g.dot();
      }
      ASSERT_EQ(ea, ca) << "seed " << seed << " launch " << launch;
    }
  }
}

TEST_P(GraphDifferentialTest, ReplayedProgramsOverChangingBuffersMatchEagerOnes) {
  for (std::uint64_t seed = 100; seed < 106; ++seed) {
    auto ctxs = contexts();
    const auto ops = random_program(seed, 25);
    State eager[2] = {make_state(ctxs[0], seed), make_state(ctxs[0], seed + 50)};
    State replayed[2] = {make_state(ctxs[0], seed), make_state(ctxs[0], seed + 50)};
    Replay r;
    int reinstantiated = 0;
    r.on_event([&](const ReplayEvent& e) {
      // eager_cheaper: the body issued eagerly where that measured cheaper (ReplayPolicy).
      if (e.kind != ReplayEvent::Kind::instantiated && e.kind != ReplayEvent::Kind::eager_cheaper) {
        ++reinstantiated;
        ADD_FAILURE() << e.reason;
      }
    });
    for (int round = 0; round < 4; ++round) {
      const int which = round % 2;
      issue(ctxs, ops, eager[which]);
      r.run(ctxs[0], "program", [&] { issue(ctxs, ops, replayed[which]); });
      double ea = 0, ra = 0;
      auto e = contents(ctxs[0], eager[which], &ea);
      auto c = contents(ctxs[0], replayed[which], &ra);
      ASSERT_EQ(e, c) << "seed " << seed << " round " << round;
      ASSERT_EQ(ea, ra) << "seed " << seed << " round " << round;
    }
    EXPECT_EQ(reinstantiated, 0) << "same program, other buffers: updates only";
  }
}

TEST_P(GraphDifferentialTest, LaunchesInterleavedWithEagerWorkOnTheSameBuffersMatchSequential) {
  // A captured program and eager programs on the same buffers, over the same contexts: launches
  // and eager work in between must run in issue order (the capture itself runs nothing).
  for (std::uint64_t seed = 200; seed < 212; ++seed) {
    auto ctxs = contexts();
    const auto captured_ops = random_program(seed, 20);
    State s = make_state(ctxs[0], seed);
    double expected_acc = 0;
    auto expected = contents(ctxs[0], s, &expected_acc);
    // Eager work issued before the capture, not waited for: the capture orders after it.
    const auto before = random_program(seed + 1000, 10);
    issue(ctxs, before, s);
    simulate(before, expected, expected_acc);
    Graph g;
    {
      Capture cap(ctxs[seed % kContexts], "interleaved " + std::to_string(seed));
      std::vector<Context> order = ctxs;
      std::swap(order[0], order[seed % kContexts]);
      issue(order, captured_ops, s);
      g = cap.end();
    }
    GraphExec exec(g, device());
    for (int round = 0; round < 4; ++round) {
      const auto eager_ops = random_program(seed * 31 + static_cast<std::uint64_t>(round), 12);
      issue(ctxs, eager_ops, s);  // eager, right after the capture or the last launch
      simulate(eager_ops, expected, expected_acc);
      exec.launch(ctxs[static_cast<std::size_t>(round + 1) % kContexts]);
      simulate(captured_ops, expected, expected_acc);
    }
    double acc = 0;
    auto got = contents(ctxs[0], s, &acc);
    ASSERT_EQ(got, expected) << "seed " << seed;
    ASSERT_EQ(acc, expected_acc) << "seed " << seed;
  }
}

SLUICE_INSTANTIATE_BACKENDS(GraphDifferentialTest);

}  // namespace
}  // namespace sluice::test
