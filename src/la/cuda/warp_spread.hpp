#pragma once
// N sums over a warp's 32 lanes reduced together in fewer shuffles than N separate trees, each
// total with the bits of la_kernels.cu's shuffle tree (small_steps.cuh's warp_sum). Host and
// device: tests/la/warp_spread_test.cpp plays the 32 lanes on the host.
//
// warp_sum's tree: after the round of offset `off` (16, 8, 4, 2, 1) lane i < off holds
// T_off(i) = T_2off(i) + T_2off(i + off), T_32(i) being lane i's value, and lane 0 ends with the
// total; N trees take 5 N shuffles of a double. Spread: in each of the first log2 N rounds, lane
// L and lane L ^ off hold T_2off of i and of i + off (i = L % off) for the same C sums; each keeps
// half of them (L the upper half where L & off is set) and gives the other half to the other
// lane, which adds it to its own: C / 2 shuffles. With one sum left, warp_sum's rounds follow.
// Every T is formed from warp_sum's two operands (in the upper lane in the other order: IEEE
// addition commutes, a NaN's payload aside), so every total has warp_sum's bits. N = 8 takes
// 4 + 2 + 1 + 1 + 1 = 9 shuffles of a double where the separate trees take 40 (a multiprocessor
// shuffles 32 lanes' 32-bit values per clock: a double is two shuffles).

#include "la/kernel_math.hpp"

namespace sluice::detail::cuda::small_steps {

/// Which of `n` sums (a power of 2 up to 32) lane `lane` holds the total of at the end.
SLUICE_HD int spread_sum_of(int lane, int n) {
  return lane * n / 32;
}

/// What a lane holding `C` values `v` gives away in a spread round: the lower half where it
/// keeps the upper one (`upper`), else the upper half.
template <int C>
SLUICE_HD void spread_give(const double* v, bool upper, double* give) {
  for (int j = 0; j < C / 2; ++j) give[j] = upper ? v[j] : v[j + C / 2];
}

/// The half a lane keeps, each value plus what the other lane gave (`got`), into v[0, C / 2).
template <int C>
SLUICE_HD void spread_keep(double* v, bool upper, const double* got) {
  for (int j = 0; j < C / 2; ++j) v[j] = (upper ? v[j + C / 2] : v[j]) + got[j];
}

}  // namespace sluice::detail::cuda::small_steps
