#pragma once
// What a step end of the small CG kernel costs (src/la/cuda/cg_small.cu), in one thread block or
// one thread-block cluster: every unit (one warp's share of a step block) sums its lanes by a
// shuffle tree and publishes the sum to every block of the cluster (distributed shared memory),
// then the block or cluster barrier, then every block adds the step blocks' partials (warp 0's
// shuffle tree) and one thread runs a short scalar finalize that the others read after a block
// barrier. Plain C++ so that the benchmark needs no CUDA compiler; the grid-wide counterpart is
// grid_barrier.hpp.

#include <string>

struct StepEndRun {
  double seconds = 0;  // the kernel's time (events), all step ends
  std::string error;   // empty unless a CUDA call failed, a cluster does not fit, or a sum is off
};

/// Runs `steps` step ends in one launch on device 0: `blocks` blocks (1: no cluster; 2 to 16: one
/// cluster) of `threads` threads, `units` units per step (the small kernel's direction product at
/// 64 x 64 has 64, its update 128). Every sum is checked.
StepEndRun run_step_ends(int steps, int blocks, int threads, int units);
