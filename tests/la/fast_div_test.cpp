// The cuda stencil kernels' division by constants (src/la/cuda/fast_div.hpp), checked on
// the host against plain division: every divisor up to 4096 and random ones up to 2^31, each at
// the edges of its quotients and at random dividends below 2^31.

#include <gtest/gtest.h>

#include <random>

#include "la/cuda/fast_div.hpp"

namespace sluice::test {
namespace {

using detail::cuda::FastDiv;

void check(std::uint32_t d, std::mt19937& rng) {
  const FastDiv div(d);
  std::uniform_int_distribution<std::uint32_t> any(0, 0x7fffffffu);
  std::vector<std::uint32_t> ns = {0, 1, d - 1, d, d + 1, 0x7fffffffu, 0x7ffffffeu};
  for (std::uint32_t q : {1u, 2u, 7u, 1000u}) {
    const std::uint64_t n = std::uint64_t{q} * d;
    if (n + 1 <= 0x7fffffffu) ns.insert(ns.end(), {std::uint32_t(n - 1), std::uint32_t(n)});
  }
  for (int k = 0; k < 64; ++k) ns.push_back(any(rng));
  for (std::uint32_t n : ns) {
    if (n > 0x7fffffffu) continue;
    ASSERT_EQ(div(n), n / d) << n << " / " << d;
  }
}

TEST(FastDiv, MatchesDivisionBelowTwoToThe31) {
  std::mt19937 rng(12345);
  for (std::uint32_t d = 1; d <= 4096; ++d) check(d, rng);
  std::uniform_int_distribution<std::uint32_t> big(4097, 0x7fffffffu);
  for (int k = 0; k < 4096; ++k) check(big(rng), rng);
  for (std::uint32_t e = 12; e < 31; ++e) {
    check(1u << e, rng);
    check((1u << e) + 1, rng);
    check((1u << e) - 1, rng);
  }
}

}  // namespace
}  // namespace sluice::test
