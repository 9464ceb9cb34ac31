// The graph layer on every backend: explicit graphs, validation errors, DOT, updates, conditional
// nodes, capture across contexts, the capture guard and replay.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backend_param.hpp"
#include "sluice/graph.hpp"
#ifdef SLUICE_TEST_CUDA
#include "graph_test_kernels.hpp"
#endif

namespace sluice::test {
namespace {

class GraphTest : public BackendTest {
 protected:
  /// x[i] += v on whichever backend runs it.
  static KernelWork add_work(int* x, int n, int v) {
    KernelWork w;
    w.range = static_cast<std::size_t>(n);
    w.host = [=](std::size_t lo, std::size_t hi) {
      for (std::size_t i = lo; i < hi; ++i) x[i] += v;
    };
#ifdef SLUICE_TEST_CUDA
    w.device =
        device_kernel(graph_test_add, static_cast<unsigned>((n + 255) / 256), 256u, 0, x, n, v);
#endif
    return w;
  }
  static KernelWork countdown_work(int* counter, int* trips) {
    KernelWork w;
    w.range = 1;
    w.host = [=](std::size_t, std::size_t) {
      ++*trips;
      --*counter;
    };
#ifdef SLUICE_TEST_CUDA
    w.device = device_kernel(graph_test_countdown, 1u, 1u, 0, counter, trips);
#endif
    return w;
  }
  template <class T>
  std::vector<T> read(const Context& ctx, const DeviceBuffer<T>& b) {
    std::vector<T> h(b.size());
    copy(ctx, h, b);
    ctx.synchronize();
    return h;
  }
};

TEST_P(GraphTest, ExplicitGraphRunsInDependencyOrderManyTimes) {
  auto ctx = make_context();
  constexpr int n = 1000;
  DeviceBuffer<int> x(ctx, n), y(ctx, n);
  Graph g("explicit");
  auto zero = g.add_memset(x.data(), 0, x.bytes(), {.name = "zero x", .uses = {writes(x)}});
  auto add = g.add_kernel(add_work(x.data(), n, 3),
                          {.name = "x += 3", .uses = {updates(x)}, .after = {zero}});
  auto cp = g.add_copy(y.data(), x.data(), x.bytes(),
                       {.name = "y = x", .uses = {reads(x), writes(y)}, .after = {add}});
  g.add_kernel(add_work(y.data(), n, 1), {.name = "y += 1", .uses = {updates(y)}, .after = {cp}});
  EXPECT_EQ(g.size(), 4u);
  GraphExec exec(g, device());
  for (int i = 0; i < 5; ++i) exec.launch(ctx);
  EXPECT_EQ(read(ctx, x), std::vector<int>(n, 3));
  EXPECT_EQ(read(ctx, y), std::vector<int>(n, 4));
  EXPECT_GE(graph::stats().launches, 5u);
}

TEST_P(GraphTest, LaunchIsOrderedByTheTrackerAcrossContexts) {
  auto a = make_context();
  auto b = make_context();
  constexpr int n = 4096;
  DeviceBuffer<int> x(a, n);
  memset(a, x, 0);
  Graph g;
  g.add_kernel(add_work(x.data(), n, 1), {.name = "x += 1", .uses = {updates(x)}});
  GraphExec exec(g, device());
  // Alternating contexts: each launch must see the previous one's write.
  for (int i = 0; i < 20; ++i) exec.launch(i % 2 == 0 ? a : b);
  EXPECT_EQ(read(a, x), std::vector<int>(n, 20));
}

TEST_P(GraphTest, ValidationErrorsNameTheNodes) {
  Graph g("g1");
  auto a = g.add_empty({.name = "first"});
  auto b = g.add_empty({.name = "second", .after = {a}});
  auto c = g.add_empty({.name = "third", .after = {b}});
  try {
    g.add_edge(c, a);
    FAIL() << "a cycle was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'third' -> 'first'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g.add_edge(a, a), Error);
  Graph other("g2");
  auto foreign = other.add_empty({.name = "stranger"});
  try {
    g.add_edge(a, foreign);
    FAIL() << "a foreign node was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'stranger' belongs to graph 'g2'"), std::string::npos)
        << e.what();
  }
  Node dangling;
  {
    Graph gone("gone");
    dangling = gone.add_empty({.name = "ghost"});
  }
  EXPECT_FALSE(dangling.valid());
  try {
    g.add_edge(a, dangling);
    FAIL() << "a node of a destroyed graph was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("after its graph was destroyed"), std::string::npos);
  }
  EXPECT_THROW((void)g.find("nobody"), Error);
  EXPECT_EQ(g.find("second").index(), 1u);
  EXPECT_EQ(g.edges().size(), 2u);  // the failed edges left nothing behind
}

TEST_P(GraphTest, DotShowsNamesKindsAndEdges) {
  auto ctx = make_context();
  DeviceBuffer<int> x(ctx, 16);
  Graph g("dotted");
  auto m = g.add_memset(x.data(), 0, x.bytes(), {.name = "clear"});
  Graph body("inner");
  body.add_empty({.name = "inside"});
  g.add_child(body, {.name = "nested", .after = {m}});
  const auto dot = g.dot();
  EXPECT_NE(dot.find("digraph \"dotted\""), std::string::npos);
  EXPECT_NE(dot.find("clear\\nmemset"), std::string::npos) << dot;
  EXPECT_NE(dot.find("nested\\nchild"), std::string::npos) << dot;
  EXPECT_NE(dot.find("inside\\nempty"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n0 -> n1"), std::string::npos) << dot;
  GraphExec exec(g, device());
  std::ostringstream s;
  exec.write_dot(s);
  EXPECT_EQ(s.str(), dot);
}

TEST_P(GraphTest, ParameterUpdatesInPlace) {
  auto ctx = make_context();
  constexpr int n = 512;
  DeviceBuffer<int> x(ctx, n), y(ctx, n), z(ctx, n);
  Graph g("updatable");
  auto set = g.add_memset(x.data(), 0, x.bytes(), {.name = "set", .uses = {writes(x)}});
  auto k = g.add_kernel(add_work(x.data(), n, 2), {.name = "add", .after = {set}});
  auto cp = g.add_copy(y.data(), x.data(), x.bytes(), {.name = "copy", .after = {k}});
  GraphExec exec(g, device());
  exec.launch(ctx);
  EXPECT_EQ(read(ctx, y), std::vector<int>(n, 2));
  exec.set_kernel(k, add_work(x.data(), n, 7));
  exec.set_copy(cp, z.data(), x.data(), x.bytes());
  exec.set_memset(set, x.data(), 1, x.bytes());  // every byte 1: 0x01010101
  const auto before = graph::stats().instantiations;
  exec.launch(ctx);
  EXPECT_EQ(graph::stats().instantiations, before);  // no re-instantiation
  EXPECT_EQ(read(ctx, z), std::vector<int>(n, 0x01010101 + 7));
  EXPECT_EQ(read(ctx, y), std::vector<int>(n, 2));               // the old destination is untouched
  EXPECT_THROW(exec.set_copy(k, z.data(), x.data(), 4), Error);  // wrong kind
}

TEST_P(GraphTest, BatchedUpdatesApplyTogetherOrNotAtAll) {
  auto ctx = make_context();
  constexpr int n = 512;
  DeviceBuffer<int> x(ctx, n), y(ctx, n), z(ctx, n), w(ctx, n);
  Graph g("batched");
  auto set = g.add_memset(x.data(), 0, x.bytes(), {.name = "set", .uses = {writes(x)}});
  auto k =
      g.add_kernel(add_work(x.data(), n, 2), {.name = "add", .uses = {updates(x)}, .after = {set}});
  auto cp = g.add_copy(y.data(), x.data(), x.bytes(), {.name = "copy", .after = {k}});
  GraphExec exec(g, device());
  exec.launch(ctx);
  EXPECT_EQ(read(ctx, y), std::vector<int>(n, 2));
  // Both nodes at once: the kernel adds 5 to z (set apart by a copy of x), the copy goes to w.
  std::vector<GraphExec::NodeUpdate> bad(2);
  bad[0].node = k;
  bad[0].kernel = add_work(x.data(), n, 5);
  bad[0].uses = {updates(x)};
  bad[1].node = k;  // a kernel node given a copy's parameters: refused, nothing applied
  bad[1].dst = w.data();
  bad[1].src = x.data();
  bad[1].bytes = x.bytes();
  EXPECT_THROW(exec.update(bad), Error);
  std::vector<GraphExec::NodeUpdate> recorded(1);
  recorded[0].node = cp;  // a new recording is for a captured node only
  recorded[0].recording = std::make_shared<int>(0);
  EXPECT_THROW(exec.update(recorded), Error);
  EXPECT_THROW((void)g.add_recorded(nullptr, {.name = "nothing recorded"}), Error);
  exec.launch(ctx);
  EXPECT_EQ(read(ctx, y), std::vector<int>(n, 2));  // unchanged executable
  std::vector<GraphExec::NodeUpdate> good(2);
  good[0].node = k;
  good[0].kernel = add_work(x.data(), n, 5);
  good[0].uses = {updates(x)};
  good[1].node = cp;
  good[1].dst = w.data();
  good[1].src = x.data();
  good[1].bytes = x.bytes();
  const auto before = graph::stats().instantiations;
  exec.update(good);
  exec.launch(ctx);
  EXPECT_EQ(graph::stats().instantiations, before);  // in place
  EXPECT_EQ(read(ctx, w), std::vector<int>(n, 5));
  EXPECT_EQ(read(ctx, y), std::vector<int>(n, 2));  // the old destination is untouched
  // The launch is ordered by the copy's new destination: another context's later write of w
  // waits for it.
  auto other = make_context();
  exec.launch(ctx);
  memset(other, w, 0);
  EXPECT_EQ(read(other, w), std::vector<int>(n, 0));
}

TEST_P(GraphTest, BatchedUpdatesOrderLaunchesByTheNewBuffersAndKeepLaunchesInFlight) {
  auto ctx = make_context(), other = make_context();
  constexpr int n = 256;
  DeviceBuffer<int> x(ctx, n), x2(ctx, n), x3(ctx, n), y1(ctx, n), y2(ctx, n), z1(ctx, n),
      z2(ctx, n);
  const std::vector<int> ones(n, 1), twenties(n, 20), thirties(n, 30);
  copy(ctx, x, ones);
  ctx.synchronize();
  Graph g("two copies of x");
  auto c1 = g.add_copy(y1.data(), x.data(), x.bytes(), {.name = "y1 = x"});
  auto c2 = g.add_copy(y2.data(), x.data(), x.bytes(), {.name = "y2 = x"});
  GraphExec exec(g, device());
  auto copy_update = [](const Node& node, DeviceBuffer<int>& dst, const DeviceBuffer<int>& src) {
    GraphExec::NodeUpdate u;
    u.node = node;
    u.dst = dst.data();
    u.src = src.data();
    u.bytes = src.bytes();
    return u;
  };
  const auto pause = std::chrono::milliseconds(20);
  exec.launch(ctx);  // ungated first: a kernel's first launch on cuda waits for running kernels
  ctx.synchronize();
  {
    Gate held(device()), writer(device());
    held.block(ctx);
    writer.block(other);
    exec.launch(ctx);  // y1, y2 = x: still in flight during the update
    // Every use of x, y1 and y2 moves to x2, z1 and z2 (the accesses renamed in place).
    std::vector<GraphExec::NodeUpdate> both{copy_update(c1, z1, x2), copy_update(c2, z2, x2)};
    exec.update(both);
    copy(other, x2, twenties);  // held back: the next launch reads x2 after it
    exec.launch(ctx);
    held.open();
    std::this_thread::sleep_for(pause);  // a launch not ordered after the write would run now
    writer.open();
    other.synchronize();
  }
  EXPECT_EQ(read(ctx, y1), ones);  // the launch in flight kept its parameters
  EXPECT_EQ(read(ctx, y2), ones);
  EXPECT_EQ(read(ctx, z1), twenties);
  EXPECT_EQ(read(ctx, z2), twenties);
  {
    // One node moves to x3, the other keeps x2 (the accesses merged again).
    Gate gate(device());
    gate.block(other);
    copy(other, x3, thirties);
    std::vector<GraphExec::NodeUpdate> one{copy_update(c1, z1, x3)};
    exec.update(one);
    exec.launch(ctx);
    std::this_thread::sleep_for(pause);
    gate.open();
    other.synchronize();
  }
  EXPECT_EQ(read(ctx, z1), thirties);
  EXPECT_EQ(read(ctx, z2), twenties);
  {
    // Back to x2 for both, while another context writes x2 and x3 after the launch: neither
    // write may reach the launch (it reads x2, and no longer x3).
    Gate gate(device());
    gate.block(ctx);
    std::vector<GraphExec::NodeUpdate> back{copy_update(c1, z1, x2)};
    exec.update(back);
    exec.launch(ctx);
    copy(other, x2, ones);  // must wait for the launch reading x2
    std::this_thread::sleep_for(pause);
    gate.open();
    other.synchronize();
  }
  EXPECT_EQ(read(ctx, z1), twenties);
  EXPECT_EQ(read(ctx, z2), twenties);
  EXPECT_EQ(read(ctx, x2), ones);
}

TEST_P(GraphTest, UsesOnlyUpdatesKeepTheParametersAndOrderLaunchesByTheNewUses) {
  // The kernel adds 5 to z but is declared to update x (as a kernel that finds its buffers in a
  // table would be, before the update that tells the tracker where they now are).
  auto ctx = make_context(), other = make_context();
  constexpr int n = 256;
  DeviceBuffer<int> x(ctx, n), z(ctx, n);
  memset(ctx, x, 0);
  memset(ctx, z, 0);
  Graph g("uses only");
  auto k = g.add_kernel(add_work(z.data(), n, 5), {.name = "z += 5", .uses = {updates(x)}});
  GraphExec exec(g, device());
  exec.launch(ctx);  // ungated first: a kernel's first launch on cuda waits for running kernels
  ctx.synchronize();
  std::vector<GraphExec::NodeUpdate> both(1);
  both[0].node = k;
  both[0].uses_only = true;
  both[0].uses = {updates(z)};
  both[0].kernel = add_work(z.data(), n, 7);  // parameters and uses_only: refused
  EXPECT_THROW(exec.update(both), Error);
  std::vector<GraphExec::NodeUpdate> uses(1);
  uses[0].node = k;
  uses[0].uses_only = true;
  uses[0].uses = {updates(z)};
  const auto before = graph::stats().instantiations;
  exec.update(uses);
  EXPECT_EQ(graph::stats().instantiations, before);
  {
    // Another context's write of z, held back: the launch now waits for it (declared on x, it
    // would have run first and the write would have left z at 1).
    Gate gate(device());
    gate.block(other);
    const std::vector<int> ones(n, 1);
    copy(other, z, ones);
    exec.launch(ctx);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate.open();
    other.synchronize();
  }
  EXPECT_EQ(read(ctx, z), std::vector<int>(n, 6));  // the kept parameters, after the write
  EXPECT_EQ(read(ctx, x), std::vector<int>(n, 0));
}

TEST_P(GraphTest, WideUpdatesRenameSwapsAndChainsInPlaceAndStayOrdered) {
  // Hundreds of objects renamed in one update (a wide program's rebinding), among them buffers
  // swapped with each other and renamed along a chain; another context writes what the graph
  // then reads.
  auto ctx = make_context(), other = make_context();
  constexpr int K = 160, n = 64;
  // The values other writes come from device buffers: device-to-device copies, queued behind
  // the gates without a host copy.
  std::vector<DeviceBuffer<int>> a, b, c, d, e, minus, twice;
  for (int k = 0; k < K; ++k) {
    for (auto [v, value] :
         {std::pair{&a, k}, std::pair{&b, 1000 + k}, std::pair{&c, 0}, std::pair{&d, 0},
          std::pair{&e, 7}, std::pair{&minus, -1}, std::pair{&twice, 2 * k}}) {
      v->emplace_back(ctx, n);
      fill(ctx, v->back(), value);
    }
  }
  ctx.synchronize();
  Graph g("wide copies");
  std::vector<Node> nodes;
  for (int k = 0; k < K; ++k) {
    nodes.push_back(g.add_copy(b[k].data(), a[k].data(), a[k].bytes(), {.name = "b = a"}));
  }
  GraphExec exec(g, device());
  auto retarget = [&](std::vector<DeviceBuffer<int>>& dst, std::vector<DeviceBuffer<int>>& src) {
    std::vector<GraphExec::NodeUpdate> u(K);
    for (int k = 0; k < K; ++k) {
      u[k].node = nodes[k];
      u[k].dst = dst[k].data();
      u[k].src = src[k].data();
      u[k].bytes = src[k].bytes();
    }
    exec.update(u);
  };
  const auto pause = std::chrono::milliseconds(20);
  exec.launch(ctx);  // b = a
  ctx.synchronize();
  for (int k = 0; k < K; k += 37) EXPECT_EQ(read(ctx, b[k]), std::vector<int>(n, k));
  {
    // Swapped in one update (a = b: a becomes b and b becomes a); a write of b by another
    // context after the launch must wait for the launch that reads it.
    retarget(a, b);
    Gate gate(device());
    gate.block(ctx);
    exec.launch(ctx);
    for (int k = 0; k < K; ++k) copy(other, b[k], minus[k]);
    std::this_thread::sleep_for(pause);
    gate.open();
    other.synchronize();
  }
  for (int k = 0; k < K; k += 37) {
    EXPECT_EQ(read(ctx, a[k]), std::vector<int>(n, k)) << k;  // b held a's values
    EXPECT_EQ(read(ctx, b[k]), std::vector<int>(n, -1)) << k;
  }
  {
    // Along a chain (c = a: a becomes c, b becomes a); a write of a by another context held
    // back must come before the launch that now reads a.
    retarget(c, a);
    Gate gate(device());
    gate.block(other);
    for (int k = 0; k < K; ++k) copy(other, a[k], twice[k]);
    exec.launch(ctx);
    std::this_thread::sleep_for(pause);
    gate.open();
    other.synchronize();
  }
  for (int k = 0; k < K; k += 37) EXPECT_EQ(read(ctx, c[k]), std::vector<int>(n, 2 * k)) << k;
  {
    // To objects new to the graph (d = e): a held-back write of e must come first.
    retarget(d, e);
    Gate gate(device());
    gate.block(other);
    for (int k = 0; k < K; ++k) copy(other, e[k], minus[k]);
    exec.launch(ctx);
    std::this_thread::sleep_for(pause);
    gate.open();
    other.synchronize();
  }
  for (int k = 0; k < K; k += 37) EXPECT_EQ(read(ctx, d[k]), std::vector<int>(n, -1)) << k;
}

TEST_P(GraphTest, WholeUpdateAndTopologyErrors) {
  auto ctx = make_context();
  constexpr int n = 64;
  DeviceBuffer<int> x(ctx, n), y(ctx, n);
  auto build = [&](int* target, int v, bool extra) {
    Graph g("step");
    auto s = g.add_memset(target, 0, n * sizeof(int), {.name = "clear"});
    auto k = g.add_kernel(add_work(target, n, v), {.name = "bump", .after = {s}});
    if (extra) g.add_empty({.name = "tail", .after = {k}});
    return g;
  };
  GraphExec exec(build(x.data(), 1, false), device());
  exec.update(build(y.data(), 5, false));
  exec.launch(ctx);
  EXPECT_EQ(read(ctx, y), std::vector<int>(n, 5));
  try {
    exec.update(build(x.data(), 1, true));
    FAIL() << "a topology change was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 2 'tail': node added"), std::string::npos)
        << e.what();
  }
  Graph swapped("step");
  swapped.add_kernel(add_work(x.data(), n, 1), {.name = "bump"});
  swapped.add_memset(x.data(), 0, 4, {.name = "clear"});
  try {
    exec.update(swapped);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 0 'bump': kind kernel instead of memset"),
              std::string::npos)
        << e.what();
  }
  exec.launch(ctx);  // still the last good parameters
  EXPECT_EQ(read(ctx, y), std::vector<int>(n, 5));
}

