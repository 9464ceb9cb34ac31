// The Philox RNG: known answers, the documented map from words to values (bit for bit on every
// backend), the same bits on cuda as on the host, statistics, and misuse.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <string>

#include "backend_param.hpp"
#include "canned_test_util.hpp"
#include "kernel/philox_math.hpp"
#include "sluice/rng.hpp"

namespace sluice::test {
namespace {

// Random123's kat_vectors for philox4x32 with 10 rounds: counter, key, expected output.
TEST(RngPhilox, KnownAnswersOfRandom123) {
  using A4 = std::array<std::uint32_t, 4>;
  using A2 = std::array<std::uint32_t, 2>;
  EXPECT_EQ(rng::philox4x32_10(A4{0, 0, 0, 0}, A2{0, 0}),
            (A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(rng::philox4x32_10(A4{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                               A2{0xffffffff, 0xffffffff}),
            (A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(rng::philox4x32_10(A4{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                               A2{0xa4093822, 0x299f31d0}),
            (A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

class RngTest : public BackendTest {};

// The documented uniform values of block b of `seed`, computed here from the known-answer-checked
// bijection and the formulas of sluice/rng.hpp.
std::vector<float> expected_floats(std::uint64_t seed, std::uint64_t counter, std::size_t n) {
  std::vector<float> v;
  for (std::uint64_t b = counter; v.size() < n; ++b) {
    const auto w = rng::philox4x32_10({std::uint32_t(b), std::uint32_t(b >> 32), 0, 0},
                                      {std::uint32_t(seed), std::uint32_t(seed >> 32)});
    for (auto x : w) {
      if (v.size() < n) v.push_back(std::ldexp(float(2 * (x >> 9) + 1), -24));
    }
  }
  return v;
}

std::vector<double> expected_doubles(std::uint64_t seed, std::uint64_t counter, std::size_t n) {
  std::vector<double> v;
  for (std::uint64_t b = counter; v.size() < n; ++b) {
    const auto w = rng::philox4x32_10({std::uint32_t(b), std::uint32_t(b >> 32), 0, 0},
                                      {std::uint32_t(seed), std::uint32_t(seed >> 32)});
    for (int p = 0; p < 2 && v.size() < n; ++p) {
      const std::uint64_t k = ((std::uint64_t{w[2 * p]} << 32) | w[2 * p + 1]) >> 12;
      v.push_back(std::ldexp(double(2 * k + 1), -53));
    }
  }
  return v;
}

TEST_P(RngTest, UniformValuesFollowTheDocumentedMapBitForBit) {
  auto ctx = make_context();
  const std::uint64_t seed = 0x123456789abcdefull;
  for (std::size_t n : {1, 3, 4, 5, 1023, 70001}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    rng::Philox gen(seed, 7);
    DeviceBuffer<float> f(ctx, n);
    rng::uniform(ctx, f, gen);
    EXPECT_EQ(gen.counter(), 7 + (n + 3) / 4);
    EXPECT_EQ(to_host(ctx, f), expected_floats(seed, 7, n));
    DeviceBuffer<double> d(ctx, n);
    rng::uniform(ctx, d, gen);
    EXPECT_EQ(to_host(ctx, d), expected_doubles(seed, 7 + (n + 3) / 4, n));
  }
}

TEST_P(RngTest, ConsecutiveFillsContinueTheStream) {
  auto ctx = make_context();
  rng::Philox one(99), two(99);
  DeviceBuffer<float> whole(ctx, 16), first(ctx, 8), second(ctx, 8);
  rng::normal(ctx, whole, one);
  rng::normal(ctx, first, two);
  rng::normal(ctx, second, two);
  auto w = to_host(ctx, whole), a = to_host(ctx, first), b = to_host(ctx, second);
  a.insert(a.end(), b.begin(), b.end());
  EXPECT_EQ(a, w);
  EXPECT_EQ(one.counter(), two.counter());
}

template <class T>
std::vector<T> reference_fill(std::uint64_t seed, std::uint64_t counter, std::size_t n, bool normal,
                              T mean, T stddev) {
  constexpr std::size_t per = detail::philox_math::kValuesPerBlock<T>;
  std::vector<T> v(n);
  T block[per];
  for (std::size_t i = 0; i < n; i += per) {
    detail::philox_math::block_values<T>(seed, counter + i / per, normal, mean, stddev, block);
    for (std::size_t j = 0; j < per && i + j < n; ++j) v[i + j] = block[j];
  }
  return v;
}

template <class T>
void expect_same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(T)), 0)
        << "value " << i << ": " << a[i] << " vs " << b[i];
  }
}

template <class T>
void check_normal_bits(const Context& ctx, bool is_host) {
  const std::size_t n = 100003;
  rng::Philox gen(2024, 5);
  DeviceBuffer<T> out(ctx, n);
  rng::normal<T>(ctx, out, gen, T(1.5), T(0.25));
  const auto got = to_host(ctx, out);
  if (is_host) {
    // The host fill against the shared map evaluated here, sequentially.
    expect_same_bits(got, reference_fill<T>(2024, 5, n, true, T(1.5), T(0.25)));
  } else {
    // The device's numbers against the host backend's, bit for bit.
    Context host(Device{"host", 0});
    rng::Philox hgen(2024, 5);
    DeviceBuffer<T> h(host, n);
    rng::normal<T>(host, h, hgen, T(1.5), T(0.25));
    expect_same_bits(got, to_host(host, h));
  }
}

TEST_P(RngTest, NormalValuesAreTheSameBitsOnEveryBackend) {
  auto ctx = make_context();
  check_normal_bits<float>(ctx, is_host());
  check_normal_bits<double>(ctx, is_host());
  if (!is_host()) {
    // Uniform too, against the host backend, with an odd length (partial last block).
    Context host(Device{"host", 0});
    rng::Philox g1(5), g2(5);
    DeviceBuffer<double> d(ctx, 999), h(host, 999);
    rng::uniform(ctx, d, g1);
    rng::uniform(host, h, g2);
    expect_same_bits(to_host(ctx, d), to_host(host, h));
  }
}

// The transform's own log / sin / cos against libm: Box-Muller to within rounding.
template <class T>
void check_transform_accuracy(const Context& ctx) {
  const std::size_t n = 4096;
  rng::Philox gen(77), ugen(77);
  DeviceBuffer<T> z(ctx, n), u(ctx, n);
  rng::normal<T>(ctx, z, gen);
  rng::uniform<T>(ctx, u, ugen);
  const auto gz = to_host(ctx, z), gu = to_host(ctx, u);
  const double tolerance = std::is_same_v<T, float> ? 2e-6 : 1e-14;
  for (std::size_t i = 0; i + 1 < n; i += 2) {
    const double r = std::sqrt(-2 * std::log(double(gu[i])));
    const double a = 2 * std::numbers::pi * double(gu[i + 1]);
    ASSERT_NEAR(gz[i], r * std::cos(a), tolerance * 8) << i;
    ASSERT_NEAR(gz[i + 1], r * std::sin(a), tolerance * 8) << i;
  }
}

TEST_P(RngTest, NormalTransformIsAccurate) {
  auto ctx = make_context();
  check_transform_accuracy<float>(ctx);
  check_transform_accuracy<double>(ctx);
}

double normal_cdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}

// Kolmogorov-Smirnov statistic of sorted values against `cdf`.
template <class T, class F>
double ks(std::vector<T> v, F cdf) {
  std::sort(v.begin(), v.end());
  double d = 0;
  const double n = double(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double c = cdf(double(v[i]));
    d = std::max({d, c - double(i) / n, double(i + 1) / n - c});
  }
  return d;
}

template <class T>
void check_statistics(const Context& ctx) {
  const std::size_t n = 200000;
  // 1.95 / sqrt(n) is the 0.1 % critical value of the KS statistic; the seeds are fixed, so
  // this is deterministic, and a broken map fails it by orders of magnitude.
  const double ks_limit = 1.95 / std::sqrt(double(n));
  rng::Philox gen(31337);
  DeviceBuffer<T> x(ctx, n);
  rng::uniform<T>(ctx, x, gen);
  auto u = to_host(ctx, x);
  double mean = 0, var = 0;
  for (auto v : u) {
    ASSERT_GT(v, T(0));
    ASSERT_LT(v, T(1));
    mean += double(v);
  }
  mean /= double(n);
  for (auto v : u) var += (double(v) - mean) * (double(v) - mean);
  var /= double(n - 1);
  EXPECT_NEAR(mean, 0.5, 4 * std::sqrt(1.0 / 12 / double(n)));
  EXPECT_NEAR(var, 1.0 / 12, 0.002);
  EXPECT_LT(ks(u, [](double t) { return t; }), ks_limit);

  rng::normal<T>(ctx, x, gen, T(3), T(2));
  auto z = to_host(ctx, x);
  mean = 0;
  var = 0;
  for (auto v : z) mean += double(v);
  mean /= double(n);
  for (auto v : z) var += (double(v) - mean) * (double(v) - mean);
  var /= double(n - 1);
  EXPECT_NEAR(mean, 3.0, 4 * 2 / std::sqrt(double(n)));
  EXPECT_NEAR(var, 4.0, 0.05);
  EXPECT_LT(ks(z, [](double t) { return normal_cdf((t - 3) / 2); }), ks_limit);
}

TEST_P(RngTest, FillsAreStatisticallySound) {
  auto ctx = make_context();
  check_statistics<float>(ctx);
  check_statistics<double>(ctx);
}

TEST_P(RngTest, DifferentSeedsGiveDifferentStreams) {
  auto ctx = make_context();
  rng::Philox a(1), b(2);
  DeviceBuffer<double> x(ctx, 64), y(ctx, 64);
  rng::uniform(ctx, x, a);
  rng::uniform(ctx, y, b);
  const auto hx = to_host(ctx, x), hy = to_host(ctx, y);
  std::size_t same = 0;
  for (std::size_t i = 0; i < hx.size(); ++i) same += hx[i] == hy[i];
  EXPECT_EQ(same, 0u);
}

TEST_P(RngTest, AnEmptyFillIssuesNothingAndKeepsTheGenerator) {
  auto ctx = make_context();
  rng::Philox gen(1, 10);
  DeviceBuffer<float> empty;
  rng::uniform(ctx, empty, gen);
  EXPECT_EQ(gen.counter(), 10u);
}

SLUICE_INSTANTIATE_BACKENDS(RngTest);

}  // namespace
}  // namespace sluice::test
