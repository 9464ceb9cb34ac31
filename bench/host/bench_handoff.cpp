// The hand-offs of the host backend against oneTBB's (issue 18):
//   issue/*      the host cost of issuing one empty operation (synchronized every 256)
//   latency/*    from issue to the operation running on the other thread (one at a time: the
//                worker is idle, spinning or asleep, when it comes; the issuer polls for the
//                end without taking part), as a manual time
//   roundtrip/*  issue one empty operation and wait for it (what a sync solve pays per reduction;
//                sluice's waiting thread runs the operation itself when the worker has not)
//   fork_join/*  one parallel loop of 2 chunks of about 0.3 us each from a worker thread (the
//                pool's part; the time of one chunk is the least it can take)
// sluice's are a host context (its worker thread) and detail::host::parallel_chunks; oneTBB's a
// task_arena's enqueue (one worker serves it) and tbb::parallel_for; the bench's own waits for a
// TBB task poll with yields (fair on a loaded machine, where a pure spin starves the worker).
// SLUICE_HOST_SPIN_US=0 shows the backend without spinning (every hand-off sleeps and is woken).

#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>

#include "backends/host/host_parallel.hpp"
#include "sluice/sluice.hpp"

#if SLUICE_BENCH_TBB
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#endif

namespace {

/// About 0.3 us of work that the compiler cannot remove.
void chunk_work(std::size_t c) {
  double x = static_cast<double>(c);
  for (int i = 0; i < 200; ++i) x = x * 0.999 + 1.0;
  benchmark::DoNotOptimize(x);
}

using Clock = std::chrono::steady_clock;
constexpr int kSyncEvery = 256;

sluice::Context host_context() {
  return sluice::Context(sluice::ContextOptions{.device = sluice::Device{"host", 0}});
}

void issue_sluice(benchmark::State& state) {
  auto ctx = host_context();
  int n = 0;
  for (auto _ : state) {
    ctx.host_task([] {});
    if (++n % kSyncEvery == 0) ctx.synchronize();
  }
  ctx.synchronize();
}

void latency_sluice(benchmark::State& state) {
  auto ctx = host_context();
  for (auto _ : state) {
    auto ran = std::make_shared<Clock::time_point>();
    const auto start = Clock::now();
    ctx.host_task([ran] { *ran = Clock::now(); });
    while (!ctx.idle()) std::this_thread::yield();
    state.SetIterationTime(std::chrono::duration<double>(*ran - start).count());
  }
}

void roundtrip_sluice(benchmark::State& state) {
  auto ctx = host_context();
  for (auto _ : state) {
    ctx.host_task([] {});
    ctx.synchronize();
  }
}

void fork_join_sluice(benchmark::State& state) {
  // From a context's worker, as the la kernels call it.
  auto ctx = host_context();
  const auto iterations = static_cast<std::size_t>(state.max_iterations);
  double seconds = 0;
  ctx.host_task([&] {
    auto work = [](std::size_t c) { chunk_work(c); };
    const auto start = Clock::now();
    for (std::size_t i = 0; i < iterations; ++i) sluice::detail::host::parallel_chunks(2, work);
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
  });
  ctx.synchronize();
  for (auto _ : state) state.SetIterationTime(seconds / static_cast<double>(iterations));
}

void chunk_alone(benchmark::State& state) {
  for (auto _ : state) {
    const auto start = Clock::now();
    chunk_work(0);
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
  }
}

#if SLUICE_BENCH_TBB
// A one-thread arena that the issuing thread does not join: its tasks run on a TBB worker.
tbb::task_arena& arena() {
  static tbb::task_arena a(1, 0);
  return a;
}

void issue_tbb(benchmark::State& state) {
  std::atomic<int> done{0};
  int n = 0;
  for (auto _ : state) {
    arena().enqueue([&] { done.fetch_add(1, std::memory_order_release); });
    if (++n % kSyncEvery == 0) {
      while (done.load(std::memory_order_acquire) != n) std::this_thread::yield();
    }
  }
  while (done.load(std::memory_order_acquire) != n) std::this_thread::yield();
}

void latency_tbb(benchmark::State& state) {
  for (auto _ : state) {
    std::atomic<bool> done{false};
    Clock::time_point ran;
    const auto start = Clock::now();
    arena().enqueue([&] {
      ran = Clock::now();
      done.store(true, std::memory_order_release);
    });
    while (!done.load(std::memory_order_acquire)) std::this_thread::yield();
    state.SetIterationTime(std::chrono::duration<double>(ran - start).count());
  }
}

void roundtrip_tbb(benchmark::State& state) {
  for (auto _ : state) {
    std::atomic<bool> done{false};
    arena().enqueue([&] { done.store(true, std::memory_order_release); });
    while (!done.load(std::memory_order_acquire)) std::this_thread::yield();
  }
}

void fork_join_tbb(benchmark::State& state) {
  std::atomic<bool> done{false};
  const auto iterations = static_cast<std::size_t>(state.max_iterations);
  double seconds = 0;
  arena().enqueue([&] {
    tbb::task_arena pool;  // every core, as sluice's pool
    pool.execute([&] {
      const auto start = Clock::now();
      for (std::size_t i = 0; i < iterations; ++i) {
        tbb::parallel_for(std::size_t{0}, std::size_t{2}, [](std::size_t c) { chunk_work(c); });
      }
      seconds = std::chrono::duration<double>(Clock::now() - start).count();
    });
    done.store(true, std::memory_order_release);
  });
  while (!done.load(std::memory_order_acquire)) std::this_thread::yield();
  for (auto _ : state) state.SetIterationTime(seconds / static_cast<double>(iterations));
}
#endif

}  // namespace

BENCHMARK(issue_sluice);
BENCHMARK(latency_sluice)->UseManualTime();
BENCHMARK(roundtrip_sluice);
BENCHMARK(chunk_alone)->UseManualTime()->Iterations(20000);
BENCHMARK(fork_join_sluice)->UseManualTime()->Iterations(20000);
#if SLUICE_BENCH_TBB
BENCHMARK(issue_tbb);
BENCHMARK(latency_tbb)->UseManualTime();
BENCHMARK(roundtrip_tbb);
BENCHMARK(fork_join_tbb)->UseManualTime()->Iterations(20000);
#endif

BENCHMARK_MAIN();
