// 01 — contexts.
//
// A context is a device plus one ordered queue of work. Work issued on one context runs in issue
// order, asynchronously to the host. Work on two contexts is unordered unless `wait_for` (or,
// for sluice buffers, the dependency tracker) orders it; nothing blocks the host until
// `synchronize`.

#include <cstdio>
#include <numeric>

#include "sluice/sluice.hpp"

int main() {
  // The default device: the largest accelerator, or the host (SLUICE_DEVICE=host chooses).
  sluice::Context producer(sluice::ContextOptions{.name = "producer"});
  sluice::Context consumer(sluice::ContextOptions{.device = producer.device(), .name = "consumer"});
  std::printf("contexts on %s\n", producer.device().to_string().c_str());

  constexpr std::size_t n = 1 << 20;
  sluice::PinnedBuffer<int> input(producer, n), output(producer, n);
  sluice::DeviceBuffer<int> on_device(producer, n);

  // The producer fills the input on a host thread, then copies it to the device. These calls
  // return at once; the work runs in this order on the producer's queue. A host task runs after
  // the earlier work of its context, so it uses a pinned buffer's memory directly (span()).
  producer.host_task([in = input.span()] { std::iota(in.begin(), in.end(), 0); }, "fill input");
  sluice::copy(producer, on_device, input);

  // The consumer's later work starts only after everything issued on the producer so far.
  // (Copies between sluice buffers also order themselves from what they read and write, see
  // docs/deps.md; host tasks and memory sluice does not track need wait_for.)
  consumer.wait_for(producer);
  sluice::copy(consumer, output, on_device);
  long long sum = 0;
  consumer.host_task(
      [&sum, out = output.span()] { sum = std::accumulate(out.begin(), out.end(), 0LL); }, "sum");

  // The one blocking call: waits for the consumer's work (which waited for the producer's) and
  // throws if any of it failed.
  consumer.synchronize();

  const long long expected = static_cast<long long>(n) * (n - 1) / 2;
  std::printf("sum of 0..%zu = %lld (%s)\n", n - 1, sum, sum == expected ? "ok" : "WRONG");
  return sum == expected ? 0 : 1;
}
