// Canned FFTs on every backend: against a naive DFT, round trips, batches, 2D, and misuse.

#include <cmath>
#include <complex>
#include <numbers>
#include <string>

#include "backend_param.hpp"
#include "canned_test_util.hpp"
#include "sluice/fft.hpp"

namespace sluice::test {
namespace {

using fft::Direction;
using cd = std::complex<double>;

class FftTest : public BackendTest {};

template <class T>
double tol() {
  return std::is_same_v<T, float> ? 2e-4 : 1e-11;
}

template <class T>
std::vector<std::complex<T>> random_complex(std::size_t n, unsigned seed) {
  const auto re = random_values<T>(n, seed), im = random_values<T>(n, seed + 100);
  std::vector<std::complex<T>> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = {re[i], im[i]};
  return v;
}

// The unnormalized DFT of one rows x cols row-major array (sign -1 forward), in double.
template <class T>
std::vector<cd> naive_dft(const std::vector<std::complex<T>>& x, std::size_t off, std::size_t rows,
                          std::size_t cols, int sign) {
  std::vector<cd> out(rows * cols);
  for (std::size_t kr = 0; kr < rows; ++kr) {
    for (std::size_t kc = 0; kc < cols; ++kc) {
      cd acc = 0;
      for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t c = 0; c < cols; ++c) {
          const double ph =
              sign * 2 * std::numbers::pi *
              (double(kr * r % rows) / double(rows) + double(kc * c % cols) / double(cols));
          acc += cd(x[off + r * cols + c]) * cd(std::cos(ph), std::sin(ph));
        }
      }
      out[kr * cols + kc] = acc;
    }
  }
  return out;
}

template <class T>
void check_c2c(const Context& ctx, fft::Shape shape, std::size_t batch) {
  const std::size_t rows = shape.rank == 2 ? shape.dims[0] : 1;
  const std::size_t cols = shape.rank == 2 ? shape.dims[1] : shape.dims[0];
  const std::size_t per = rows * cols;
  const auto hx = random_complex<T>(per * batch, 11);
  auto x = to_device(ctx, hx);
  DeviceBuffer<std::complex<T>> X(ctx, per * batch);
  fft::c2c<T>(ctx, x, X, shape, Direction::forward, batch);
  const auto got = to_host(ctx, X);
  for (std::size_t b = 0; b < batch; ++b) {
    const auto ref = naive_dft(hx, b * per, rows, cols, -1);
    for (std::size_t i = 0; i < per; ++i) {
      ASSERT_NEAR(std::abs(cd(got[b * per + i]) - ref[i]), 0.0, tol<T>() * double(per))
          << "batch " << b << " index " << i;
    }
  }
  // Inverse in place: back to x * per.
  fft::c2c<T>(ctx, X, X, shape, Direction::inverse, batch);
  const auto back = to_host(ctx, X);
  for (std::size_t i = 0; i < per * batch; ++i) {
    ASSERT_NEAR(std::abs(cd(back[i]) / double(per) - cd(hx[i])), 0.0, tol<T>()) << i;
  }
}

TEST_P(FftTest, ComplexTransformsMatchANaiveDft) {
  auto ctx = make_context();
  check_c2c<double>(ctx, {16}, 1);
  check_c2c<double>(ctx, {17}, 3);  // a prime length, batched
  check_c2c<float>(ctx, {12}, 2);
  check_c2c<double>(ctx, {5, 6}, 2);
  check_c2c<float>(ctx, {4, 7}, 1);
}

template <class T>
void check_r2c(const Context& ctx, fft::Shape shape, std::size_t batch) {
  const std::size_t rows = shape.rank == 2 ? shape.dims[0] : 1;
  const std::size_t cols = shape.rank == 2 ? shape.dims[1] : shape.dims[0];
  const std::size_t per = rows * cols, half = rows * (cols / 2 + 1);
  const auto hx = random_values<T>(per * batch, 21);
  auto x = to_device(ctx, hx);
  DeviceBuffer<std::complex<T>> X(ctx, half * batch);
  fft::r2c<T>(ctx, x, X, shape, batch);
  const auto got = to_host(ctx, X);
  std::vector<std::complex<T>> as_complex(hx.begin(), hx.end());
  for (std::size_t b = 0; b < batch; ++b) {
    const auto ref = naive_dft(as_complex, b * per, rows, cols, -1);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t c = 0; c <= cols / 2; ++c) {
        const auto g = cd(got[b * half + r * (cols / 2 + 1) + c]);
        ASSERT_NEAR(std::abs(g - ref[r * cols + c]), 0.0, tol<T>() * double(per))
            << "batch " << b << " (" << r << ", " << c << ")";
      }
    }
  }
  DeviceBuffer<T> y(ctx, per * batch);
  fft::c2r<T>(ctx, X, y, shape, batch);  // overwrites X
  const auto back = to_host(ctx, y);
  for (std::size_t i = 0; i < per * batch; ++i) {
    ASSERT_NEAR(double(back[i]) / double(per), double(hx[i]), tol<T>()) << i;
  }
}

TEST_P(FftTest, RealTransformsMatchANaiveDftAndRoundTrip) {
  auto ctx = make_context();
  check_r2c<double>(ctx, {16}, 1);
  check_r2c<double>(ctx, {15}, 4);
  check_r2c<float>(ctx, {10}, 3);
  check_r2c<double>(ctx, {6, 8}, 2);
  check_r2c<float>(ctx, {5, 9}, 1);
}

TEST_P(FftTest, CachedPlansGiveTheSameResultsAcrossCallsAndContexts) {
  auto a = make_context(), b = make_context();
  const auto hx = random_complex<double>(64 * 3, 5);
  auto x = to_device(a, hx);
  DeviceBuffer<std::complex<double>> y1(a, hx.size()), y2(a, hx.size()), y3(b, hx.size());
  fft::c2c(a, x, y1, {8, 8}, Direction::forward, 3);
  fft::c2c(a, x, y2, {8, 8}, Direction::forward, 3);  // the cached plan
  fft::c2c(b, x, y3, {8, 8}, Direction::forward, 3);  // b's own plan; b waits for x's upload
  const auto r1 = to_host(a, y1);
  EXPECT_EQ(r1, to_host(a, y2));
  EXPECT_EQ(r1, to_host(b, y3));
}

TEST_P(FftTest, MisuseIsAClearError) {
  auto ctx = make_context();
  DeviceBuffer<std::complex<float>> c(ctx, 8), c5(ctx, 5);
  DeviceBuffer<float> r(ctx, 8);
  auto expect_error = [](auto&& f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error([&] { fft::c2c(ctx, c, c5, {8}, Direction::forward); },
               "buffer out has 5 elements but the shape and batch need exactly 8");
  expect_error([&] { fft::c2c(ctx, c, c, {4}, Direction::forward, 3); }, "need exactly 12");
  expect_error([&] { fft::r2c(ctx, r, c, {8}); }, "need exactly 5");  // 8 / 2 + 1
  expect_error([&] { fft::r2c(ctx, r, c5, {0}); }, "size 0");
  ctx.synchronize();
}

SLUICE_INSTANTIATE_BACKENDS(FftTest);

}  // namespace
}  // namespace sluice::test
