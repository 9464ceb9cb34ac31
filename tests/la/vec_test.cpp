// Vec operations, sync and async, on every backend, against a sequential reference.

#include <cmath>
#include <limits>
#include <random>

#include "backend_param.hpp"
#include "la_reference.hpp"
#include "sluice/la.hpp"

namespace sluice::test {
namespace {

using namespace sluice::la;  // NOLINT: the layer under test

class VecTest : public BackendTest {
 protected:
  static std::vector<double> random(std::size_t n, unsigned seed) {
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    std::vector<double> v(n);
    for (auto& x : v) x = d(gen);
    return v;
  }
  /// Relative tolerance for a sum of n terms of size ~1.
  static double tol(std::size_t n) { return 1e-13 * static_cast<double>(n + 1); }
};

// Sizes that cover empty, one element, one chunk and many chunks of the host backend, and
// partial blocks of the cuda backend.
const std::size_t kSizes[] = {0, 1, 7, 1000, 16384, 100003};

TEST_P(VecTest, ElementwiseOperationsMatchTheReference) {
  auto ctx = make_context();
  for (std::size_t n : kSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto hx = random(n, 1), hy = random(n, 2), hw = random(n, 3);
    Vec x(ctx, hx), y(ctx, hy), w(ctx, n);

    auto expect = [&](const Vec& v, auto f) {
      const auto got = v.to_vector();
      ASSERT_EQ(got.size(), n);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_NEAR(got[i], f(i), 1e-15 * (1 + std::abs(f(i)))) << "element " << i;
      }
    };

    set(w, 2.5);
    expect(w, [](std::size_t) { return 2.5; });
    copy(x, w);
    expect(w, [&](std::size_t i) { return hx[i]; });
    scale(w, -3.0);
    expect(w, [&](std::size_t i) { return -3.0 * hx[i]; });
    copy(y, w);
    axpy(w, 0.5, x);
    expect(w, [&](std::size_t i) { return hy[i] + 0.5 * hx[i]; });
    copy(y, w);
    aypx(w, 0.25, x);
    expect(w, [&](std::size_t i) { return hx[i] + 0.25 * hy[i]; });
    copy(y, w);
    axpby(w, 2.0, -1.0, x);
    expect(w, [&](std::size_t i) { return 2.0 * hx[i] - hy[i]; });
    waxpy(w, -2.0, x, y);
    expect(w, [&](std::size_t i) { return -2.0 * hx[i] + hy[i]; });
    pointwise_mult(w, x, y);
    expect(w, [&](std::size_t i) { return hx[i] * hy[i]; });
    Vec nz(ctx, n);
    set(nz, 4.0);
    pointwise_divide(w, x, nz);
    expect(w, [&](std::size_t i) { return hx[i] / 4.0; });
    (void)hw;
  }
}

TEST_P(VecTest, ReductionsMatchTheReference) {
  auto ctx = make_context();
  for (std::size_t n : kSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto hx = random(n, 4), hy = random(n, 5);
    Vec x(ctx, hx), y(ctx, hy);
    double d = 0, n1 = 0, n2 = 0, ninf = 0, s = 0;
    double mx = -std::numeric_limits<double>::infinity();
    double mn = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < n; ++i) {
      d += hx[i] * hy[i];
      n1 += std::abs(hx[i]);
      n2 += hx[i] * hx[i];
      ninf = std::max(ninf, std::abs(hx[i]));
      s += hx[i];
      mx = std::max(mx, hx[i]);
      mn = std::min(mn, hx[i]);
    }
    EXPECT_NEAR(dot(x, y), d, tol(n));
    EXPECT_NEAR(norm(x, NormType::one), n1, tol(n) * (1 + n1));
    EXPECT_NEAR(norm(x), std::sqrt(n2), tol(n) * (1 + n2));
    EXPECT_EQ(norm(x, NormType::infinity), ninf);
    EXPECT_NEAR(sum(x), s, tol(n));
    EXPECT_EQ(max(x), mx);
    EXPECT_EQ(min(x), mn);
  }
}

