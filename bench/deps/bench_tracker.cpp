// Host overhead of the dependency tracker, per marked operation, beside the same work without
// tracking. Goals (issue 4): at most 0.25 us per mark with no cross-context dependency, and with
// one, no more than one event record plus one wait (compare with record_wait_pair).

#include <benchmark/benchmark.h>

#include <cstddef>

#include "sluice/sluice.hpp"

namespace sluice::bench {
namespace {

constexpr int kSyncEvery = 1024;

Context make(const Device& d) { return Context(ContextOptions{.device = d}); }

// Begin + end of one mark on one context: nobody else touched the object.
void mark_no_dependency(benchmark::State& state, const Device& device) {
  auto ctx = make(device);
  DeviceBuffer<float> x(ctx, 1024);
  ctx.synchronize();
  int n = 0;
  for (auto _ : state) {
    Intent guard(ctx, x, Access::read_write, "kernel");
    if (++n % kSyncEvery == 0) ctx.synchronize();
  }
  ctx.synchronize();
  state.SetItemsProcessed(state.iterations());
}

// The same on a quarter of the buffer, alternating quarters: range bookkeeping.
void mark_no_dependency_subrange(benchmark::State& state, const Device& device) {
  auto ctx = make(device);
  DeviceBuffer<float> x(ctx, 1024);
  ctx.synchronize();
  std::size_t q = 0;
  int n = 0;
  for (auto _ : state) {
    Intent guard(ctx, x, Access::read_write, "kernel", x.elements(256 * (q++ % 4), 256));
    if (++n % kSyncEvery == 0) ctx.synchronize();
  }
  ctx.synchronize();
  state.SetItemsProcessed(state.iterations());
}

// A tracked memset against the same memset on untracked memory: the tracker's share of a real
// operation.
void memset_tracked(benchmark::State& state, const Device& device) {
  auto ctx = make(device);
  DeviceBuffer<std::byte> x(ctx, 256);
  int n = 0;
  for (auto _ : state) {
    memset(ctx, x, 0);
    if (++n % kSyncEvery == 0) ctx.synchronize();
  }
  ctx.synchronize();
  state.SetItemsProcessed(state.iterations());
}

void memset_untracked(benchmark::State& state, const Device& device) {
  auto ctx = make(device);
  DeviceBuffer<std::byte> x(ctx, 256);
  ctx.synchronize();
  unregister_memory(x.object_id());
  int n = 0;
  for (auto _ : state) {
    memset(ctx, x, 0);
    if (++n % kSyncEvery == 0) ctx.synchronize();
  }
  ctx.synchronize();
  state.SetItemsProcessed(state.iterations());
}

// Two contexts write the same object in turn: every mark needs one cross-context wait.
// Items are marks; compare per item with record_wait_pair.
void mark_one_dependency(benchmark::State& state, const Device& device) {
  auto a = make(device);
  auto b = make(device);
  DeviceBuffer<float> x(a, 1024);
  a.synchronize();
  int n = 0;
  for (auto _ : state) {
    { Intent w(a, x, Access::write, "a writes"); }
    { Intent w(b, x, Access::write, "b writes"); }
    if (++n % kSyncEvery == 0) b.synchronize();
  }
  a.synchronize();
  b.synchronize();
  state.SetItemsProcessed(2 * state.iterations());
}

// The hand-written equivalent: an event record and a wait each way. Items are record+wait pairs.
void record_wait_pair(benchmark::State& state, const Device& device) {
  auto a = make(device);
  auto b = make(device);
  Event ea, eb;
  int n = 0;
  for (auto _ : state) {
    a.host_task([] {});  // a new point each time, so no wait is redundant
    ea.record(a);
    b.wait(ea);
    b.host_task([] {});
    eb.record(b);
    a.wait(eb);
    if (++n % kSyncEvery == 0) b.synchronize();
  }
  a.synchronize();
  b.synchronize();
  state.SetItemsProcessed(2 * state.iterations());
}

// The same without host tasks, so that only the record and the wait are counted.
void record_wait_pair_only(benchmark::State& state, const Device& device) {
  auto a = make(device);
  auto b = make(device);
  Event ea, eb;
  int n = 0;
  for (auto _ : state) {
    ea.record(a);
    b.wait(ea);
    eb.record(b);
    a.wait(eb);
    if (++n % kSyncEvery == 0) b.synchronize();
  }
  a.synchronize();
  b.synchronize();
  state.SetItemsProcessed(2 * state.iterations());
}

}  // namespace
}  // namespace sluice::bench

int main(int argc, char** argv) {
  using namespace sluice;
  std::vector<Device> devs{{"host", 0}};
  for (const auto& b : backends()) {
    if (b.name == "cuda" && b.device_count > 0) devs.push_back({"cuda", 0});
  }
  for (const auto& d : devs) {
    const std::string tag = "/" + d.to_string();
#define SLUICE_REG(fn) benchmark::RegisterBenchmark((#fn + tag).c_str(), bench::fn, d)
    SLUICE_REG(mark_no_dependency);
    SLUICE_REG(mark_no_dependency_subrange);
    SLUICE_REG(memset_tracked);
    SLUICE_REG(memset_untracked);
    SLUICE_REG(mark_one_dependency);
    SLUICE_REG(record_wait_pair);
    SLUICE_REG(record_wait_pair_only);
#undef SLUICE_REG
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