TEST_P(GraphTest, WhileNodeRunsADataDependentNumberOfTrips) {
  auto ctx = make_context();
  for (int trips_wanted : {0, 1, 7}) {
    Managed<std::int32_t> counter(trips_wanted, ctx);
    DeviceBuffer<int> trips(ctx, 1);
    memset(ctx, trips, 0);
    Graph body("body");
    body.add_kernel(countdown_work(counter.device_ptr(), trips.data()),
                    {.name = "count down", .uses = {updates(counter), updates(trips)}});
    Graph g("loop");
    g.add_while(counter, body, {.name = "while counter"});
    GraphExec exec(g, device());
    exec.launch(ctx);
    EXPECT_EQ(read(ctx, trips)[0], trips_wanted);
    EXPECT_EQ(counter.value(), 0);
  }
}

TEST_P(GraphTest, IfNodeTakesItsBranchFromADeviceValue) {
  auto ctx = make_context();
  DeviceBuffer<int> x(ctx, 1);
  Graph then_g("then"), else_g("else");
  then_g.add_kernel(add_work(x.data(), 1, 10), {.name = "then"});
  else_g.add_kernel(add_work(x.data(), 1, 100), {.name = "else"});
  Managed<std::int64_t> flag(std::int64_t{1}, ctx);
  Graph g("branch");
  g.add_if(flag, then_g, else_g, {.name = "if flag", .uses = {updates(x)}});
  GraphExec exec(g, device());
  memset(ctx, x, 0);
  exec.launch(ctx);
  flag.assign(std::int64_t{0}, ctx);
  exec.launch(ctx);
  EXPECT_EQ(read(ctx, x)[0], 110);
}

