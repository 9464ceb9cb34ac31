// sluice's core operations, timed on one device.

#include <cstddef>

#include "benchmarks.hpp"
#include "sluice/sluice.hpp"

namespace sluice::bench {
namespace {

Context make(const Device& device) {
  return Context(ContextOptions{.device = device});
}

// Synchronizes `ctx` every kSyncEvery calls; counted in the loop.
struct Every {
  int n = 0;
  void operator()(const Context& ctx) {
    if (++n % kSyncEvery == 0) ctx.synchronize();
  }
};

}  // namespace

void enqueue_host_task(benchmark::State& state, const Device& device) {
  auto ctx = make(device);
  Every sync;
  for (auto _ : state) {
    ctx.host_task([] {});
    sync(ctx);
  }
  ctx.synchronize();
  state.SetItemsProcessed(state.iterations());
}

void enqueue_memset(benchmark::State& state, const Device& device) {
  auto ctx = make(device);
  DeviceBuffer<std::byte> buffer(ctx, kMemsetBytes);
  Every sync;
  for (auto _ : state) {
    memset(ctx, buffer, 0);
    sync(ctx);
  }
  ctx.synchronize();
  state.SetItemsProcessed(state.iterations());
}

void event_record(benchmark::State& state, const Device& device) {
  auto ctx = make(device);
  Event event;
  Every sync;
  for (auto _ : state) {
    event.record(ctx);
    sync(ctx);
  }
  ctx.synchronize();
  state.SetItemsProcessed(state.iterations());
}

// An empty host task on `a`, an event recorded after it, and `b` made to wait for the event: the
// task gives every record a new point, so no wait is redundant. Subtract enqueue_host_task for
// the record + wait alone.
void task_record_wait(benchmark::State& state, const Device& device) {
  auto a = make(device);
  auto b = make(device);
  Event event;
  Every sync;
  for (auto _ : state) {
    a.host_task([] {});
    event.record(a);
    b.wait(event);
    sync(b);
  }
  b.synchronize();
  state.SetItemsProcessed(state.iterations());
}

// The same with wait_for, which records the event itself.
void task_wait_for(benchmark::State& state, const Device& device) {
  auto a = make(device);
  auto b = make(device);
  Every sync;
  for (auto _ : state) {
    a.host_task([] {});
    b.wait_for(a);
    sync(b);
  }
  b.synchronize();
  state.SetItemsProcessed(state.iterations());
}

// wait_for on a context with no new work: b already waits for all of it.
void wait_for_redundant(benchmark::State& state, const Device& device) {
  auto a = make(device);
  auto b = make(device);
  a.host_task([] {});
  b.wait_for(a);
  Every sync;
  for (auto _ : state) {
    b.wait_for(a);
    sync(b);
  }
  b.synchronize();
  state.SetItemsProcessed(state.iterations());
}

void context_create_destroy(benchmark::State& state, const Device& device) {
  for (auto _ : state) {
    Context ctx = make(device);
    benchmark::DoNotOptimize(ctx);
  }
  state.SetItemsProcessed(state.iterations());
}

// Allocation from the stream-ordered pool and release in stream order (a warm pool).
void buffer_alloc_free(benchmark::State& state, const Device& device) {
  auto ctx = make(device);
  { DeviceBuffer<std::byte> warm(ctx, kBufferBytes); }
  ctx.synchronize();
  Every sync;
  for (auto _ : state) {
    DeviceBuffer<std::byte> buffer(ctx, kBufferBytes);
    benchmark::DoNotOptimize(buffer.data());
    sync(ctx);
  }
  ctx.synchronize();
  state.SetItemsProcessed(state.iterations());
}

}  // namespace sluice::bench
