// What a CG step end costs on the GPU: a grid-wide barrier, alone and with the block-order sum of
// the blocks' partials that follows each of the cooperative CG block kernel's two barriers per
// iteration; and the small CG kernel's step end in one thread block or one thread-block cluster
// (block or cluster barrier, unit sums published through distributed shared memory, warp 0's
// total and a scalar read by every thread). See docs/la.md, the cuda item of "Backends". Manual
// time: the kernel's; the counters us_per_barrier / us_per_step_end divide it by their count.

#include <benchmark/benchmark.h>

#include "grid_barrier.hpp"
#include "have_gpu.hpp"
#include "sluice/sluice.hpp"
#include "step_end.hpp"

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

constexpr int kStepEnds = 20000;

/// range(0): blocks (1: one block of range(1) threads, no cluster; 2 to 16: one cluster);
/// range(2): units per step (64: the small kernel's direction product at 64 x 64, 128: its update).
void BM_small_step_end(benchmark::State& state) {
  if (!have_gpu(state)) return;
  const int blocks = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const int units = static_cast<int>(state.range(2));
  double us = 0;
  for (auto _ : state) {
    const StepEndRun run = run_step_ends(kStepEnds, blocks, threads, units);
    if (!run.error.empty()) {
      state.SkipWithError(run.error.c_str());
      return;
    }
    state.SetIterationTime(run.seconds);
    us += run.seconds * 1e6 / kStepEnds;
  }
  state.counters["us_per_step_end"] = benchmark::Counter(us, benchmark::Counter::kAvgIterations);
}

// The small kernel's shapes at 64 x 64 (cg_small.cu picks 1024 threads for one block and for
// clusters of 2 and 4, 512 for 8, 256 for 16).
BENCHMARK(BM_small_step_end)
    ->ArgNames({"blocks", "threads", "units"})
    ->Args({1, 1024, 64})
    ->Args({1, 1024, 128})
    ->Args({2, 1024, 128})
    ->Args({4, 1024, 128})
    ->Args({8, 512, 128})
    ->Args({16, 256, 128})
    ->Args({4, 256, 128})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
BENCHMARK_MAIN();