TEST_P(GraphTest, TemporariesAndHostNodes) {
  auto ctx = make_context();
  constexpr int n = 32;
  DeviceBuffer<int> out(ctx, n);
  int calls = 0;
  Graph g("temps");
  auto t = g.add_alloc(ctx, n * sizeof(int), {.name = "scratch"});
  auto z = g.add_memset(t.ptr, 0, t.bytes, {.name = "zero scratch", .after = {t.node}});
  auto k = g.add_kernel(add_work(static_cast<int*>(t.ptr), n, 9), {.after = {z}});
  auto c = g.add_copy(out.data(), t.ptr, t.bytes, {.uses = {writes(out)}, .after = {k}});
  auto f = g.add_free(t, {.after = {c}});
  g.add_host([&calls] { ++calls; }, {.name = "count", .after = {f}});
  GraphExec exec(g, device());
  exec.launch(ctx);
  exec.launch(ctx);
  EXPECT_EQ(read(ctx, out), std::vector<int>(n, 9));
  EXPECT_EQ(calls, 2);
}

TEST_P(GraphTest, HostNodeExceptionIsReportedByTheNextWait) {
  auto ctx = make_context();
  int calls = 0;
  Graph g("throws");
  auto h = g.add_host([] { throw std::runtime_error("boom inside"); }, {.name = "thrower"});
  GraphExec exec(g, device());
  exec.launch(ctx);
  try {
    ctx.synchronize();
    FAIL() << "the host node's exception was not reported";
  } catch (const WorkFailed& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("thrower"), std::string::npos) << what;
    EXPECT_NE(what.find("boom inside"), std::string::npos) << what;
  }
  ctx.synchronize();  // reported once
  exec.set_host(h, [&calls] { ++calls; });
  exec.launch(ctx);
  ctx.synchronize();  // the context and the executable stay usable
  EXPECT_EQ(calls, 1);
}

