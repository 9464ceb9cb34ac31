#pragma once
// The observer hook's check, measured: an empty host task issued through ContextImpl::issue, as
// Context::host_task issues it. observer_hook_on.cpp includes this with the check as the library
// compiles it (one relaxed load and a branch in ContextImpl::enqueue_eager); observer_hook_off.cpp
// with the check compiled out (SLUICE_BENCH_NO_OBSERVER_HOOK). Each file instantiates the issue
// path for its own lambda, so the two copies live side by side in one binary and run
// interleaved against the same library (--benchmark_enable_random_interleaving).

#include <benchmark/benchmark.h>

#include <functional>
#include <source_location>

#include "benchmarks.hpp"
#include "core/context_impl.hpp"
#include "sluice/context.hpp"

namespace sluice::bench::observer_hook {

inline void issue_empty_tasks(benchmark::State& state, const Device& device) {
  Context ctx(ContextOptions{.device = device});
  auto& impl = ctx.impl();
  const std::function<void()> empty = [] {};
  int n = 0;
  for (auto _ : state) {
    impl.issue("host_task", std::source_location::current(),
               [&](Stream& s, const OpInfo& op) { s.host_task(empty, op); });
    if (++n % kSyncEvery == 0) ctx.synchronize();
  }
  ctx.synchronize();
  state.SetItemsProcessed(state.iterations());
}

}  // namespace sluice::bench::observer_hook
