#pragma once
// A cooperative kernel that runs grid-wide barriers back to back, for measuring what the CG block
// kernel's step ends cost (src/la/cuda/la_kernels.cu: cg_block_kernel). Plain C++ so that
// the benchmark itself needs no CUDA compiler.

#include <string>

struct GridBarrierRun {
  double seconds = 0;  // the kernel's time (events), all barriers
  int blocks = 0;      // blocks of 256 threads: as many as the device keeps resident, 4 per SM
  std::string error;   // empty unless a CUDA call failed or a sum read a stale partial
};

/// Runs `barriers` grid barriers in one cooperative launch on device 0, 4 blocks of 256 threads
/// per multiprocessor (cg_block_kernel's shape). With `partials_per_block` > 0, each block
/// first writes that many partial sums per block of the grid and after each barrier every block
/// adds all of them in block order, as cg_block_kernel's finish_step does (its loads four
/// rounds at a time, a warp shuffle tree, then the warps' sums in order): through L1 as
/// finish_step does (`through_l1`), or through L2 alone.
GridBarrierRun run_grid_barriers(int barriers, int partials_per_block, bool through_l1);
