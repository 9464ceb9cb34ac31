#pragma once
// How a distributed solver step's partial sums add up, written once for every backend (the host
// in sync mode and its finalize task, the cuda finalize kernel): rank by rank in rank order, and
// within a rank part by part, so every rank gets the same bits whatever the engine's reduction
// order, and async mode's iterates equal sync mode's.

#include "la/kernel_math.hpp"

namespace sluice::dist_math {

/// out[k] = the sum over ranks r and parts p of gathered[(r * parts + p) * kMaxSums + k].
/// With `split` > 0 (single-reduction CG: a fused step's sums in parts [0, split), a product's
/// one sum in each later part), out[k] for k < kMaxSums - 1 adds slot k of the parts before
/// `split`, and out[kMaxSums - 1] slot 0 of the parts from `split` on.
SLUICE_HD void combine(const double* gathered, int ranks, int parts, double* out, int split = 0) {
  constexpr int kSums = sluice::detail::la_math::kMaxSums;
  for (int k = 0; k < kSums; ++k) {
    double s = 0.0;
    for (int r = 0; r < ranks; ++r) {
      for (int p = 0; p < parts; ++p) {
        int slot = k;
        if (split > 0) {
          if (p < split) {
            slot = k < kSums - 1 ? k : -1;
          } else {
            slot = k == kSums - 1 ? 0 : -1;
          }
        }
        if (slot >= 0) s += gathered[(r * parts + p) * kSums + slot];
      }
    }
    out[k] = s;
  }
}

}  // namespace sluice::dist_math
