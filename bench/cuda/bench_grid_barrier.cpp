// What a grid-wide barrier costs on the GPU, alone and with the block-order sum of the blocks'
// partials that follows each of the CG block kernel's two barriers per iteration (see
// docs/bench/la.md, the cuda item of "Backends"). Manual time: the kernel's, kBarriers barriers;
// the counter us_per_barrier divides it by them.

#include <benchmark/benchmark.h>

#include "grid_barrier.hpp"
#include "have_gpu.hpp"
#include "sluice/sluice.hpp"

namespace {

constexpr int kBarriers = 2000;

/// range(0): partials per block (0: the barrier alone). 1 is the direction product's sum,
/// 4 the update's two sums over twice as many blocks. range(1): 1 reads the partials through
/// L1 (as the CG block kernel does), 0 through L2 alone.
void BM_grid_barrier(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const int per_block = static_cast<int>(state.range(0));
  const bool through_l1 = state.range(1) != 0;
  GridBarrierRun run = run_grid_barriers(kBarriers, per_block, through_l1);  // warm-up
  double us_per_barrier = 0;
  for (auto _ : state) {
    run = run_grid_barriers(kBarriers, per_block, through_l1);
    if (!run.error.empty()) {
      state.SkipWithError(run.error.c_str());
      return;
    }
    state.SetIterationTime(run.seconds);
    us_per_barrier += run.seconds * 1e6 / kBarriers;
  }
  state.counters["us_per_barrier"] =
      benchmark::Counter(us_per_barrier, benchmark::Counter::kAvgIterations);
  state.counters["blocks"] = run.blocks;
  state.counters["partials"] = per_block * run.blocks;
}

BENCHMARK(BM_grid_barrier)
    ->ArgNames({"partials_per_block", "through_l1"})
    ->Args({0, 1})
    ->ArgsProduct({{1, 2, 4}, {1, 0}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
BENCHMARK_MAIN();
