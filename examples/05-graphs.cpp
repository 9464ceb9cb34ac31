// 05 — task graphs: capture across two contexts, a replay loop over changing buffers, and a
// while loop whose condition stays on the device.
//
// 1. Work issued on two contexts inside a `Capture` becomes one Graph; the contexts' waits are
//    its edges. Launching it is one operation of a context, ordered by the tracker.
// 2. `Replay` captures a body on every call, sees that only buffer addresses changed, updates
//    the executable graph in place and launches it: no re-instantiation.
// 3. A while node runs a body graph until a `Managed<int>` written by the body reaches zero,
//    without the host looking at it between trips.

#include <cstdio>
#include <vector>

#include "sluice/graph.hpp"
#include "sluice/memory.hpp"

int main() {
  using namespace sluice;
  Context a(ContextOptions{.name = "a"});
  Context b(ContextOptions{.device = a.device(), .name = "b"});
  constexpr std::size_t n = 1 << 12;
  int failures = 0;

  // 1. Capture across two contexts.
  DeviceBuffer<std::uint8_t> x(a, n), y(a, n), z(a, n);
  Graph g;
  {
    Capture cap(a, "fill and fan out");
    memset(a, x, 42);
    b.wait_for(a);  // b joins the capture: its work is recorded too
    copy(b, y, x);
    copy(a, z, x);
    a.wait_for(b);  // and is joined back before the capture ends
    g = cap.end();
  }
  std::printf("captured %zu nodes, %zu edges:\n%s", g.size(), g.edges().size(), g.dot().c_str());
  GraphExec exec(g, a.device());
  exec.launch(a);
  PinnedBuffer<std::uint8_t> host(a, n);
  copy(a, host, y);
  if (host.read()[n - 1] != 42) ++failures;

  // 2. A replay loop: same operations, other buffers each time.
  std::vector<DeviceBuffer<std::uint8_t>> outs;
  for (int i = 0; i < 4; ++i) outs.emplace_back(a, n);
  Replay replay;
  int reinstantiations = 0;
  replay.on_event([&](const ReplayEvent& e) {
    // Other buffers are updates in place; a key whose replays cost more host time than issuing
    // its body eagerly runs eagerly (eager_cheaper). Neither re-instantiates.
    if (e.kind == ReplayEvent::Kind::reinstantiated) ++reinstantiations;
    std::printf("replay '%s': %s\n", e.key.c_str(), e.reason.c_str());
  });
  for (int step = 0; step < 8; ++step) {
    auto& out = outs[static_cast<std::size_t>(step) % outs.size()];
    replay.run(a, "step", [&] {
      memset(a, out, step);
      copy(b, z, out);  // the tracker's wait joins b; the final wait joins it back
      a.wait_for(b);
    });
    copy(a, host, z);
    if (host.read()[0] != step) ++failures;  // the host reads the output between replays
  }
  std::printf("replayed 8 times, %d re-instantiations\n", reinstantiations);
  if (reinstantiations != 0) ++failures;

  // 3. A while node: halve `value` until `count` reaches zero, all on the device.
  Managed<std::int32_t> count(5, a);
  Managed<double> value(1024.0, a);
  Graph body;
  {
    Capture cap(a, "loop body");
    value.assign(value * 0.5, a);
    count.assign(count - 1, a);
    body = cap.end();
  }
  Graph loop("halve until done");
  loop.add_while(count, body, {.name = "while count"});
  GraphExec looped(loop, a.device());
  looped.launch(a);
  std::printf("after the loop: count %d, value %g (expected 0 and 32)\n", count.value(),
              value.value());
  if (count.value() != 0 || value.value() != 32.0) ++failures;

  std::printf("%s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