// Destroying an executable never waits for its launches: a host node may need what the
// destroying thread holds (here a promise it keeps; in Python, the GIL). Before, the cuda
// executable waited for them in its destructor, and a Python host node deadlocked there.
TEST_P(GraphTest, DestroyingAnExecutableDoesNotWaitForItsLaunches) {
  auto ctx = make_context();
  std::promise<void> go;
  std::shared_future<void> released = go.get_future().share();
  std::atomic<int> ran{0};
  auto destroyed = std::async(std::launch::async, [&] {
    Graph g("held");
    g.add_host(
        [released, &ran] {
          released.wait();
          ran.fetch_add(1);
        },
        {.name = "waits"});
    GraphExec exec(g, device());
    exec.launch(ctx);
    exec.launch(ctx);
  });  // the graph and its executable go while the first host node still waits
  const bool returned = destroyed.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  go.set_value();  // lets the launches finish either way, so a failure does not hang
  destroyed.get();
  ctx.synchronize();
  EXPECT_TRUE(returned) << "destroying a GraphExec waited for its launches";
  EXPECT_EQ(ran.load(), 2);
}

TEST_P(GraphTest, ConditionalDefaultIsAssignedAtEachLaunchAndUpdatedInPlace) {
  auto ctx = make_context();
  Managed<std::int32_t> counter(0, ctx);
  DeviceBuffer<int> trips(ctx, 1);
  memset(ctx, trips, 0);
  Graph body("body");
  body.add_kernel(countdown_work(counter.device_ptr(), trips.data()),
                  {.name = "count down", .uses = {updates(counter), updates(trips)}});
  Graph g("loop");
  auto loop = g.add_while(counter, body, ConditionDefault{3}, {.name = "three trips"});
  GraphExec exec(g, device());
  exec.launch(ctx);
  exec.launch(ctx);  // the counter ended at 0; the default starts it at 3 again
  EXPECT_EQ(read(ctx, trips)[0], 6);
  const auto before = graph::stats().instantiations;
  exec.set_conditional_default(loop, 5);
  exec.launch(ctx);
  EXPECT_EQ(graph::stats().instantiations, before);  // in place
  EXPECT_EQ(read(ctx, trips)[0], 11);
  EXPECT_EQ(counter.value(), 0);

  DeviceBuffer<int> x(ctx, 1);
  memset(ctx, x, 0);
  Graph then_g("then"), else_g("else");
  then_g.add_kernel(add_work(x.data(), 1, 10), {.name = "then"});
  else_g.add_kernel(add_work(x.data(), 1, 100), {.name = "else"});
  Managed<std::int64_t> flag(std::int64_t{0}, ctx);
  Graph b("branch");
  auto branch =
      b.add_if(flag, then_g, else_g, ConditionDefault{1}, {.name = "if", .uses = {updates(x)}});
  GraphExec bx(b, device());
  bx.launch(ctx);  // flag is 0, but the default makes it 1
  bx.set_conditional_default(branch, 0);
  bx.launch(ctx);
  EXPECT_EQ(read(ctx, x)[0], 110);
  EXPECT_EQ(flag.value(), 0);

  // Errors: no default to change, a value that does not fit, a default that does not fit.
  Graph plain("plain");
  auto w = plain.add_while(counter, body, {.name = "no default"});
  GraphExec px(plain, device());
  try {
    px.set_conditional_default(w, 1);
    FAIL() << "a node without a default took one";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'no default' was made without a ConditionDefault"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(exec.set_conditional_default(loop, std::int64_t{1} << 40), Error);
  EXPECT_THROW((void)plain.add_while(counter, body, ConditionDefault{-(std::int64_t{1} << 33)}),
               Error);
  EXPECT_THROW(px.update(g), Error);  // a default's presence is topology
}

// A graph on `ctx`'s device whose launch blocks at a host node until `gate` is released, then
// adds 1 to x and records `done` (nothing declared: only the event orders readers of x).
Graph gated_producer(std::shared_future<void> gate, KernelWork fill, Event& done) {
  Graph g("producer");
  auto wait = g.add_host([gate] { gate.wait(); }, {.name = "gate"});
  auto k = g.add_kernel(std::move(fill), {.name = "fill", .after = {wait}});
  g.add_event_record(done, {.name = "x ready", .after = {k}});
  return g;
}

TEST_P(GraphTest, EventRecordNodeOrdersWaitsAfterTheNodeInTheLatestLaunch) {
  auto a = make_context();
  auto b = make_context();
  constexpr int n = 256;
  DeviceBuffer<int> x(a, n), y(b, n);
  memset(a, x, 0);
  a.synchronize();
  Event ready;
  std::promise<void> go;
  Graph g = gated_producer(go.get_future().share(), add_work(x.data(), n, 1), ready);
  EXPECT_EQ(g.node(2).kind(), NodeKind::event_record);
  EXPECT_TRUE(ready.query());  // bound, not launched yet: nothing to wait for
  GraphExec exec(g, device());
  exec.launch(a);
  Event copy_of_ready = ready;  // copies share the node's point
  EXPECT_FALSE(copy_of_ready.query());
  b.wait(copy_of_ready);
  copy(b, y, x);  // the graph declared no use of x: only the event orders this copy
  go.set_value();
  EXPECT_EQ(read(b, y), std::vector<int>(n, 1));
  exec.launch(a);  // re-records the event
  b.wait(ready);
  copy(b, y, x);
  EXPECT_EQ(read(b, y), std::vector<int>(n, 2));
  ready.synchronize();
  EXPECT_TRUE(ready.query());
  EXPECT_THROW((void)Event::elapsed_ms(ready, ready), Error);
  ready.record(a);  // detached: an ordinary point of a again
  exec.launch(a);
  a.synchronize();
  EXPECT_NE(g.dot().find("x ready\\nevent record"), std::string::npos) << g.dot();
}

TEST_P(GraphTest, EventWaitNodeWaitsForAnotherGraphsRecordNode) {
  auto a = make_context();
  auto b = make_context();
  constexpr int n = 128;
  DeviceBuffer<int> x(a, n), y(a, n);
  memset(a, x, 0);
  memset(a, y, 0);
  a.synchronize();
  Event ready;
  std::promise<void> go;
  GraphExec producer(gated_producer(go.get_future().share(), add_work(x.data(), n, 1), ready),
                     device());
  Graph consumer("consumer");
  auto w = consumer.add_event_wait(ready, {.name = "wait for x"});
  consumer.add_copy(y.data(), x.data(), x.bytes(), {.name = "y = x", .after = {w}});
  GraphExec exec(consumer, device());
  exec.launch(a);  // the producer never ran: the wait node does not wait
  EXPECT_EQ(read(a, y), std::vector<int>(n, 0));
  producer.launch(b);
  exec.launch(a);
  go.set_value();
  EXPECT_EQ(read(a, y), std::vector<int>(n, 1));

  // set_event_wait: an ordinary point of b, in place.
  Event on_b;
  std::promise<void> go2;
  b.host_task([gate = go2.get_future().share()] { gate.wait(); });
  producer.launch(b);  // after the gate: x becomes 2
  on_b.record(b);
  const auto before = graph::stats().instantiations;
  exec.set_event_wait(w, on_b);
  exec.launch(a);
  go2.set_value();
  EXPECT_EQ(read(a, y), std::vector<int>(n, 2));
  EXPECT_EQ(graph::stats().instantiations, before);
  b.synchronize();

  // Event nodes belong to the launched graph itself.
  Graph outer("outer");
  outer.add_child(consumer, {.name = "nested"});
  try {
    GraphExec bad(outer, device());
    FAIL() << "an event node inside a child graph was instantiated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("event wait node 'wait for x' is inside"),
              std::string::npos)
        << e.what();
  }
}

