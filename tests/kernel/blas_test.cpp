// Canned BLAS on every backend against reference loops, across contexts, and misuse.

#include <cmath>
#include <string>

#include "backend_param.hpp"
#include "canned_test_util.hpp"
#include "sluice/blas.hpp"

namespace sluice::test {
namespace {

using blas::Op;

class BlasTest : public BackendTest {};

template <class T>
double tol() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-13;
}

// Element (i, j) of op(X) for column-major X with leading dimension ld.
template <class T>
T at(const std::vector<T>& x, std::size_t off, std::size_t ld, bool t, std::size_t i,
     std::size_t j) {
  return t ? x[off + j + i * ld] : x[off + i + j * ld];
}

template <class T>
void check_gemm(const Context& ctx, std::size_t batch) {
  const std::size_t m = 13, n = 9, k = 11;
  for (Op oa : {Op::none, Op::transpose}) {
    for (Op ob : {Op::none, Op::transpose}) {
      SCOPED_TRACE(std::to_string(int(oa)) + std::to_string(int(ob)));
      const bool ta = oa == Op::transpose, tb = ob == Op::transpose;
      // Padded leading dimensions prove that ld is honoured.
      const std::size_t lda = (ta ? k : m) + 3, ldb = (tb ? n : k) + 2, ldc = m + 1;
      const std::size_t sa = lda * (ta ? m : k), sb = ldb * (tb ? k : n), sc = ldc * n;
      const auto ha = random_values<T>(sa * batch, 1), hb = random_values<T>(sb * batch, 2);
      const auto hc = random_values<T>(sc * batch, 3);
      auto a = to_device(ctx, ha), b = to_device(ctx, hb), c = to_device(ctx, hc);
      const T alpha = T(0.75), beta = T(-0.5);
      if (batch == 1) {
        blas::gemm<T>(ctx, oa, ob, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      } else {
        blas::gemm_batched<T>(ctx, oa, ob, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc,
                              batch);
      }
      const auto got = to_host(ctx, c);
      for (std::size_t p = 0; p < batch; ++p) {
        for (std::size_t j = 0; j < n; ++j) {
          for (std::size_t i = 0; i < ldc; ++i) {
            const std::size_t idx = p * sc + i + j * ldc;
            if (i >= m) {  // padding rows are untouched
              ASSERT_EQ(got[idx], hc[idx]);
              continue;
            }
            double ref = 0;
            for (std::size_t l = 0; l < k; ++l) {
              ref += double(at(ha, p * sa, lda, ta, i, l)) * double(at(hb, p * sb, ldb, tb, l, j));
            }
            ref = double(alpha) * ref + double(beta) * double(hc[idx]);
            ASSERT_NEAR(got[idx], ref, tol<T>() * 8) << "C(" << i << "," << j << ") of " << p;
          }
        }
      }
    }
  }
}

TEST_P(BlasTest, GemmMatchesTheReferenceForEveryTransposition) {
  auto ctx = make_context();
  check_gemm<float>(ctx, 1);
  check_gemm<double>(ctx, 1);
}

TEST_P(BlasTest, BatchedGemmMatchesTheReference) {
  auto ctx = make_context();
  check_gemm<float>(ctx, 3);
  check_gemm<double>(ctx, 4);
}

template <class T>
void check_level2_and_1(const Context& ctx) {
  const std::size_t m = 17, n = 10, lda = 19;
  const auto ha = random_values<T>(lda * n, 4);
  auto a = to_device(ctx, ha);
  for (Op op : {Op::none, Op::transpose}) {
    const bool t = op == Op::transpose;
    const std::size_t xl = t ? m : n, yl = t ? n : m;
    const auto hx = random_values<T>(xl, 5), hy = random_values<T>(yl, 6);
    auto x = to_device(ctx, hx), y = to_device(ctx, hy);
    blas::gemv<T>(ctx, op, m, n, T(2), a, lda, x, T(0.5), y);
    const auto got = to_host(ctx, y);
    for (std::size_t i = 0; i < yl; ++i) {
      double ref = 0;
      for (std::size_t l = 0; l < xl; ++l) ref += double(at(ha, 0, lda, t, i, l)) * double(hx[l]);
      ASSERT_NEAR(got[i], 2 * ref + 0.5 * double(hy[i]), tol<T>() * 8) << i;
    }
  }
  const std::size_t len = 1001;
  const auto hx = random_values<T>(len, 7), hy = random_values<T>(len, 8);
  auto x = to_device(ctx, hx), y = to_device(ctx, hy);
  DeviceBuffer<T> r(ctx, 2);
  double dot = 0, sq = 0;
  for (std::size_t i = 0; i < len; ++i) {
    dot += double(hx[i]) * double(hy[i]);
    sq += double(hx[i]) * double(hx[i]);
  }
  blas::dot<T>(ctx, x, y, r);
  EXPECT_NEAR(to_host(ctx, r)[0], dot, tol<T>() * len);
  blas::nrm2<T>(ctx, x, r);
  EXPECT_NEAR(to_host(ctx, r)[0], std::sqrt(sq), tol<T>() * len);
  blas::axpy<T>(ctx, T(-3), x, y);
  auto gy = to_host(ctx, y);
  for (std::size_t i = 0; i < len; ++i)
    ASSERT_NEAR(gy[i], -3 * double(hx[i]) + hy[i], tol<T>() * 4);
  blas::scal<T>(ctx, T(0.25), y);
  const auto gs = to_host(ctx, y);
  for (std::size_t i = 0; i < len; ++i) ASSERT_EQ(gs[i], gy[i] * T(0.25));  // exact: a power of 2
}

TEST_P(BlasTest, GemvDotNrm2AxpyScalMatchTheReference) {
  auto ctx = make_context();
  check_level2_and_1<float>(ctx);
  check_level2_and_1<double>(ctx);
}

TEST_P(BlasTest, OperationsOnOtherContextsAreOrderedByTheTracker) {
  // a scales x while b reads it: b must see the scaled values without any explicit wait.
  auto a = make_context(), b = make_context();
  const std::size_t n = 200000;
  std::vector<double> ones(n, 1.0);
  auto x = to_device(a, ones);
  DeviceBuffer<double> r(b, 1);
  for (int i = 0; i < 5; ++i) blas::scal(a, 2.0, x);
  blas::dot(b, x, x, r);  // (32)^2 * n
  EXPECT_EQ(to_host(b, r)[0], 1024.0 * n);
}

TEST_P(BlasTest, BlockingContextsCompleteEachCall) {
  auto ctx = make_context(StreamKind::blocking);
  std::vector<float> h(64, 2.0f);
  auto x = to_device(ctx, h);
  DeviceBuffer<float> r(ctx, 1);
  blas::nrm2(ctx, x, r);
  EXPECT_FLOAT_EQ(to_host(ctx, r)[0], 16.0f);
}

TEST_P(BlasTest, MisuseIsAClearErrorAndIssuesNothing) {
  auto ctx = make_context();
  DeviceBuffer<double> a(ctx, 10), b(ctx, 10), c(ctx, 10), empty;
  auto expect_error = [](auto&& f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  // A is 4 x 3 with lda 4: 12 elements.
  expect_error([&] { blas::gemm(ctx, Op::none, Op::none, 4, 2, 3, 1.0, a, 4, b, 3, 0.0, c, 4); },
               "buffer A has 10 elements but a 4 x 3 matrix with lda 4 needs 12");
  expect_error([&] { blas::gemm(ctx, Op::none, Op::none, 3, 3, 3, 1.0, a, 2, b, 3, 0.0, c, 3); },
               "lda = 2");
  expect_error(
      [&] {
        blas::gemm_batched(ctx, Op::none, Op::none, 2, 2, 2, 1.0, a, 2, 4, b, 2, 4, 0.0, c, 2, 4,
                           3);
      },
      "buffer A has 10 elements but a 2 x 2 matrix with lda 2, the last of the batch starting at "
      "element 8 needs 12");
  DeviceBuffer<double> shorter(ctx, 9);
  expect_error([&] { blas::axpy(ctx, 1.0, a, shorter); }, "x has 10 elements but y has 9");
  expect_error([&] { blas::dot(ctx, a, b, empty); }, "result buffer is empty");
  DeviceBuffer<double> one(ctx, 1);
  expect_error([&] { blas::gemv(ctx, Op::none, 2, 5, 1.0, a, 2, shorter, 0.0, one); },
               "buffer y has 1 elements");
  ctx.synchronize();
}

SLUICE_INSTANTIATE_BACKENDS(BlasTest);

}  // namespace
}  // namespace sluice::test
