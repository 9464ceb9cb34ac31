// 04 — mixed synchronous and asynchronous linear algebra (reference 000, Listing 12).
//
// The main loop of a Jacobi-preconditioned conjugate gradient, written with synchronous calls
// (host scalars in and out) and asynchronous ones (`Managed` device scalars and a context)
// freely mixed over three contexts. Nobody calls wait_for or synchronize: every operation marks
// what it reads and writes, and the tracker orders exactly the work that conflicts.
// The result is checked against the library's own CG, in sync mode and in graph mode.

#include <cmath>
#include <cstdio>

#include "sluice/la.hpp"

int main() {
  using namespace sluice;
  using namespace sluice::la;
  Context dctx_a(ContextOptions{.name = "a"});
  Context dctx_b(ContextOptions{.device = dctx_a.device(), .name = "b"});
  Context dctx_c(ContextOptions{.device = dctx_a.device(), .name = "c"});

  // The 2D 5-point Laplacian on a 64 x 64 grid, matrix-free; b = A 1 so the solution is 1.
  auto A = Mat::stencil(dctx_a, Stencil::d2p5, 64, 64);
  const auto n = static_cast<std::size_t>(A.rows());
  Vec B(dctx_a, n);
  {
    Vec one(dctx_a, n);
    set(one, 1.0);
    mult(A, one, B);
  }
  // The vectors live on different contexts, too.
  Vec P(dctx_a, n), W(dctx_a, n), Z(dctx_c, n), X(dctx_b, n), R(dctx_b, n), D(dctx_c, n);
  diagonal(A, D);
  Vec one(dctx_c, n);
  set(one, 1.0);
  pointwise_divide(D, one, D);  // the Jacobi preconditioner: 1 / diag(A)
  Managed<double> a, b, beta, betaold, dp;
  const double rtol = 1e-8;
  const int max_it = 1000;

  // Initialization (not shown in the listing): x = 0, r = b, z = B r, and the first iteration.
  set(X, 0.0);
  copy(B, R);
  pointwise_mult(Z, R, D);
  norm(Z, NormType::two, dp, dctx_a);
  const double ttol = rtol * dp.value();
  dot(Z, R, beta, dctx_b);
  copy(Z, P);
  mult(A, P, W);
  dot(P, W, a, dctx_b);
  a = eval(beta / a, dctx_c);
  betaold = eval(beta, dctx_a);
  axpy(X, a, P, dctx_b);
  axpy(R, -a, W, dctx_c);
  pointwise_mult(Z, R, D);
  norm(Z, NormType::two, dp, dctx_a);
  int its = 1;
  bool done = dp.value() <= ttol;
  if (!done) dot(Z, R, beta, dctx_b);

  for (int i = 1; i < max_it && !done; ++i) {
    // Asynchronous, evaluation runs on the device.
    b = eval(beta / betaold, dctx_a);
    // Synchronous: b.value() returns a value on the host, so it waits (for b alone).
    aypx(P, b.value(), Z);  // p <- z + b p
    // Synchronous, on P's context: waits for the aypx through the tracker.
    mult(A, P, W);  // w <- A p
    // Asynchronous, on b.
    dot(P, W, a, dctx_b);  // a <- p'w
    // Also asynchronous, on c: waits for the dot.
    a = eval(beta / a, dctx_c);  // a <- beta / a
    // Asynchronous, on a: runs concurrently with the expression above.
    betaold = eval(beta, dctx_a);  // betaold <- beta
    // The AXPYs wait for a, asynchronously; the second evaluates -a on c first.
    axpy(X, a, P, dctx_b);   // x <- x + a p
    axpy(R, -a, W, dctx_c);  // r <- r - a w
    // Waits only on the second AXPY (no dependence on X, a or P).
    pointwise_mult(Z, R, D);             // z <- B r
    norm(Z, NormType::two, dp, dctx_a);  // dp <- ||z||
    ++its;
    // The user's convergence test: here it reads dp on the host.
    done = dp.value() <= ttol;
    if (!done) dot(Z, R, beta, dctx_b);  // beta <- z'r
  }
  // No need to synchronize: a, b, beta and betaold may go out of scope with work queued.

  // The library's CG, synchronous mode, must agree.
  Vec x(dctx_c, n);
  Ksp ksp(A, {.type = KspType::cg,
              .pc = PcType::jacobi,
              .rtol = rtol,
              .atol = 0,
              .mode = SolveMode::sync});
  const auto r = ksp.solve(B, x);
  const auto mixed = X.to_vector();
  const auto want = x.to_vector();
  double diff = 0, err = 0;
  for (std::size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(mixed[i] - want[i]));
    err = std::max(err, std::abs(mixed[i] - 1.0));
  }
  std::printf("mixed loop: %d iterations, max |x - 1| = %.2e\n", its, err);
  std::printf("Ksp (sync): %d iterations, %s; max difference %.2e\n", r.iterations,
              std::string(to_string(r.reason)).c_str(), diff);

  // Graph mode: the same kernels, recorded once into a graph whose while node repeats a block of
  // iterations until the device state says the solve stopped; the host launches it and waits
  // once. The second solve relaunches the recorded graph. Bit for bit equal to sync mode.
  Ksp graph_ksp(A, {.type = KspType::cg,
                    .pc = PcType::jacobi,
                    .rtol = rtol,
                    .atol = 0,
                    .mode = SolveMode::graph});
  Vec xg(dctx_c, n);
  (void)graph_ksp.solve(B, xg);
  const auto rg = graph_ksp.solve(B, xg);
  const bool same = rg.iterations == r.iterations && xg.to_vector() == want;
  std::printf("Ksp (graph): %d iterations, %s\n", rg.iterations,
              same ? "equal to sync" : "DIFFERENT FROM SYNC");
  const bool ok = its == r.iterations && diff < 1e-12 && err < 1e-6 && same;
  std::printf("%s\n", ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