TEST_P(GraphTest, LaunchAfterAUsedBufferWasDestroyedIsAnError) {
  auto ctx = make_context();
  Graph g("dangling");
  {
    DeviceBuffer<int> x(ctx, 16);
    g.add_memset(x.data(), 0, x.bytes(), {.name = "clear", .uses = {writes(x)}});
  }
  try {
    // Refused when instantiated, before the backend sees the dangling address.
    GraphExec exec(g, device());
    exec.launch(ctx);
    FAIL() << "a graph using a destroyed buffer was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must outlive its launches"), std::string::npos)
        << e.what();
  }
  ctx.synchronize();  // nothing was issued
  Graph other("wrong device");
  EXPECT_THROW(GraphExec(other, Device{device().backend, 7}), Error);
}

// ---- capture ---------------------------------------------------------------------------------

TEST_P(GraphTest, CapturedCopiesAndMemsetsAreNodesUpdatedInPlaceByReplays) {
  auto ctx = make_context();
  constexpr int n = 64;
  DeviceBuffer<std::uint8_t> x(ctx, n), y(ctx, n), z(ctx, n);
  {
    Capture cap(ctx, "simple");
    memset(ctx, x, 3);
    copy(ctx, y, x);
    Graph g = cap.end();
    ASSERT_EQ(g.size(), 2u);
    EXPECT_EQ(g.node(0).kind(), NodeKind::memset);
    EXPECT_EQ(g.node(1).kind(), NodeKind::copy);
    EXPECT_NE(g.dot().find("[" + ctx.name() + "]"), std::string::npos) << g.dot();
  }
  // Updates in place on every run: the cost fallback, which may issue a cheap body eagerly
  // instead, is off (ReplayCostFallbackIssuesEagerlyWhenCheaper tests it).
  Replay replay(ReplayOptions{.eager_when_cheaper = false});
  std::vector<ReplayEvent> events;
  replay.on_event([&](const ReplayEvent& e) { events.push_back(e); });
  const auto before = graph::stats();
  for (int i = 1; i <= 6; ++i) {  // the value, and every other time the destination, change
    auto& dst = i % 2 == 0 ? y : z;
    replay.run(ctx, "step", [&] {
      memset(ctx, x, i);
      copy(ctx, dst, x);
    });
    EXPECT_EQ(read(ctx, dst), std::vector<std::uint8_t>(n, static_cast<std::uint8_t>(i)));
  }
  ASSERT_EQ(events.size(), 1u);  // the first run only
  EXPECT_EQ(events[0].kind, ReplayEvent::Kind::instantiated);
  EXPECT_EQ(graph::stats().updates - before.updates, 5u);
  EXPECT_EQ(graph::stats().instantiations - before.instantiations, 1u);
}

