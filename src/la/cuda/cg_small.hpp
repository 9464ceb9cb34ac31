#pragma once
// Blocks of async CG iterations of small matrix-free problems as one thread block or one
// thread-block cluster (cg_small.cu), bit-identical to the steps launched one by one. Included by
// la_kernels.cu, which decides the steps' launch shapes and hands them over.

#include <cstddef>
#include <string>

#include "sluice/backend.hpp"
#include "sluice/detail/la_format.hpp"

struct CUstream_st;

namespace sluice::detail::cuda {

/// The launch shapes of a CG iteration's two kernels when launched one by one (sync mode):
/// cg_direction_kernel over its tiles and fused_kernel<cg_update> over chunks of 256 elements.
/// The small kernel forms every one of their sums in the same order, so it needs them exactly.
struct CgSmallSteps {
  unsigned tile_width = 0;   // points along x (flat tiles: 256 points of a plane)
  unsigned tile_height = 0;  // points along y (kRowsPerThread x the block's y threads)
  unsigned tile_depth = 1;   // z planes per tile: 1, or 2 for the flat tiles of the 3D product
  unsigned tiles_x = 0, tiles_y = 0, tiles = 0;
  unsigned dir_blocks = 0;   // cg_direction_kernel's grid
  unsigned upd_blocks = 0;   // fused_kernel<cg_update>'s grid
  unsigned init_blocks = 0;  // fused_kernel<cg_init>'s grid (a block carrying the set-up)
  std::size_t chunks = 0;    // the update's chunks of 256 elements
};

/// Issues `args` (a block that fits cg_block_kernel: a stencil, a constant preconditioner, both
/// steps on the async state; its set-up too, if it carries one) on `stream` as the small kernel
/// and returns true when it fits;
/// returns false having issued nothing otherwise, and with SLUICE_CUDA_CG_SMALL=0. With
/// `require` in SLUICE_CUDA_CG_SMALL, not fitting throws an Error saying why (the tests use it to
/// prove the path ran). SLUICE_CUDA_CG_SMALL=block or cluster:N (N = 2, 4, 8, 16) picks the shape
/// instead of the size rule (to measure them).
bool cg_small_block(const LaCgBlockArgs& args, const CgSmallSteps& steps, int device,
                    CUstream_st* stream, const OpInfo& op);

}  // namespace sluice::detail::cuda
