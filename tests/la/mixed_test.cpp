// The reference's Listing 12: the main loop of a preconditioned CG written with synchronous and
// asynchronous calls freely mixed over three contexts, without any user synchronization. It
// must compute what the library's CG computes.

#include "backend_param.hpp"
#include "sluice/la.hpp"

namespace sluice::test {
namespace {

using namespace sluice::la;  // NOLINT: the layer under test

class MixedTest : public BackendTest {};

struct MixedResult {
  int iterations = 0;
  std::vector<double> x;
};

/// Listing 12, with its initialization written out. Vectors live on different contexts too.
MixedResult listing12(const Mat& A, const Vec& B, const Context& ctx_a, const Context& ctx_b,
                      const Context& ctx_c, double rtol, int max_it) {
  const auto n = B.size();
  Vec P(ctx_a, n), W(ctx_a, n), Z(ctx_c, n), X(ctx_b, n), R(ctx_b, n), invdiag(ctx_c, n);
  diagonal(A, invdiag);
  Vec one(ctx_c, n);
  set(one, 1.0);
  pointwise_divide(invdiag, one, invdiag);  // Jacobi: 1 / diag
  Managed<double> a, b, beta, betaold, dp;

  // i = 0: x = 0, r = b, z = B r, the initial norm and beta, p = z.
  set(X, 0.0);
  copy(B, R);
  pointwise_mult(Z, R, invdiag);
  norm(Z, NormType::two, dp, ctx_a);
  const double ttol = rtol * dp.value();  // KSPConvergedDefault with rtol only
  dot(Z, R, beta, ctx_b);
  copy(Z, P);
  mult(A, P, W);
  dot(P, W, a, ctx_b);
  a = eval(beta / a, ctx_c);
  betaold = eval(beta, ctx_a);
  axpy(X, a, P, ctx_b);
  axpy(R, -a, W, ctx_c);
  pointwise_mult(Z, R, invdiag);
  norm(Z, NormType::two, dp, ctx_a);
  int its = 1;
  if (dp.value() > ttol) {
    dot(Z, R, beta, ctx_b);
    for (int i = 1; i < max_it; ++i) {
      // Asynchronous, evaluation runs on the device.
      b = eval(beta / betaold, ctx_a);
      // Synchronous: b.value() brings the value to the host (an implicit wait for it alone).
      aypx(P, b.value(), Z);  // p <- z + b p
      // Synchronous, on P's context: waits for the aypx through the tracker.
      mult(A, P, W);  // w <- A p
      // Asynchronous.
      dot(P, W, a, ctx_b);          // a <- p'w
      a = eval(beta / a, ctx_c);    // a <- beta / a, after the dot
      betaold = eval(beta, ctx_a);  // concurrently with the expression above
      axpy(X, a, P, ctx_b);         // x <- x + a p, after the negation's input
      axpy(R, -a, W, ctx_c);        // r <- r - a w
      // "ApplyPreconditioner": waits only for the second axpy.
      pointwise_mult(Z, R, invdiag);      // z <- B r
      norm(Z, NormType::two, dp, ctx_a);  // dp <- ||z||
      ++its;
      if (dp.value() <= ttol) break;  // the user's convergence test
      dot(Z, R, beta, ctx_b);         // beta <- z'r
    }
  }
  return {its, X.to_vector()};
}

TEST_P(MixedTest, Listing12MatchesTheLibraryCg) {
  auto a = make_context();
  auto b = make_context();
  auto c = make_context();
  auto A = Mat::stencil(a, Stencil::d2p5, 48, 40);
  const auto n = static_cast<std::size_t>(A.rows());
  Vec ones(a, std::vector<double>(n, 1.0)), B(b, n);
  mult(A, ones, B);

  const auto mixed = listing12(A, B, a, b, c, 1e-8, 1000);

  Vec x(c, n);
  Ksp ksp(A, {.type = KspType::cg,
              .pc = PcType::jacobi,
              .rtol = 1e-8,
              .atol = 0,
              .mode = SolveMode::sync});
  const auto r = ksp.solve(B, x);
  ASSERT_EQ(r.reason, ConvergedReason::converged_rtol);
  EXPECT_EQ(mixed.iterations, r.iterations);
  const auto want = x.to_vector();
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_NEAR(mixed.x[i], want[i], 1e-12) << i;
    ASSERT_NEAR(mixed.x[i], 1.0, 1e-6) << i;
  }
}

TEST_P(MixedTest, Listing12UnderBlockingContexts) {
  // The same loop where one context is the globally blocking kind: still correct.
  auto a = make_context(StreamKind::blocking);
  auto b = make_context();
  auto c = make_context();
  auto A = Mat::stencil(b, Stencil::d3p7, 10, 9, 8);
  const auto n = static_cast<std::size_t>(A.rows());
  Vec ones(c, std::vector<double>(n, 1.0)), B(a, n);
  mult(A, ones, B);
  const auto mixed = listing12(A, B, a, b, c, 1e-10, 500);
  for (double v : mixed.x) ASSERT_NEAR(v, 1.0, 1e-7);
}

SLUICE_INSTANTIATE_BACKENDS(MixedTest);

}  // namespace
}  // namespace sluice::test
