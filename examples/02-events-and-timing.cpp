// 02 — events and timing.
//
// An event marks a point in a context's queue. It can be waited on by another context (without
// blocking the host), queried, synchronized with, and, when made with timing, measured.

#include <cstdio>

#include "sluice/sluice.hpp"

int main() {
  sluice::Context ctx;
  sluice::Context other(ctx.device());
  constexpr std::size_t n = std::size_t{4} << 20;  // 16 MiB of floats
  sluice::PinnedBuffer<float> host(ctx, n);
  sluice::DeviceBuffer<float> a(ctx, n), b(ctx, n);
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 1000);

  // A first round, untimed: the first touch of fresh memory pays for page faults.
  sluice::copy(ctx, a, host);
  sluice::copy(ctx, b, a);

  // Timing events cost a little on every backend, so they are asked for explicitly.
  sluice::Event start(sluice::Event::Options{.timing = true});
  sluice::Event stop(sluice::Event::Options{.timing = true});
  start.record(ctx);
  sluice::copy(ctx, a, host);  // host to device
  sluice::copy(ctx, b, a);     // device to device
  stop.record(ctx);

  // Another context waits for the recorded point, not for everything the first one does later.
  other.wait(stop);
  sluice::copy(other, host, b);  // device to host
  sluice::Event copied_back;
  copied_back.record(other);

  std::printf("copies issued; complete yet? %s\n", copied_back.query() ? "yes" : "no");
  copied_back.synchronize();  // blocks for that point only; throws if the work before it failed

  const double ms = sluice::Event::elapsed_ms(start, stop);
  const double gib = 2.0 * static_cast<double>(n * sizeof(float)) / (1 << 30);
  std::printf("two %zu MiB copies on %s took %.2f ms (%.1f GiB/s)\n", n * sizeof(float) >> 20,
              ctx.device().to_string().c_str(), ms, gib / (ms / 1e3));

  bool ok = ms >= 0.0 && copied_back.query();
  for (std::size_t i = 0; i < n; i += 4099) ok = ok && host[i] == static_cast<float>(i % 1000);
  std::printf("data round-tripped: %s\n", ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
