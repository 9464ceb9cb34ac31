// Ordering around captures (issue 23, defects 2-4), on every backend: work issued after a
// capture is ordered after what the captured work waited for; a joined context's earlier work
// orders the launch; events recorded inside a capture refuse host waits; GraphExec::set_*
// orders a launch by the memory it was rebound to. Each case holds the earlier work back with a
// gate, so an unordered operation would run first and be seen.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "backend_param.hpp"
#include "sluice/graph.hpp"
#ifdef SLUICE_TEST_CUDA
#include "graph_test_kernels.hpp"
#endif

namespace sluice::test {
namespace {

class CaptureOrderTest : public BackendTest {
 protected:
  template <class T>
  static std::vector<T> read(const Context& ctx, const DeviceBuffer<T>& b) {
    std::vector<T> h(b.size());
    copy(ctx, h, b);
    ctx.synchronize();
    return h;
  }
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
};

constexpr std::size_t kN = 4096;

TEST_P(CaptureOrderTest, WriteAfterACaptureWaitsForTheWriteBeforeIt) {
  auto a = make_context();
  auto b = make_context();
  auto d = make_context();
  DeviceBuffer<std::uint8_t> x(a, kN);
  memset(a, x, 0);
  a.synchronize();
  Gate gate(device());
  gate.block(a);
  memset(a, x, 1);  // held back by the gate
  Graph g;
  {
    Capture cap(b, "overwrites x");
    memset(b, x, 5);  // waits for a's write (eagerly), then is recorded, not run
    g = cap.end();
  }
  memset(d, x, 2);  // issued last: must run last
  gate.open();
  for (const auto* c : {&a, &b, &d}) c->synchronize();
  EXPECT_EQ(read(a, x), std::vector<std::uint8_t>(kN, 2));
}

TEST_P(CaptureOrderTest, CopyToTheHostAfterACaptureSeesTheWriteBeforeIt) {
  auto a = make_context();
  auto b = make_context();
  auto d = make_context();
  DeviceBuffer<std::uint8_t> x(a, kN);
  PinnedBuffer<std::uint8_t> h(d, kN);
  memset(a, x, 0);
  a.synchronize();
  Gate gate(device());
  gate.block(a);
  memset(a, x, 1);
  {
    Capture cap(b, "overwrites x");
    memset(b, x, 5);
    (void)cap.end();
  }
  copy(d, h, x);  // the graph never ran: x holds a's 1 once a's write ran
  gate.open();
  d.synchronize();
  auto r = h.read();
  EXPECT_EQ(std::vector<std::uint8_t>(r.begin(), r.end()), std::vector<std::uint8_t>(kN, 1));
  a.synchronize();
}

TEST_P(CaptureOrderTest, DiscardedCaptureStillOrdersLaterWork) {
  auto a = make_context();
  auto b = make_context();
  auto d = make_context();
  DeviceBuffer<std::uint8_t> x(a, kN);
  memset(a, x, 0);
  a.synchronize();
  Gate gate(device());
  gate.block(a);
  memset(a, x, 1);
  {
    Capture cap(b, "dropped");
    memset(b, x, 5);
  }  // destroyed without end(): discarded
  memset(d, x, 2);
  gate.open();
  for (const auto* c : {&a, &b, &d}) c->synchronize();
  EXPECT_EQ(read(a, x), std::vector<std::uint8_t>(kN, 2));
}

TEST_P(CaptureOrderTest, AJoinedContextsEarlierWorkOrdersTheLaunch) {
  auto a = make_context();
  auto b = make_context();
  Managed<double> x(0.0, b);
  b.synchronize();
  Gate gate(device());
  gate.block(b);
  x.assign(7.0, b);  // held back
  Graph g;
  {
    Capture cap(a, "joined");
    b.wait_for(a);  // b joins the capture
    x.assign(x * 10.0, b);
    a.wait_for(b);  // and is joined back
    x.assign(x + 1.0, a);
    g = cap.end();
  }
  GraphExec exec(g, device());
  exec.launch(a);
  gate.open();
  EXPECT_EQ(x.value(), 71.0);
  b.synchronize();
}

TEST_P(CaptureOrderTest, ContextsThatUsedCapturedWorkWaitForWhatItWaitedFor) {
  // c joins and waits for a's held-back write of x eagerly; b joins after c and overwrites x in
  // the capture. Afterwards b itself writes x: b never waited for a on its stream, yet its write
  // comes after a's in issue order.
  auto a = make_context();
  auto o = make_context();
  auto b = make_context();
  auto c = make_context();
  DeviceBuffer<std::uint8_t> x(a, kN);
  memset(a, x, 0);
  a.synchronize();
  Gate gate(device());
  gate.block(a);
  memset(a, x, 1);
  {
    Capture cap(o, "chain");
    c.wait_for(o);
    memset(c, x, 3);  // c's stream waits for a's write now; the memset is recorded
    b.wait_for(c);    // b joins after c's node
    memset(b, x, 4);
    o.wait_for(b);
    o.wait_for(c);
    (void)cap.end();
  }
  memset(b, x, 2);
  gate.open();
  for (const auto* ctx : {&a, &o, &b, &c}) ctx->synchronize();
  EXPECT_EQ(read(a, x), std::vector<std::uint8_t>(kN, 2));
}

// ---- events recorded inside a capture (defect 4) ---------------------------------------------

TEST_P(CaptureOrderTest, EventRecordedInACaptureRefusesHostWaitsDuringIt) {
  auto a = make_context();
  DeviceBuffer<std::uint8_t> x(a, 64);
  for (int which = 0; which < 2; ++which) {
    Event e;
    int line = 0;
    try {
      Capture cap(a, "events");
      memset(a, x, 1);
      e.record(a);
      if (which == 0) {
        line = __LINE__ + 1;
        e.synchronize();
      } else {
        line = __LINE__ + 1;
        (void)e.query();
      }
      (void)cap.end();
      ADD_FAILURE() << "a host wait on a captured event was accepted";
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), Errc::invalid_state) << err.what();
      EXPECT_NE(std::string(err.what()).find("cannot be part of a graph"), std::string::npos)
          << err.what();
      EXPECT_EQ(err.where().line(), static_cast<std::uint_least32_t>(line)) << err.what();
    }
    memset(a, x, 2);  // usable afterwards
    EXPECT_EQ(read(a, x)[0], 2);
  }
}