TEST_P(GraphTest, CaptureAcrossTwoContextsReplaysLikeEagerWork) {
  auto a = make_context();
  auto b = make_context();
  constexpr std::size_t n = 256;
  DeviceBuffer<std::uint8_t> x(a, n), y(a, n), z(a, n);
  memset(a, x, 1);
  a.synchronize();
  Graph g;
  {
    Capture cap(a, "two contexts");
    memset(a, y, 7);
    b.wait_for(a);  // b joins the capture
    copy(b, z, y);
    copy(a, x, y);
    a.wait_for(b);  // and is joined back
    g = cap.end();
  }
  ASSERT_EQ(g.size(), 3u);
  EXPECT_NE(g.dot().find("[" + b.name() + "]"), std::string::npos) << g.dot();
  // Nothing ran yet: capture records, launch runs.
  EXPECT_EQ(read(a, z)[0], read(a, z)[0]);  // contexts stay usable after the capture
  auto xs = read(a, x);
  EXPECT_EQ(xs[0], 1);
  GraphExec exec(g, device());
  exec.launch(b);
  EXPECT_EQ(read(a, x), std::vector<std::uint8_t>(n, 7));
  EXPECT_EQ(read(b, z), std::vector<std::uint8_t>(n, 7));
  // The edge memset -> copy on b exists.
  auto edges = g.edges();
  EXPECT_NE(std::find(edges.begin(), edges.end(), std::pair<std::uint32_t, std::uint32_t>{0, 1}),
            edges.end());
}

