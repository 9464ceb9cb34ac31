#pragma once
// Blocks of async TFQMR iterations of small matrix-free problems in one thread block
// (tf_small.cu), bit-identical to the five operations launched one by one. Included by
// la_kernels.cu, which decides the operations' launch shapes and hands them over.

#include <cstddef>

#include "sluice/backend.hpp"
#include "sluice/ext/la_kernels.hpp"

struct CUstream_st;

namespace sluice::detail::cuda {

/// The launch shapes of a TFQMR iteration's kernels launched one by one: the stencil products'
/// tiles and grids (stencil_kernel), tf_dx's grid over chunks of 256 elements.
struct TfSmallSteps {
  unsigned tile_width = 0, tile_height = 0, tiles_x = 0, tiles_y = 0, tiles = 0;
  unsigned residual_blocks = 0;  // r -= a K t
  unsigned v_blocks = 0;         // v = K p
  unsigned dx_blocks = 0;        // fused_kernel<tf_dx>
  std::size_t chunks = 0;
};

/// Issues `args` on `stream` as the small TFQMR kernel and returns true when it fits (a stencil,
/// constant preconditioners, every scalar from the async state, up to 4096 points) and is wanted;
/// false having issued nothing otherwise. SLUICE_CUDA_TF_SMALL (small_rule.hpp): auto (the
/// default: the small CG kernel's size rule, 4096 points for the 2D 5-point stencil and 1024 for
/// the others), on (wherever it fits), off; `require` with auto or on makes a block that it does
/// not take an Error saying why (the tests use it to prove the path ran). A bad word is an Error.
bool tf_small_block(const LaTfBlockArgs& args, const TfSmallSteps& steps, int device,
                    CUstream_st* stream, const OpInfo& op);

}  // namespace sluice::detail::cuda
