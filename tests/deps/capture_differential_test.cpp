// Randomized differential test of the tracker around graphs (issue 23): random programs over
// several contexts mix eager copies and memsets with captures on random contexts (launched at
// once, later, several times or never), replays, and explicit graphs whose copy and memset nodes
// are rebound (GraphExec::set_copy / set_memset) to buffers other contexts still work on, with
// random delays and no synchronization between contexts. Every host read and the final contents
// must equal sequential execution, where a captured operation runs at each launch.

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "backend_param.hpp"
#include "sluice/graph.hpp"

namespace sluice::test {
namespace {

constexpr int kContexts = 4;
constexpr int kBuffers = 4;
constexpr std::size_t kBytes = 1024;

/// One recorded operation: a memset (src < 0) or a copy.
struct Step {
  int dst = 0;
  int src = -1;
  std::size_t off = 0, soff = 0, len = 0;
  int value = 0;
};

int programs(int default_count) {
  const char* env = std::getenv("SLUICE_DIFF_PROGRAMS");
  return env != nullptr ? std::atoi(env) : default_count;
}

class CaptureDifferentialTest : public BackendTest {
 protected:
  void run_program(const std::vector<Context>& ctxs, std::uint64_t seed, int ops);
};

void CaptureDifferentialTest::run_program(const std::vector<Context>& ctxs, std::uint64_t seed,
                                          int ops) {
  std::mt19937_64 rng(seed);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  auto ctx_at = [&] { return ctxs[pick(ctxs.size())]; };
  std::vector<DeviceBuffer<std::uint8_t>> bufs;
  std::vector<std::vector<std::uint8_t>> shadow(kBuffers);
  for (int b = 0; b < kBuffers; ++b) {
    auto c = ctx_at();
    bufs.emplace_back(c, kBytes);
    const auto v = static_cast<std::uint8_t>(rng());
    memset(c, bufs.back(), v);
    shadow[static_cast<std::size_t>(b)].assign(kBytes, v);
  }
  PinnedBuffer<std::uint8_t> pinned(ctxs[0], kBytes);
  auto random_step = [&] {
    Step s;
    s.len = 1 + pick(kBytes / 2);
    s.off = pick(kBytes - s.len + 1);
    s.soff = pick(kBytes - s.len + 1);
    s.dst = static_cast<int>(pick(kBuffers));
    if (pick(2) == 0) {
      s.src =
          static_cast<int>((static_cast<std::size_t>(s.dst) + 1 + pick(kBuffers - 1)) % kBuffers);
    }
    s.value = static_cast<int>(pick(256));
    return s;
  };
  auto issue = [&](const Context& c, const Step& s) {
    auto d = bufs[static_cast<std::size_t>(s.dst)].span().subspan(s.off, s.len);
    if (s.src < 0) {
      memset(c, d, s.value);
    } else {
      copy(c, d,
           std::span<const std::uint8_t>(
               bufs[static_cast<std::size_t>(s.src)].span().subspan(s.soff, s.len)));
    }
  };
  auto apply = [&](const Step& s) {
    auto& d = shadow[static_cast<std::size_t>(s.dst)];
    if (s.src < 0) {
      std::memset(d.data() + s.off, s.value, s.len);
    } else {
      std::memmove(d.data() + s.off, shadow[static_cast<std::size_t>(s.src)].data() + s.soff,
                   s.len);
    }
  };
  struct Captured {
    std::vector<Step> steps;
    GraphExec exec;
  };
  std::vector<std::unique_ptr<Captured>> graphs;
  struct Bound {
    Graph graph;
    Node node;
    GraphExec exec;
  };
  std::optional<Bound> bound;  // an explicit graph of one node, rebound before each launch
  Replay replay;

  for (int i = 0; i < ops; ++i) {
    const auto c = ctx_at();
    switch (pick(10)) {
      case 0:
      case 1: {  // eager work
        const auto s = random_step();
        issue(c, s);
        apply(s);
        break;
      }
      case 2: {  // a random delay, to shuffle timing between contexts
        const auto us = static_cast<int>(pick(300));
        c.host_task([us] { std::this_thread::sleep_for(std::chrono::microseconds(us)); });
        break;
      }
      case 3:
      case 4: {  // capture 1-3 operations on c (and maybe a joined context); launch now or later
        auto g = std::make_unique<Captured>();
        Graph graph;
        {
          Capture cap(c, "random");
          const auto other = ctx_at();
          const bool join = other.name() != c.name() && pick(2) == 0;
          if (join) other.wait_for(c);
          const auto count = 1 + pick(3);
          for (std::size_t k = 0; k < count; ++k) {
            g->steps.push_back(random_step());
            issue(join && k % 2 == 1 ? other : c, g->steps.back());
          }
          if (join) c.wait_for(other);
          graph = cap.end();
        }
        g->exec = GraphExec(graph, device());
        if (pick(2) == 0) {
          g->exec.launch(ctx_at());
          for (const auto& s : g->steps) apply(s);
        }
        graphs.push_back(std::move(g));
        break;
      }
      case 5: {  // launch an earlier capture again, on any context
        if (graphs.empty()) break;
        auto& g = *graphs[pick(graphs.size())];
        g.exec.launch(c);
        for (const auto& s : g.steps) apply(s);
        break;
      }
      case 6: {  // replay: captured, updated and launched at once
        const auto s = random_step();
        replay.run(c, s.src < 0 ? "memset" : "copy", [&] { issue(c, s); });
        apply(s);
        break;
      }
      case 7: {  // an explicit node rebound to other buffers, then launched
        auto s = random_step();
        if (bound && bound->node.kind() == NodeKind::memset) s.src = -1;
        if (bound && bound->node.kind() == NodeKind::copy && s.src < 0)
          s.src = (s.dst + 1) % kBuffers;
        void* dst = bufs[static_cast<std::size_t>(s.dst)].data() + s.off;
        const void* src =
            s.src < 0 ? nullptr : bufs[static_cast<std::size_t>(s.src)].data() + s.soff;
        if (!bound) {
          Graph g("bound");
          Node n = s.src < 0 ? g.add_memset(dst, s.value, s.len) : g.add_copy(dst, src, s.len);
          GraphExec e(g, device());
          bound.emplace(Bound{std::move(g), n, std::move(e)});
        } else if (s.src < 0) {
          bound->exec.set_memset(bound->node, dst, s.value, s.len);
        } else {
          bound->exec.set_copy(bound->node, dst, src, s.len);
        }
        bound->exec.launch(c);
        apply(s);
        break;
      }
      default: {  // read back on the host and check
        const auto b = pick(kBuffers);
        copy(c, pinned.span(), std::span<const std::uint8_t>(bufs[b].span()));
        auto r = pinned.read();
        for (std::size_t j = 0; j < kBytes; ++j) {
          ASSERT_EQ(r[j], shadow[b][j]) << "buffer " << b << " byte " << j << " at op " << i;
        }
        break;
      }
    }
  }
  std::vector<std::vector<std::uint8_t>> back(kBuffers, std::vector<std::uint8_t>(kBytes));
  for (std::size_t b = 0; b < kBuffers; ++b) copy(ctx_at(), back[b], bufs[b]);
  for (const auto& c : ctxs) c.synchronize();
  for (std::size_t b = 0; b < kBuffers; ++b) {
    ASSERT_EQ(back[b], shadow[b]) << "buffer " << b << " differs from sequential execution";
  }
}

TEST_P(CaptureDifferentialTest, CapturesLaunchesAndRebindsAmidEagerWorkMatchSequential) {
  std::vector<Context> ctxs;
  for (int i = 0; i < kContexts; ++i) ctxs.push_back(make_context());
  const char* fixed = std::getenv("SLUICE_DIFF_SEED");
  const std::uint64_t base =
      fixed != nullptr ? std::strtoull(fixed, nullptr, 10) : std::random_device{}();
  const int count = programs(is_host() ? 300 : 100);
  for (int p = 0; p < count; ++p) {
    const std::uint64_t seed = base + static_cast<std::uint64_t>(p);
    SCOPED_TRACE("program seed " + std::to_string(seed) +
                 " (rerun it: SLUICE_DIFF_SEED=<seed> SLUICE_DIFF_PROGRAMS=1)");
    run_program(ctxs, seed, 40);
    if (HasFatalFailure()) return;
  }
}

SLUICE_INSTANTIATE_BACKENDS(CaptureDifferentialTest);

}  // namespace
}  // namespace sluice::test