TEST_P(GraphTest, UnjoinedForkIsAnErrorNamingTheContext) {
  auto a = make_context();
  DeviceBuffer<std::uint8_t> x(a, 64), y(a, 64);
  std::string forked;
  try {
    Capture cap(a, "forky");
    memset(a, x, 1);
    auto kids = a.fork(1);
    forked = kids[0].name();
    copy(kids[0], y, x);
    (void)cap.end();
    FAIL() << "an unjoined fork was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'" + forked + "'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not joined back"), std::string::npos) << e.what();
  }
  memset(a, x, 3);  // usable afterwards
  EXPECT_EQ(read(a, x)[0], 3);
}

TEST_P(GraphTest, ForkAndJoinInsideACaptureBecomeEdges) {
  auto a = make_context();
  constexpr std::size_t n = 128;
  DeviceBuffer<std::uint8_t> x(a, n), y(a, n), z(a, n);
  memset(a, x, 5);
  Graph g;
  {
    Capture cap(a);
    auto kids = a.fork(2);
    copy(kids[0], y, x);
    copy(kids[1], z, x);
    a.join(kids);
    g = cap.end();
  }
  EXPECT_EQ(g.size(), 2u);  // two copies, independent
  EXPECT_TRUE(g.edges().empty());
  GraphExec exec(g, device());
  exec.launch(a);
  EXPECT_EQ(read(a, y), std::vector<std::uint8_t>(n, 5));
  EXPECT_EQ(read(a, z), std::vector<std::uint8_t>(n, 5));
}

TEST_P(GraphTest, CaptureGuardNamesTheOperationAndLine) {
  auto a = make_context();
  DeviceBuffer<std::uint8_t> x(a, 64);
  int line = 0;  // set by each body to the line of the operation that must be refused
  auto expect_guard = [&](const std::function<void()>& body, const char* what) {
    try {
      Capture cap(a, "guarded");
      memset(a, x, 1);
      body();
      (void)cap.end();
      ADD_FAILURE() << what << " was captured";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_state) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_EQ(e.where().line(), static_cast<std::uint_least32_t>(line)) << e.what();
      EXPECT_NE(std::string(e.what()).find("graph_test.cpp:" + std::to_string(line)),
                std::string::npos)
          << e.what();
    }
    memset(a, x, 2);  // the context stays usable
    EXPECT_EQ(read(a, x)[0], 2);
  };
  expect_guard(
      [&] {
        line = __LINE__ + 1;
        a.synchronize();
      },
      "synchronize");
  Managed<double> m(1.0, a);
  expect_guard(
      [&] {
        m.assign(m + 1.0, a);
        line = __LINE__ + 1;
        (void)m.value();
      },
      "host wait");
  std::vector<std::uint8_t> pageable(64);
  expect_guard(
      [&] {
        line = __LINE__ + 1;
        copy(a, pageable, x);
      },
      "pageable");
  auto blocking = make_context(StreamKind::blocking);
  EXPECT_THROW(Capture cap(blocking), Error);
  expect_guard(
      [&] {
        line = __LINE__ + 1;
        blocking.wait_for(a);
      },
      "blocking");
  EXPECT_EQ(m.value(), 1.0);  // the captured assignment never ran
}

