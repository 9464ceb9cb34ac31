// The spread reduction of the small la kernels (src/la/cuda/warp_spread.hpp), played on the host
// with 32 simulated lanes: every lane ends with the total of sum spread_sum_of(lane, N), bit for
// bit the total of la_kernels.cu's shuffle tree (warp_sum: lane i adds lane i + off's value for
// off = 16, 8, 4, 2, 1), on values whose sums round differently in other orders.

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "la/cuda/warp_spread.hpp"

namespace sluice::test {
namespace {

using namespace detail::cuda::small_steps;  // NOLINT

constexpr int kLanes = 32;
using Lanes = std::array<std::vector<double>, kLanes>;  // each lane's values

/// warp_sum's tree over one sum's 32 values: lane 0's total.
double tree_total(std::array<double, kLanes> v) {
  for (int off = 16; off > 0; off /= 2) {
    for (int i = 0; i < off; ++i) v[i] = v[i] + v[i + off];
  }
  return v[0];
}

/// One spread round of C values per lane over all lanes (what warp_sums_spread does with
/// __shfl_xor_sync), then the next; with one value left, warp_sum's rounds on shuffles by xor.
template <int C>
void spread_rounds(Lanes& lanes, int off) {
  if constexpr (C > 1) {
    std::array<std::array<double, C / 2>, kLanes> give{};
    for (int l = 0; l < kLanes; ++l)
      spread_give<C>(lanes[l].data(), (l & off) != 0, give[l].data());
    for (int l = 0; l < kLanes; ++l) {
      spread_keep<C>(lanes[l].data(), (l & off) != 0, give[l ^ off].data());
    }
    spread_rounds<C / 2>(lanes, off / 2);
  } else {
    for (; off > 0; off /= 2) {
      std::array<double, kLanes> was{};
      for (int l = 0; l < kLanes; ++l) was[l] = lanes[l][0];
      for (int l = 0; l < kLanes; ++l) lanes[l][0] = was[l] + was[l ^ off];
    }
  }
}

/// Values that make the order matter: magnitudes over 40 decades, both signs, exact zeros of
/// both signs and cancelling pairs.
double draw(std::mt19937_64& gen) {
  std::uniform_int_distribution<int> kind(0, 9);
  std::uniform_real_distribution<double> u(-1, 1);
  std::uniform_int_distribution<int> exp(-20, 20);
  switch (kind(gen)) {
    case 0:
      return 0.0;
    case 1:
      return -0.0;
    case 2:
      return 1e16;
    case 3:
      return -1e16;
    default:
      return std::ldexp(u(gen), exp(gen) * 2);
  }
}

template <int N>
void check(std::mt19937_64& gen, int rounds, int& order_mattered) {
  for (int r = 0; r < rounds; ++r) {
    Lanes lanes;
    for (auto& l : lanes) {
      l.resize(N);
      for (auto& v : l) v = r % 7 == 0 ? -0.0 : draw(gen);  // some rounds all -0.0
    }
    std::array<double, N> want{};
    for (int k = 0; k < N; ++k) {
      std::array<double, kLanes> v{};
      double in_order = 0;
      for (int l = 0; l < kLanes; ++l) {
        v[l] = lanes[l][k];
        in_order += v[l];
      }
      want[k] = tree_total(v);
      if (std::bit_cast<std::uint64_t>(in_order) != std::bit_cast<std::uint64_t>(want[k])) {
        ++order_mattered;
      }
    }
    spread_rounds<N>(lanes, 16);
    for (int l = 0; l < kLanes; ++l) {
      const int k = spread_sum_of(l, N);
      ASSERT_EQ(std::bit_cast<std::uint64_t>(lanes[l][0]), std::bit_cast<std::uint64_t>(want[k]))
          << "N = " << N << ", lane " << l << ", sum " << k << ": " << lanes[l][0] << " against "
          << want[k];
    }
  }
}

TEST(WarpSpreadTest, EveryLaneHoldsItsSumsTreeTotalBitForBit) {
  std::mt19937_64 gen(26);
  int order_mattered = 0;
  check<1>(gen, 200, order_mattered);
  check<2>(gen, 200, order_mattered);
  check<4>(gen, 200, order_mattered);
  check<8>(gen, 200, order_mattered);
  check<16>(gen, 200, order_mattered);
  // The values tell orders apart: a reduction that added in another order would fail above.
  EXPECT_GT(order_mattered, 1000);
}

TEST(WarpSpreadTest, SumOfLaneSplitsTheWarpEvenly) {
  for (int n : {1, 2, 4, 8, 16, 32}) {
    std::vector<int> lanes_of(n, 0);
    for (int l = 0; l < kLanes; ++l) ++lanes_of[spread_sum_of(l, n)];
    for (int k = 0; k < n; ++k) EXPECT_EQ(lanes_of[k], kLanes / n) << "n = " << n << ", sum " << k;
  }
}

}  // namespace
}  // namespace sluice::test
