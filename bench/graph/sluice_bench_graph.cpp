// Graph layer benchmarks (docs/graph.md, "Benchmarks"). Per-node figures are counters in
// seconds per node ("s_per_node"); the replay/eager pair reports host time per 100-op body.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "sluice/graph.hpp"
#include "sluice/memory.hpp"
#include "sluice/sluice.hpp"

#ifdef SLUICE_BENCH_CUDA
#include "empty_kernel.hpp"
#include "pdl_chain.hpp"
#include "raw_graph.hpp"
#endif

namespace {

using namespace sluice;

constexpr int kBodyOps = 100;

bool have_backend(benchmark::State& state, const std::string& name) {
  for (const auto& b : backends()) {
    if (b.name == name && b.device_count > 0) return true;
  }
  state.SkipWithError((name + " has no device in this build or on this machine").c_str());
  return false;
}

const char* backend_of(benchmark::State& state) {
  return state.range(0) == 0 ? "host" : "cuda";
}

/// The 100-operation body: memsets of small buffers.
struct Body {
  Context ctx;
  std::vector<DeviceBuffer<std::uint8_t>> bufs;
  explicit Body(const Context& c) : ctx(c) {
    for (int i = 0; i < kBodyOps; ++i) bufs.emplace_back(ctx, 256);
  }
  void issue(int value) {
    for (auto& b : bufs) memset(ctx, b, value);
  }
};

void per_node(benchmark::State& state, int nodes) {
  state.counters["s_per_node"] =
      benchmark::Counter(static_cast<double>(nodes), benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}

void BM_Capture(benchmark::State& state) {
  if (!have_backend(state, backend_of(state))) return;
  Context ctx(Device{backend_of(state), 0});
  Body body(ctx);
  for (auto _ : state) {
    Capture cap(ctx);
    body.issue(1);
    benchmark::DoNotOptimize(cap.end());
  }
  per_node(state, kBodyOps);
}

void BM_Instantiate(benchmark::State& state) {
  if (!have_backend(state, backend_of(state))) return;
  Context ctx(Device{backend_of(state), 0});
  Body body(ctx);
  Graph g;
  {
    Capture cap(ctx);
    body.issue(1);
    g = cap.end();
  }
  for (auto _ : state) {
    GraphExec exec(g, ctx.device());
    benchmark::DoNotOptimize(exec);
  }
  per_node(state, kBodyOps);
}

void BM_Update(benchmark::State& state) {
  if (!have_backend(state, backend_of(state))) return;
  Context ctx(Device{backend_of(state), 0});
  Body body(ctx);
  Graph g1, g2;
  {
    Capture cap(ctx);
    body.issue(1);
    g1 = cap.end();
  }
  {
    Capture cap(ctx);
    body.issue(2);
    g2 = cap.end();
  }
  GraphExec exec(g1, ctx.device());
  int i = 0;
  for (auto _ : state) exec.update(++i % 2 == 0 ? g1 : g2);
  per_node(state, kBodyOps);
}

/// A rebinding of a wide graph: W copy nodes over distinct buffers, every node retargeted in one
/// batched update, alternating between two sets of buffers (what a lazy program's rebinding
/// asks of the graph layer: 2W objects renamed in place; the uses given, as the lazy layer does).
void BM_UpdateNodesWide(benchmark::State& state) {
  if (!have_backend(state, backend_of(state))) return;
  Context ctx(Device{backend_of(state), 0});
  const auto w = static_cast<std::size_t>(state.range(1));
  std::vector<DeviceBuffer<std::uint8_t>> src[2], dst[2];
  for (int set = 0; set < 2; ++set) {
    for (std::size_t k = 0; k < w; ++k) {
      src[set].emplace_back(ctx, 256);
      dst[set].emplace_back(ctx, 256);
    }
  }
  Graph g("wide");
  std::vector<Node> nodes;
  for (std::size_t k = 0; k < w; ++k) {
    nodes.push_back(g.add_copy(dst[0][k].data(), src[0][k].data(), 256, {.name = "copy"}));
  }
  GraphExec exec(g, ctx.device());
  std::vector<GraphExec::NodeUpdate> updates(w);
  int set = 0;
  for (auto _ : state) {
    set ^= 1;
    for (std::size_t k = 0; k < w; ++k) {
      updates[k].node = nodes[k];
      updates[k].dst = dst[set][k].data();
      updates[k].src = src[set][k].data();
      updates[k].bytes = 256;
      updates[k].uses.assign({{dst[set][k].object_id(), Access::write, {}},
                              {src[set][k].object_id(), Access::read, {}}});
    }
    exec.update(updates);
  }
  per_node(state, static_cast<int>(w));
}

#ifdef SLUICE_BENCH_CUDA
/// BM_Update with the whole-graph path (one cudaGraphExecUpdate of the rebuilt graph) instead of
/// a SetParams call per changed node: SLUICE_CUDA_GRAPH_WHOLE_UPDATE=1 for its duration.
void BM_UpdateWhole(benchmark::State& state) {
  ::setenv("SLUICE_CUDA_GRAPH_WHOLE_UPDATE", "1", 1);
  BM_Update(state);
  ::unsetenv("SLUICE_CUDA_GRAPH_WHOLE_UPDATE");
}
#endif

/// Host cost of issuing the body eagerly (completion excluded: synchronized outside the timing).
void BM_EagerBody(benchmark::State& state) {
  if (!have_backend(state, backend_of(state))) return;
  Context ctx(Device{backend_of(state), 0});
  Body body(ctx);
  int i = 0;
  for (auto _ : state) {
    body.issue(++i);
    state.PauseTiming();
    ctx.synchronize();
    state.ResumeTiming();
  }
}

/// Counters of the replays a benchmark ran: the shares issued eagerly as cheaper, and launched
/// unchanged (the body matched the last recording operation by operation: no update).
void count_eager(benchmark::State& state, const graph::Stats& before) {
  const auto after = graph::stats();
  const auto runs = static_cast<double>(std::max<std::int64_t>(1, state.iterations()));
  state.counters["eager_share"] =
      static_cast<double>(after.eager_cheaper - before.eager_cheaper) / runs;
  state.counters["unchanged_share"] =
      static_cast<double>(after.unchanged - before.unchanged) / runs;
}

/// Host cost of the same body through Replay: capture, compare, update, launch, or the body
/// issued eagerly where that measured cheaper (range(1) = 1: the default policy; 0: every run
/// replays, ReplayOptions::eager_when_cheaper off). eager_share: the runs issued eagerly.
void BM_ReplayBody(benchmark::State& state) {
  if (!have_backend(state, backend_of(state))) return;
  Context ctx(Device{backend_of(state), 0});
  Body body(ctx);
  Replay replay(ReplayOptions{.eager_when_cheaper = state.range(1) != 0});
  const auto before = graph::stats();
  int i = 0;
  for (auto _ : state) {
    const int v = ++i;
    replay.run(ctx, "body", [&] { body.issue(v); });
    state.PauseTiming();
    ctx.synchronize();
    state.ResumeTiming();
  }
  count_eager(state, before);
}

/// As BM_ReplayBody with the same memset values every time: each operation recorded is compared
/// with the last recording, and the executable launched as it is (unchanged_share near 1).
void BM_ReplayBodyUnchanged(benchmark::State& state) {
  if (!have_backend(state, backend_of(state))) return;
  Context ctx(Device{backend_of(state), 0});
  Body body(ctx);
  Replay replay(ReplayOptions{.eager_when_cheaper = state.range(1) != 0});
  const auto before = graph::stats();
  for (auto _ : state) {
    replay.run(ctx, "body", [&] { body.issue(7); });
    state.PauseTiming();
    ctx.synchronize();
    state.ResumeTiming();
  }
  count_eager(state, before);
}

/// The launch of the captured 100-memset body alone (its tracked accesses and the backend's
/// launch): what a replay adds to the capture and the updates.
void BM_LaunchBody(benchmark::State& state) {
  if (!have_backend(state, backend_of(state))) return;
  Context ctx(Device{backend_of(state), 0});
  Body body(ctx);
  Graph g;
  {
    Capture cap(ctx);
    body.issue(1);
    g = cap.end();
  }
  GraphExec exec(g, ctx.device());
  for (auto _ : state) {
    exec.launch(ctx);
    state.PauseTiming();
    ctx.synchronize();
    state.ResumeTiming();
  }
}

/// The replay and launch benchmarks with the backends' batched nodes off (SLUICE_GRAPH_COALESCE=0
/// for their duration; read at instantiation): on cuda the graph then has 100 memset nodes
/// instead of one batched kernel node.
class Unbatched {
 public:
  Unbatched() { ::setenv("SLUICE_GRAPH_COALESCE", "0", 1); }
  ~Unbatched() { ::unsetenv("SLUICE_GRAPH_COALESCE"); }
  Unbatched(const Unbatched&) = delete;
  Unbatched& operator=(const Unbatched&) = delete;
};
void BM_ReplayBodyUnbatched(benchmark::State& state) {
  Unbatched off;
  BM_ReplayBody(state);
}
void BM_ReplayBodyUnchangedUnbatched(benchmark::State& state) {
  Unbatched off;
  BM_ReplayBodyUnchanged(state);
}
void BM_LaunchBodyUnbatched(benchmark::State& state) {
  Unbatched off;
  BM_LaunchBody(state);
}

BENCHMARK(BM_Capture)->Arg(0)->Arg(1);
BENCHMARK(BM_Instantiate)->Arg(0)->Arg(1);
BENCHMARK(BM_Update)->Arg(0)->Arg(1);
BENCHMARK(BM_UpdateNodesWide)->ArgsProduct({{0, 1}, {16, 64, 256}});
#ifdef SLUICE_BENCH_CUDA
BENCHMARK(BM_UpdateWhole)->Arg(1);
#endif
BENCHMARK(BM_EagerBody)->Arg(0)->Arg(1);
BENCHMARK(BM_ReplayBody)->ArgsProduct({{0, 1}, {1, 0}});
BENCHMARK(BM_ReplayBodyUnchanged)->ArgsProduct({{0, 1}, {1, 0}});
BENCHMARK(BM_LaunchBody)->Arg(0)->Arg(1);
BENCHMARK(BM_ReplayBodyUnbatched)->ArgsProduct({{0, 1}, {0}});
BENCHMARK(BM_ReplayBodyUnchangedUnbatched)->ArgsProduct({{0, 1}, {0}});
BENCHMARK(BM_LaunchBodyUnbatched)->Arg(0)->Arg(1);

#ifdef SLUICE_BENCH_CUDA
constexpr int kNodes = 1000;

/// Launch + synchronize of 1000 empty kernels through sluice (arg 1: chain, 0: fan-out).
void BM_SluiceGraphLaunch(benchmark::State& state) {
  if (!have_backend(state, "cuda")) return;
  Context ctx(Device{"cuda", 0});
  Graph g(state.range(0) ? "chain" : "fan-out");
  Node prev;
  for (int i = 0; i < kNodes; ++i) {
    KernelWork w;
    w.device = device_kernel(empty_kernel_ptr(), 1u, 1u, 0);
    NodeOptions o;
    if (state.range(0) && i > 0) o.after = {prev};
    prev = g.add_kernel(std::move(w), std::move(o));
  }
  GraphExec exec(g, ctx.device());
  exec.launch(ctx);
  ctx.synchronize();
  for (auto _ : state) {
    exec.launch(ctx);
    ctx.synchronize();
  }
  per_node(state, kNodes);
}

void BM_RawGraphLaunch(benchmark::State& state) {
  if (!have_backend(state, "cuda")) return;
  RawGraph* r = raw_graph_create(kNodes, state.range(0) != 0);
  raw_graph_launch_sync(r);
  for (auto _ : state) raw_graph_launch_sync(r);
  raw_graph_destroy(r);
  per_node(state, kNodes);
}

/// Host cost of one empty relaxed capture begun and ended (docs/graph.md: detecting foreign work
/// between captured operations would add this to every operation); `detects` = 1 if a foreign
/// memset inside such a capture shows as a node.
void BM_ScratchCaptureProbe(benchmark::State& state) {
  if (!have_backend(state, "cuda")) return;
  RawCaptureProbe* p = raw_capture_probe_create();
  const bool detects = raw_capture_probe_detects_foreign(p);
  for (auto _ : state) raw_capture_probe_empty(p);
  raw_capture_probe_destroy(p);
  state.counters["detects"] = detects ? 1.0 : 0.0;
}

/// A chain of 20 streaming kernels with programmatic dependent launch (the la step kernels'
/// launch): microseconds per kernel on a stream with and without PDL, captured into a graph,
/// nested as a child graph and inside a while node's body (graph-mode CG's place for them), and
/// how many of the captured graph's edges CUDA made programmatic. range(0): doubles per vector
/// (2^25: ~200 us kernels, the 1e8-nonzero case; 2^20: ~8 us ones).
void BM_PdlChain(benchmark::State& state) {
  if (!have_backend(state, "cuda")) return;
  PdlChainTimes t;
  for (auto _ : state) {
    t = run_pdl_chain(20, state.range(0), 7);
    if (!t.error.empty()) {
      state.SkipWithError(t.error.c_str());
      return;
    }
  }
  state.counters["stream_pdl_us"] = t.stream_pdl;
  state.counters["stream_plain_us"] = t.stream_plain;
  state.counters["graph_pdl_us"] = t.graph_pdl;
  state.counters["graph_plain_us"] = t.graph_plain;
  state.counters["child_pdl_us"] = t.child_pdl;
  state.counters["while_pdl_us"] = t.while_pdl;
  state.counters["programmatic_edges"] = t.programmatic_edges;
  state.counters["edges"] = t.edges;
}

BENCHMARK(BM_PdlChain)->Arg(1 << 25)->Arg(1 << 20)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ScratchCaptureProbe);
BENCHMARK(BM_SluiceGraphLaunch)->Arg(1)->Arg(0)->UseRealTime();
BENCHMARK(BM_RawGraphLaunch)->Arg(1)->Arg(0)->UseRealTime();
#endif

}  // namespace

BENCHMARK_MAIN();