TEST_P(GraphTest, CapturedManagedAndLaOperations) {
  auto a = make_context();
  Managed<double> s(2.0, a);
  Managed<double> out(a);
  Graph g;
  {
    Capture cap(a);
    out.assign(s * 3.0 + 1.0, a);
    g = cap.end();
  }
  EXPECT_EQ(g.size(), 1u);
  GraphExec exec(g, device());
  exec.launch(a);
  EXPECT_EQ(out.value(), 7.0);
  s.assign(5.0, a);
  exec.launch(a);
  EXPECT_EQ(out.value(), 16.0);
}

// ---- replay ----------------------------------------------------------------------------------

TEST_P(GraphTest, ReplayUpdatesChangedBuffersAndReportsReinstantiation) {
  auto a = make_context();
  constexpr std::size_t n = 128;
  std::vector<DeviceBuffer<std::uint8_t>> ins, outs;
  for (int i = 0; i < 3; ++i) {
    ins.emplace_back(a, n);
    outs.emplace_back(a, n);
    memset(a, ins.back(), 10 + i);
  }
  Replay r(ReplayOptions{.eager_when_cheaper = false});  // every run replays (see above)
  std::vector<ReplayEvent> events;
  r.on_event([&](const ReplayEvent& e) { events.push_back(e); });
  const auto updates_before = graph::stats().updates;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 3; ++i) {
      r.run(a, "copy", [&] { copy(a, outs[i], ins[i]); });
      EXPECT_EQ(read(a, outs[i]), std::vector<std::uint8_t>(n, 10 + i));  // host reads between
      memset(a, outs[i], 0);
    }
  }
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, ReplayEvent::Kind::instantiated);
  EXPECT_EQ(graph::stats().updates - updates_before, 5u);
  r.run(a, "copy", [&] {
    copy(a, outs[0], ins[0]);
    memset(a, outs[1], 3);
  });
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].kind, ReplayEvent::Kind::reinstantiated);
  EXPECT_NE(events[1].reason.find("node 1 'memset': node added"), std::string::npos)
      << events[1].reason;
  EXPECT_EQ(read(a, outs[1])[0], 3);
  r.run(a, "copy", [&] { a.synchronize(); });
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].kind, ReplayEvent::Kind::eager);
  EXPECT_NE(events[2].reason.find("synchronize"), std::string::npos) << events[2].reason;
}

// A body of many small memsets whose values change every run: each run either replays (an
// update of every node) or, where that measured cheaper in host time, issues the body eagerly
// (ReplayPolicy). Either way the results are the body's, and every run is accounted for.
TEST_P(GraphTest, ReplayCostFallbackKeepsResultsAndCountsEveryRun) {
  auto ctx = make_context();
  constexpr int kOps = 64, kRuns = 40;
  std::vector<DeviceBuffer<std::uint8_t>> bufs;
  for (int i = 0; i < kOps; ++i) bufs.emplace_back(ctx, 64);
  for (bool fallback : {true, false}) {
    SCOPED_TRACE(fallback ? "cost fallback on" : "cost fallback off");
    Replay r(ReplayOptions{.eager_when_cheaper = fallback});
    std::vector<ReplayEvent> events;
    r.on_event([&](const ReplayEvent& e) { events.push_back(e); });
    const auto before = graph::stats();
    for (int run = 1; run <= kRuns; ++run) {
      r.run(ctx, "memsets", [&] {
        for (int i = 0; i < kOps; ++i) memset(ctx, bufs[i], (run + i) % 251);
      });
      for (int i : {0, kOps / 2, kOps - 1}) {
        EXPECT_EQ(read(ctx, bufs[i]),
                  std::vector<std::uint8_t>(64, static_cast<std::uint8_t>((run + i) % 251)))
            << "run " << run;
      }
    }
    const auto after = graph::stats();
    const auto eager = after.eager_cheaper - before.eager_cheaper;
    EXPECT_EQ(after.instantiations - before.instantiations, 1u);
    EXPECT_EQ(after.updates - before.updates + eager, static_cast<std::uint64_t>(kRuns - 1));
    EXPECT_EQ(after.launches - before.launches, static_cast<std::uint64_t>(kRuns) - eager);
    if (!fallback) {
      EXPECT_EQ(eager, 0u);
    }
    for (std::size_t i = 1; i < events.size(); ++i) {
      EXPECT_EQ(events[i].kind, ReplayEvent::Kind::eager_cheaper) << events[i].reason;
    }
  }
}

TEST_P(GraphTest, ReplayOutputsReadByTheHostAreOrdered) {
  auto a = make_context();
  auto b = make_context();
  constexpr std::size_t n = 1 << 16;
  DeviceBuffer<std::uint8_t> src(a, n);
  PinnedBuffer<std::uint8_t> out(a, n);
  for (int i = 0; i < 10; ++i) {
    memset(a, src, i);
    replay(b, "pinned output", [&] { copy(b, out, src); });
    auto r = out.read();  // waits for the replay that wrote it, and only that
    EXPECT_EQ(r[0], i);
    EXPECT_EQ(r[n - 1], i);
  }
}

SLUICE_INSTANTIATE_BACKENDS(GraphTest);

}  // namespace
}  // namespace sluice::test