TEST_P(VecTest, ReductionsAreDeterministic) {
  auto ctx = make_context();
  const auto hx = random(300001, 6), hy = random(300001, 7);
  Vec x(ctx, hx), y(ctx, hy);
  const double first = dot(x, y);
  for (int k = 0; k < 5; ++k) EXPECT_EQ(dot(x, y), first);
}

TEST_P(VecTest, AsyncFormsUseDeviceScalars) {
  auto ctx = make_context();
  const std::size_t n = 50000;
  const auto hx = random(n, 8), hy = random(n, 9);
  Vec x(ctx, hx), y(ctx, hy);
  Managed<double> d, nrm, s, mx;
  dot(x, y, d, ctx);
  norm(x, NormType::two, nrm, ctx);
  sum(x, s, ctx);
  max(x, mx, ctx);
  EXPECT_EQ(d.value(), dot(x, y));
  EXPECT_EQ(nrm.value(), norm(x));
  EXPECT_EQ(s.value(), sum(x));
  EXPECT_EQ(mx.value(), max(x));

  // y = y + (1/||x||) x, then y /= 2, with the scalars never on the host.
  Vec w(ctx, n);
  copy(y, w);
  axpy(w, 1.0 / nrm, x, ctx);
  Managed<double> half(0.5, ctx);
  scale(w, half, ctx);
  const double inv = 1.0 / norm(x);
  const auto got = w.to_vector();
  for (std::size_t i = 0; i < n; i += 997) {
    ASSERT_NEAR(got[i], 0.5 * (hy[i] + inv * hx[i]), 1e-14) << i;
  }
  Managed<double> two(2.0, ctx), three(3.0, ctx);
  axpby(w, two, three, x, ctx);  // w = 2x + 3w
  aypx(w, -two, x, ctx);         // w = x - 2w
  waxpy(w, three, x, y, ctx);    // w = 3x + y
  set(x, two * three, ctx);      // x = 6
  const auto gw = w.to_vector();
  const auto gx = x.to_vector();
  for (std::size_t i = 0; i < n; i += 997) {
    EXPECT_NEAR(gw[i], 3.0 * hx[i] + hy[i], 1e-14);
    EXPECT_EQ(gx[i], 6.0);
  }
}

TEST_P(VecTest, OperationsAcrossContextsNeedNoSynchronization) {
  auto a = make_context();
  auto b = make_context();
  auto c = make_context();
  const std::size_t n = 200000;
  Vec x(a, n), y(b, n), z(c, n);
  // A chain through three contexts, issued without waiting: each step reads the previous one.
  for (int round = 0; round < 10; ++round) {
    set(x, static_cast<double>(round), a);
    copy(x, y, b);
    axpy(y, 1.0, x, b);  // y = 2 round
    Managed<double> nrm;
    norm(y, NormType::infinity, nrm, c);
    set(z, nrm, c);           // z = 2 round
    waxpy(x, -1.0, z, y, a);  // x = y - z = 0
    ASSERT_EQ(max(z), 2.0 * round);
    ASSERT_EQ(norm(x, NormType::infinity), 0.0);
  }
}

TEST_P(VecTest, MisuseIsAClearError) {
  auto ctx = make_context();
  Vec x(ctx, 10), y(ctx, 11);
  try {
    axpy(x, 1.0, y);
    FAIL() << "no error for mismatched sizes";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("sizes differ (10 and 11)"), std::string::npos)
        << e.what();
  }
  Vec empty;
  EXPECT_THROW(set(empty, 1.0, ctx), Error);
  EXPECT_THROW(x.assign(std::vector<double>(3)), Error);
  Managed<double> unset;
  EXPECT_THROW(scale(x, unset, ctx), Error);
}

TEST_P(VecTest, HostValuesRoundTrip) {
  auto ctx = make_context();
  const auto h = random(12345, 10);
  Vec v(ctx, h);
  EXPECT_EQ(v.to_vector(), h);
  auto d = v.duplicate();
  EXPECT_EQ(d.size(), h.size());
  std::vector<double> twice(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) twice[i] = 2 * h[i];
  d.assign(twice);
  EXPECT_EQ(d.to_vector(), twice);
}

SLUICE_INSTANTIATE_BACKENDS(VecTest);

}  // namespace
}  // namespace sluice::test
