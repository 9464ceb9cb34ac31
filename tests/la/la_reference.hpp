#pragma once
// Plain sequential references for the la tests: vector arithmetic, CSR products, and PETSc's
// KSPSolve_CG / KSPSolve_TFQMR with KSPConvergedDefault transcribed statement by statement from
// PETSc (src/ksp/ksp/impls/cg/cg.c, tfqmr/tfqmr.c, interface/iterativ.c) onto std::vector. The
// solvers under test must give the same iteration counts, reasons and residual histories.

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "sluice/la.hpp"

namespace sluice::test::ref {

/// Where the real test matrices are: $SLUICE_MATRIX_DIR, else the build's default
/// (../shared/data/matrices next to the source tree); empty if neither is set.
inline std::string matrix_dir() {
  if (const char* env = std::getenv("SLUICE_MATRIX_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
#ifdef SLUICE_MATRIX_DIR
  return SLUICE_MATRIX_DIR;
#else
  return {};
#endif
}

struct Csr {
  std::int64_t n = 0;
  std::vector<std::int32_t> row_ptr, col;
  std::vector<double> val;
};

inline Csr from_mat(const Mat& A) {
  auto h = A.to_host();
  return {A.rows(), std::move(h.row_ptr), std::move(h.col), std::move(h.val)};
}

inline std::vector<double> mult(const Csr& A, const std::vector<double>& x) {
  std::vector<double> y(static_cast<std::size_t>(A.n));
  for (std::int64_t i = 0; i < A.n; ++i) {
    double acc = 0;
    for (auto k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k) acc += A.val[k] * x[A.col[k]];
    y[static_cast<std::size_t>(i)] = acc;
  }
  return y;
}

inline std::vector<double> inverse_diagonal(const Csr& A) {
  std::vector<double> d(static_cast<std::size_t>(A.n), 0.0);
  for (std::int64_t i = 0; i < A.n; ++i) {
    for (auto k = A.row_ptr[i]; k < A.row_ptr[i + 1]; ++k) {
      if (A.col[k] == i) d[static_cast<std::size_t>(i)] += A.val[k];
    }
  }
  for (auto& v : d) v = v == 0.0 ? 1.0 : 1.0 / v;
  return d;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}
inline double norm(const std::vector<double>& a) {
  return std::sqrt(dot(a, a));
}

struct Result {
  int its = 0;
  ConvergedReason reason = ConvergedReason::iterating;
  double rnorm = 0;
  std::vector<double> history;
  std::vector<double> x;
};

struct Options {
  bool jacobi = true;
  KspNormType norm = KspNormType::preconditioned;
  double rtol = 1e-5, atol = 1e-50, dtol = 1e4;
  int max_it = 10000;
};

/// KSPConvergedDefault with a zero initial guess.
struct Converged {
  const Options& o;
  double rnorm0 = 0, ttol = 0;
  ConvergedReason operator()(int n, double rnorm) {
    if (n == 0) {
      rnorm0 = rnorm;
      ttol = std::max(o.rtol * rnorm0, o.atol);
    }
    if (std::isnan(rnorm) || std::isinf(rnorm)) return ConvergedReason::diverged_nanorinf;
    if (rnorm <= ttol) {
      return rnorm < o.atol ? ConvergedReason::converged_atol : ConvergedReason::converged_rtol;
    }
    if (rnorm >= o.dtol * rnorm0) return ConvergedReason::diverged_dtol;
    return ConvergedReason::iterating;
  }
};

inline Result cg(const Csr& A, const std::vector<double>& B, const Options& o) {
  const auto n = B.size();
  const auto inv = o.jacobi ? inverse_diagonal(A) : std::vector<double>(n, 1.0);
  auto pc = [&](const std::vector<double>& r) {
    std::vector<double> z(n);
    for (std::size_t i = 0; i < n; ++i) z[i] = inv[i] * r[i];
    return z;
  };
  Result res;
  Converged converged{o};
  std::vector<double> X(n, 0.0), R = B, Z, P(n), W;
  double dpi = 0, a = 1, beta = 0, betaold = 1, b = 0, dpiold = 0, dp = 0;
  Z = pc(R);
  switch (o.norm) {
    case KspNormType::preconditioned:
      dp = norm(Z);
      break;
    case KspNormType::unpreconditioned:
      dp = norm(R);
      break;
    case KspNormType::natural:
      dp = std::sqrt(std::abs(dot(Z, R)));
      break;
    default:
      dp = 0;
  }
  res.history.push_back(dp);
  res.rnorm = dp;
  if ((res.reason = converged(0, dp)) != ConvergedReason::iterating) return res.x = X, res;
  beta = dot(Z, R);
  int i = 0;
  do {
    res.its = i + 1;
    if (beta == 0.0) {
      res.reason = ConvergedReason::converged_atol;
      break;
    } else if (i > 0 && beta * betaold < 0.0) {
      res.reason = ConvergedReason::diverged_indefinite_pc;
      break;
    }
    if (!i) {
      P = Z;
      b = 0.0;
    } else {
      b = beta / betaold;
      for (std::size_t k = 0; k < n; ++k) P[k] = Z[k] + b * P[k];
    }
    dpiold = dpi;
    W = mult(A, P);
    dpi = dot(P, W);
    betaold = beta;
    auto sign = [](double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; };
    if (dpi == 0.0 || (i > 0 && sign(dpi) * sign(dpiold) < 0.0)) {
      res.reason = ConvergedReason::diverged_indefinite_mat;
      break;
    }
    a = beta / dpi;
    for (std::size_t k = 0; k < n; ++k) X[k] = X[k] + a * P[k];
    for (std::size_t k = 0; k < n; ++k) R[k] = R[k] - a * W[k];
    Z = pc(R);
    if (o.norm == KspNormType::preconditioned) {
      dp = norm(Z);
    } else if (o.norm == KspNormType::unpreconditioned) {
      dp = norm(R);
    } else if (o.norm == KspNormType::natural) {
      dp = std::sqrt(std::abs(dot(Z, R)));
    } else {
      dp = 0;
    }
    res.rnorm = dp;
    res.history.push_back(dp);
    if ((res.reason = converged(i + 1, dp)) != ConvergedReason::iterating) break;
    beta = dot(Z, R);
    i++;
  } while (i < o.max_it);
  if (i >= o.max_it) res.reason = ConvergedReason::diverged_its;
  res.x = X;
  return res;
}

/// TFQMR with left (preconditioned norm) or right (unpreconditioned norm) Jacobi.
inline Result tfqmr(const Csr& A, const std::vector<double>& Bv, const Options& o) {
  const auto n = Bv.size();
  const auto inv = o.jacobi ? inverse_diagonal(A) : std::vector<double>(n, 1.0);
  const bool right = o.jacobi && o.norm == KspNormType::unpreconditioned;
  auto scale = [&](const std::vector<double>& v) {
    std::vector<double> out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = inv[i] * v[i];
    return out;
  };
  // K = B A (left) or A B (right)
  auto K = [&](const std::vector<double>& v) {
    if (!o.jacobi) return mult(A, v);
    return right ? mult(A, scale(v)) : scale(mult(A, v));
  };
  Result res;
  Converged converged{o};
  std::vector<double> X(n, 0.0), R = (o.jacobi && !right) ? scale(Bv) : Bv;
  double dp = norm(R);
  res.rnorm = o.norm != KspNormType::none ? dp : 0.0;
  if ((res.reason = converged(0, res.rnorm)) != ConvergedReason::iterating) return res.x = X, res;
  std::vector<double> RP = R, U = R, P = R, V = K(P), D(n, 0.0), Q(n), T(n);
  double etaold = 0, psiold = 0, tau = dp, dpold = dp;
  double rhoold = dot(R, RP), rho = 0, s = 0, a = 0, b = 0, eta = 0, cf = 0;
  int i = 0;
  do {
    res.its++;
    s = dot(V, RP);
    a = rhoold / s;
    for (std::size_t k = 0; k < n; ++k) Q[k] = -a * V[k] + U[k];
    for (std::size_t k = 0; k < n; ++k) T[k] = 1.0 * U[k] + Q[k];
    const auto AUQ = K(T);
    for (std::size_t k = 0; k < n; ++k) R[k] = R[k] + -a * AUQ[k];
    dp = norm(R);
    for (int m = 0; m < 2; m++) {
      const double w = !m ? std::sqrt(dp * dpold) : dp;
      const double psi = w / tau;
      const double cm = 1.0 / std::sqrt(1.0 + psi * psi);
      tau = tau * psi * cm;
      eta = cm * cm * a;
      cf = psiold * psiold * etaold / a;
      const auto& src = !m ? U : Q;
      for (std::size_t k = 0; k < n; ++k) D[k] = src[k] + cf * D[k];
      for (std::size_t k = 0; k < n; ++k) X[k] = X[k] + eta * D[k];
      const double dpest = std::sqrt(2 * i + m + 2.0) * tau;
      res.rnorm = o.norm != KspNormType::none ? dpest : 0.0;
      res.history.push_back(res.rnorm);
      if ((res.reason = converged(i + 1, res.rnorm)) != ConvergedReason::iterating) break;
      etaold = eta;
      psiold = psi;
    }
    if (res.reason != ConvergedReason::iterating) break;
    rho = dot(R, RP);
    b = rho / rhoold;
    for (std::size_t k = 0; k < n; ++k) U[k] = b * Q[k] + R[k];
    for (std::size_t k = 0; k < n; ++k) Q[k] = Q[k] + b * P[k];
    for (std::size_t k = 0; k < n; ++k) P[k] = b * Q[k] + U[k];
    V = K(P);
    rhoold = rho;
    dpold = dp;
    i++;
  } while (i < o.max_it);
  if (i >= o.max_it) res.reason = ConvergedReason::diverged_its;
  if (right) X = scale(X);
  res.x = X;
  return res;
}

}  // namespace sluice::test::ref
