// `sluice demo`: N contexts move data through device memory at the same time, a gather context is
// ordered after all of them with wait_for, and a failing host task is reported at synchronize
// with its operation name and source line.

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "sluice/sluice.hpp"

namespace sluice::cli {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(10);

struct DemoOptions {
  std::string device;  // empty: sluice::default_device()
  int contexts = 4;
  std::size_t elements = std::size_t{1} << 20;
  std::string proof = "auto";
};

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

std::string_view basename(std::string_view path) {
  auto slash = path.find_last_of('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

/// Every party waits until all have arrived: if the runtime ran the contexts one after another,
/// the first to arrive would time out instead.
struct Rendezvous {
  explicit Rendezvous(int n) : parties(n) {}
  void arrive() {
    arrived.fetch_add(1);
    const auto deadline = Clock::now() + kTimeout;
    while (arrived.load() < parties) {
      if (Clock::now() > deadline) {
        timeouts.fetch_add(1);
        return;
      }
      std::this_thread::yield();
    }
  }
  const int parties;
  std::atomic<int> arrived{0};
  std::atomic<int> timeouts{0};
};

/// Holds one context until the host opens it. Used where host tasks of different contexts may
/// share one runtime thread (CUDA host functions), so that only copies run meanwhile.
struct Gate {
  void hold() {
    const auto deadline = Clock::now() + kTimeout;
    while (!open.load() && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    passed.store(true);
  }
  std::atomic<bool> open{false};
  std::atomic<bool> passed{false};
};

/// One context and its pipeline: pinned input -> device a -> device b -> pinned output -> checksum.
struct Lane {
  Lane(const Device& device, int i, std::size_t n)
      : ctx(ContextOptions{.device = device, .name = fmt::format("worker{}", i)}),
        in(ctx, n),
        out(ctx, n),
        a(ctx, n),
        b(ctx, n) {
    std::fill(in.begin(), in.end(), static_cast<float>(i + 1));
  }
  Context ctx;
  PinnedBuffer<float> in, out;
  DeviceBuffer<float> a, b;
  Event start{Event::Options{.timing = true}};
  Event stop{Event::Options{.timing = true}};
  Event copied;
  double checksum = 0;        // written by the lane's host task, read after the gather
  Clock::time_point arrived;  // when the lane reached the rendezvous, or left the gate
  Clock::time_point summed;   // when its checksum finished
};

bool concurrency_demo(const Device& device, const DemoOptions& o, bool use_gate) {
  const auto count = static_cast<std::size_t>(o.contexts);
  std::vector<std::unique_ptr<Lane>> lanes;
  for (int i = 0; i < o.contexts; ++i)
    lanes.push_back(std::make_unique<Lane>(device, i, o.elements));
  Rendezvous rendezvous(o.contexts);
  Gate gate;

  fmt::print(
      "1. {} contexts each copy {:.1f} MiB host->device, device->device, device->host and sum\n"
      "   the result in a host task; {}.\n   Issuing never blocks.\n",
      count, static_cast<double>(o.elements * sizeof(float)) / (1 << 20),
      use_gate ? "worker0 first waits at a gate that the host opens only after the\n   others "
                 "finished their copies"
               : "before summing, each waits in a host task until all the others\n   "
                 "have arrived (10 s timeout)");

  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < count; ++i) {
    Lane& lane = *lanes[i];
    const Context& c = lane.ctx;
    lane.start.record(c);
    if (use_gate && i == 0) {
      c.host_task([&gate, &lane] { gate.hold(), lane.arrived = Clock::now(); }, "wait at the gate");
    }
    copy(c, lane.a, lane.in);
    copy(c, lane.b, lane.a);
    copy(c, lane.out, lane.b);
    if (use_gate) lane.copied.record(c);
    if (!use_gate) {
      c.host_task([&rendezvous, &lane] { lane.arrived = Clock::now(), rendezvous.arrive(); },
                  "rendezvous");
    }
    c.host_task(
        [&lane] {
          double sum = 0;
          for (float x : lane.out.span()) sum += x;  // ordered after the copy
          lane.checksum = sum;
          lane.summed = Clock::now();
        },
        "checksum");
    lane.stop.record(c);
  }
  const auto issued = Clock::now();

  bool overlapped = false;
  if (use_gate) {
    // Workers 1.. finish their copies while worker0 is still held: nothing ordered them after it.
    for (std::size_t i = 1; i < count; ++i) lanes[i]->copied.synchronize();
    overlapped = !gate.passed.load();
    gate.open.store(true);
  }

  // The gather runs after every worker's work, ordered on the device side by wait_for; the host
  // waits only once, for the gather.
  Context gather(ContextOptions{.device = device, .name = "gather"});
  for (const auto& lane : lanes) gather.wait_for(lane->ctx);
  double total = 0;
  gather.host_task(
      [&] {
        for (const auto& lane : lanes) total += lane->checksum;
      },
      "gather");
  gather.synchronize();
  const auto done = Clock::now();
  if (!use_gate) overlapped = rendezvous.timeouts.load() == 0;

  fmt::print("   issued all work in {:.3f} ms; gather finished after {:.2f} ms\n\n",
             ms_between(t0, issued), ms_between(t0, done));
  fmt::print("   {:<9} {:>12} {:>14} {:>14} {:>12}\n", "context", "device time",
             use_gate ? "left gate" : "arrived", "checksum done", "checksum");
  double busy = 0;
  bool sums_ok = true;
  for (std::size_t i = 0; i < count; ++i) {
    Lane& lane = *lanes[i];
    const double ms = Event::elapsed_ms(lane.start, lane.stop);
    busy += ms;
    const double expected = static_cast<double>(o.elements) * static_cast<double>(i + 1);
    sums_ok = sums_ok && lane.checksum == expected;
    const std::string arrived =
        (use_gate && i != 0) ? "-" : fmt::format("+{:.2f} ms", ms_between(t0, lane.arrived));
    fmt::print("   {:<9} {:>9.2f} ms {:>14} {:>+11.2f} ms {:>12.0f}\n", lane.ctx.name(), ms,
               arrived, ms_between(t0, lane.summed), lane.checksum);
  }
  const double expected_total =
      static_cast<double>(o.elements) * static_cast<double>(count * (count + 1) / 2);
  sums_ok = sums_ok && total == expected_total;
  fmt::print("\n   gather (after wait_for on all {}): total {:.0f}, expected {:.0f}: {}\n", count,
             total, expected_total, total == expected_total ? "ok" : "WRONG");
  fmt::print("   sum of per-context device times {:.2f} ms in {:.2f} ms of wall time\n", busy,
             ms_between(t0, done));
  if (use_gate) {
    fmt::print("   concurrency: {}\n",
               overlapped ? "workers 1.. finished their copies while worker0 was still held at "
                            "the gate, so they ran independently of it"
                          : "FAILED: the other workers did not progress while worker0 was held");
  } else {
    fmt::print("   concurrency: {}\n",
               overlapped ? fmt::format("all {} contexts were inside their rendezvous at the same "
                                        "time (each waited for all the others)",
                                        count)
                          : fmt::format("FAILED: {} context(s) timed out waiting for the others",
                                        rendezvous.timeouts.load()));
  }
  return overlapped && sums_ok;
}

bool failure_demo(const Device& device) {
  fmt::print(
      "\n2. A host task throws. Later work on its context is skipped, and the failure is\n"
      "   reported at the next wait, once, naming the operation and the line that issued "
      "it.\n");
  Context ctx(ContextOptions{.device = device, .name = "faulty"});
  std::atomic<int> ran{0};
  const auto line = std::source_location::current().line() + 1;
  ctx.host_task([] { throw std::runtime_error("input is corrupt"); }, "parse input");
  ctx.host_task([&ran] { ++ran; }, "use parsed input");
  ctx.host_task([&ran] { ++ran; }, "write result");

  bool ok = false;
  try {
    ctx.synchronize();
    fmt::print("   FAILED: synchronize did not report the failure\n");
  } catch (const WorkFailed& e) {
    fmt::print("   synchronize threw: {}\n", e.what());
    fmt::print("   operation '{}', issued at {}:{}, cause '{}', {} later operations skipped\n",
               e.operation(), basename(e.issued_at().file_name()), e.issued_at().line(), e.cause(),
               e.skipped());
    ok = e.operation() == "parse input" && e.issued_at().line() == line && ran.load() == 0;
  }
  ctx.synchronize();  // reported once: this does not throw again
  ctx.host_task([&ran] { ++ran; }, "retry");
  ctx.synchronize();
  fmt::print("   a second synchronize does not throw; new work on the context runs again: {}\n",
             ran.load() == 1 ? "yes" : "NO");
  return ok && ran.load() == 1;
}

int run_demo(const DemoOptions& o) {
  const Device device = o.device.empty() ? default_device() : Device::parse(o.device);
  const DeviceInfo info = device_info(device);
  const bool use_gate = o.proof == "gate" || (o.proof == "auto" && device.backend != "host");
  fmt::print("sluice demo on {} ({})\n\n", device.to_string(), info.name);

  const bool concurrent = concurrency_demo(device, o, use_gate);
  const bool failure = failure_demo(device);
  if (concurrent && failure) {
    fmt::print("\ndemo ok\n");
    return 0;
  }
  fmt::print(stderr, "\nsluice demo: FAILED ({})\n",
             !concurrent ? "concurrency or results" : "failure reporting");
  return 1;
}

}  // namespace

Command add_demo_command(CLI::App& parent) {
  auto o = std::make_shared<DemoOptions>();
  auto* app = parent.add_subcommand("demo", "Show contexts working concurrently, and a failure");
  app->add_option("--device", o->device, "Device to run on, e.g. host or cuda:0")
      ->default_str("the default device");
  app->add_option("--contexts", o->contexts, "Number of worker contexts")
      ->check(CLI::Range(2, 64))
      ->capture_default_str();
  app->add_option("--elements", o->elements, "Floats each context moves")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 28))
      ->capture_default_str();
  app->add_option("--proof", o->proof,
                  "How to prove overlap: rendezvous (host tasks meet), gate (others progress "
                  "while one context is held), auto (rendezvous on host, gate elsewhere)")
      ->check(CLI::IsMember({"auto", "rendezvous", "gate"}))
      ->capture_default_str();
  return {app, [o] { return run_demo(*o); }};
}

}  // namespace sluice::cli
