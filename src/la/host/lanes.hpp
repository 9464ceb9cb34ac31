#pragma once
// The order of the host's sums within one chunk: four interleaved lanes. The term of the chunk's
// element k goes to lane k % 4, each lane adds its terms first to last, and the chunk's sum is
// (lane 0 + lane 1) + (lane 2 + lane 3). Four independent chains of additions instead of one:
// a floating-point add waits for the one before it (3 to 4 cycles), which at sizes that fit in
// cache took longer than the loads and arithmetic of a CG step. The order depends on the length
// alone (tests/la/la_reference.hpp, SumOrder::host_chunks, sums alike).

#include <cstddef>

#include "la/kernel_math.hpp"

/// On the lambdas handed to over_lanes: inlined into each of its call sites, so that the lane
/// sums stay in registers (GCC otherwise calls the body once per element, its sums in memory:
/// 3x slower).
#if defined(__GNUC__)
#define SLUICE_LANE_BODY __attribute__((always_inline))
#else
#define SLUICE_LANE_BODY
#endif

namespace sluice::detail::host {

/// Four lanes of up to kMaxSums sums each.
struct Lanes {
  double v[4][la_math::kMaxSums] = {};

  [[nodiscard]] double total(int s) const { return (v[0][s] + v[1][s]) + (v[2][s] + v[3][s]); }
};

/// Calls `body(i, lane_sums)` for i in [first, last), elements of the chunk that starts at `lo`,
/// with the lane of i (the main loop names each lane by a constant, so the sums stay in
/// registers).
template <class Body>
inline void over_lanes(std::size_t lo, std::size_t first, std::size_t last, Lanes& lanes,
                       Body&& body) {
  auto one = [&](std::size_t i) SLUICE_LANE_BODY {
    switch ((i - lo) & 3) {
      case 0:
        body(i, lanes.v[0]);
        break;
      case 1:
        body(i, lanes.v[1]);
        break;
      case 2:
        body(i, lanes.v[2]);
        break;
      default:
        body(i, lanes.v[3]);
        break;
    }
  };
  std::size_t i = first;
  for (; i < last && ((i - lo) & 3) != 0; ++i) one(i);
  for (; i + 4 <= last; i += 4) {
    body(i, lanes.v[0]);
    body(i + 1, lanes.v[1]);
    body(i + 2, lanes.v[2]);
    body(i + 3, lanes.v[3]);
  }
  for (; i < last; ++i) one(i);
}

}  // namespace sluice::detail::host