TEST_P(CaptureOrderTest, EventRecordedInACaptureRefusesHostWaitsAfterIt) {
  auto a = make_context();
  DeviceBuffer<std::uint8_t> x(a, 64);
  Event e;
  {
    Capture cap(a, "events");
    memset(a, x, 1);
    e.record(a);
    (void)cap.end();
  }
  try {
    e.synchronize();
    ADD_FAILURE() << "synchronize on an event of captured work returned";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), Errc::invalid_state) << err.what();
    EXPECT_NE(std::string(err.what()).find("capture 'events'"), std::string::npos) << err.what();
  }
  EXPECT_THROW((void)e.query(), Error);
  e.record(a);  // an ordinary point again
  e.synchronize();
  EXPECT_TRUE(e.query());
}

TEST_P(CaptureOrderTest, WaitOnAnEventOfACaptureOrdersAfterWhatTheCaptureWaitedFor) {
  auto a = make_context();
  auto b = make_context();
  auto d = make_context();
  DeviceBuffer<std::uint8_t> x(a, kN);
  memset(a, x, 0);
  a.synchronize();
  Gate gate(device());
  gate.block(a);
  memset(a, x, 1);
  Event e;
  {
    Capture cap(b, "e");
    memset(b, x, 5);  // b waits for a's write eagerly
    e.record(b);
    (void)cap.end();
  }
  d.wait(e);
  // The event stands for captured work that never ran; waiting for it orders d after what that
  // work waited for (a's held-back write), so d cannot drain while the gate is closed.
  auto drained = std::async(std::launch::async, [&] { d.synchronize(); });
  EXPECT_EQ(drained.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "d does not wait for the work the capture waited for";
  gate.open();
  drained.get();
  a.synchronize();
}

// ---- GraphExec::set_* rebinding (defect 3) --------------------------------------------------

TEST_P(CaptureOrderTest, SetCopyOrdersTheLaunchByTheNewSource) {
  auto ctx = make_context();
  auto other = make_context();
  DeviceBuffer<std::uint8_t> x(ctx, kN), y(ctx, kN), out(ctx, kN);
  memset(ctx, x, 1);
  memset(ctx, y, 0);
  ctx.synchronize();
  Graph g("copy");
  auto node =
      g.add_copy(out.data(), x.data(), kN, {.name = "out = x", .uses = {reads(x), writes(out)}});
  GraphExec exec(g, device());
  exec.launch(ctx);
  EXPECT_EQ(read(ctx, out), std::vector<std::uint8_t>(kN, 1));
  Gate gate(device());
  gate.block(other);
  memset(other, y, 9);  // pending write of the new source
  exec.set_copy(node, out.data(), y.data(), kN);
  exec.launch(ctx);
  gate.open();
  EXPECT_EQ(read(ctx, out), std::vector<std::uint8_t>(kN, 9));
  other.synchronize();
}

TEST_P(CaptureOrderTest, SetMemsetOrdersTheLaunchByTheNewDestination) {
  auto ctx = make_context();
  auto other = make_context();
  DeviceBuffer<std::uint8_t> x(ctx, kN), y(ctx, kN), z(ctx, kN);
  memset(ctx, y, 4);
  ctx.synchronize();
  Graph g("memset");
  auto node = g.add_memset(x.data(), 1, kN, {.name = "x = 1", .uses = {writes(x)}});
  GraphExec exec(g, device());
  Gate gate(device());
  gate.block(other);
  copy(other, z, y);  // pending read of the new destination
  exec.set_memset(node, y.data(), 6, kN);
  exec.launch(ctx);
  gate.open();
  other.synchronize();
  EXPECT_EQ(read(ctx, z), std::vector<std::uint8_t>(kN, 4)) << "the launch overtook a read";
  EXPECT_EQ(read(ctx, y), std::vector<std::uint8_t>(kN, 6));
}

TEST_P(CaptureOrderTest, SetKernelAndSetHostTakeTheNewUses) {
  auto ctx = make_context();
  auto other = make_context();
  constexpr int n = 1024;
  DeviceBuffer<int> x(ctx, n), y(ctx, n);
  memset(ctx, x, 0);
  memset(ctx, y, 0);
  ctx.synchronize();
  Graph g("kernel");
  auto node = g.add_kernel(add_work(x.data(), n, 1), {.name = "x += 1", .uses = {updates(x)}});
  GraphExec exec(g, device());
  Gate gate(device());
  gate.block(other);
  memset(other, y, 0x01);  // pending write of y: every int becomes 0x01010101
  exec.set_kernel(node, add_work(y.data(), n, 1), {updates(y)});
  exec.launch(ctx);
  gate.open();
  other.synchronize();
  EXPECT_EQ(read(ctx, y), std::vector<int>(n, 0x01010102));

  PinnedBuffer<int> p(ctx, 4), q(ctx, 4);
  {
    auto w = p.write();
    std::fill(w.begin(), w.end(), 0);
  }
  {
    auto w = q.write();
    std::fill(w.begin(), w.end(), 0);
  }
  Graph hg("host");
  auto hn = hg.add_host([pp = p.data()] { pp[0] += 1; }, {.name = "p", .uses = {updates(p)}});
  GraphExec hexec(hg, device());
  DeviceBuffer<int> qcopy(ctx, 4);
  Gate gate2(device());
  gate2.block(other);
  copy(other, qcopy, q);  // pending read of q
  hexec.set_host(hn, [qq = q.data()] { qq[0] = 42; }, {writes(q)});
  hexec.launch(ctx);
  gate2.open();
  other.synchronize();
  EXPECT_EQ(read(ctx, qcopy)[0], 0) << "the host node overtook a read";
  ctx.synchronize();
  EXPECT_EQ(q.read()[0], 42);
}

SLUICE_INSTANTIATE_BACKENDS(CaptureOrderTest);

}  // namespace
}  // namespace sluice::test
