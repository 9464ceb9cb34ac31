#pragma once
// Plain sequential references for the la tests: vector arithmetic, CSR products, and PETSc's
// KSPSolve_CG / KSPSolve_TFQMR with KSPConvergedDefault transcribed statement by statement from
// PETSc (src/ksp/ksp/impls/cg/cg.c, tfqmr/tfqmr.c, interface/iterativ.c) onto std::vector. The
// solvers under test must give the same iteration counts, reasons and residual histories.
// Every sum runs in a chosen order (SumOrder), the row sums of the CSR product in one
// (Options::row_order), dot products and norms in another (Options::dot_order): sequential for
// both by default, the host backend's order; the others give the envelope of iteration counts
// that equally valid orders give (a device sums in other orders).

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "sluice/la.hpp"

namespace sluice::test::ref {

using namespace sluice::la;  // NOLINT: the reference mirrors the la layer

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

/// The order in which a sum of n terms is formed.
enum class SumOrder {
  sequential,   // first to last (the host backend's order)
  reversed,     // last to first
  pairwise,     // recursive halving: sum(first half) + sum(second half)
  blocked,      // the cuda backend's reductions: blocks of 256 terms, then the block partials
  host_chunks,  // the host backend's: chunks of kHostChunk terms, each in four interleaved
                // lanes ((l0 + l1) + (l2 + l3), term k of a chunk in lane k % 4), then the
                // chunks' partials first to last
};
/// The host backend's chunk length (kChunk in its la kernels, src/la/host/lanes.hpp
/// for the lanes).
inline constexpr std::size_t kHostChunk = 1024;
inline constexpr std::array<SumOrder, 4> kSumOrders = {SumOrder::sequential, SumOrder::reversed,
                                                       SumOrder::pairwise, SumOrder::blocked};
inline const char* to_string(SumOrder o) {
  switch (o) {
    case SumOrder::sequential:
      return "sequential";
    case SumOrder::reversed:
      return "reversed";
    case SumOrder::pairwise:
      return "pairwise";
    case SumOrder::blocked:
      return "blocked";
    case SumOrder::host_chunks:
      return "host chunks";
  }
  return "?";
}

namespace detail {

constexpr std::size_t kBlock = 256, kWarp = 32;

/// One block of kBlock threads combining one value each, as the cuda backend's block_combine: a
/// shuffle tree in each warp (lane l adds lane l + 16, 8, 4, 2, 1), then the warp sums in order.
inline double block_combine(std::array<double, kBlock>& v) {
  double total = 0;
  for (std::size_t w = 0; w < kBlock / kWarp; ++w) {
    double* lane = v.data() + w * kWarp;
    for (std::size_t off = kWarp / 2; off > 0; off /= 2) {
      for (std::size_t l = 0; l < off; ++l) lane[l] += lane[l + off];
    }
    total += lane[0];
  }
  return total;
}

template <class Term>
double pairwise(std::size_t lo, std::size_t hi, const Term& term) {
  if (hi - lo == 0) return 0.0;
  if (hi - lo == 1) return term(lo);
  const std::size_t mid = lo + (hi - lo) / 2;
  return pairwise(lo, mid, term) + pairwise(mid, hi, term);
}

}  // namespace detail

/// term(0) + ... + term(n - 1) in the given order.
template <class Term>
double sum(std::size_t n, const Term& term, SumOrder order) {
  switch (order) {
    case SumOrder::sequential: {
      double s = 0;
      for (std::size_t k = 0; k < n; ++k) s += term(k);
      return s;
    }
    case SumOrder::reversed: {
      double s = 0;
      for (std::size_t k = n; k-- > 0;) s += term(k);
      return s;
    }
    case SumOrder::pairwise:
      return detail::pairwise(0, n, term);
    case SumOrder::blocked: {
      // One term per thread (a grid of ceil(n / 256) blocks, as the backend launches below its
      // block cap), a partial per block; the last block's thread t adds partials t, t + 256, ...
      // and combines them as a block.
      using detail::kBlock;
      const std::size_t blocks = std::max<std::size_t>(1, (n + kBlock - 1) / kBlock);
      std::array<double, kBlock> last{};
      for (std::size_t b = 0; b < blocks; ++b) {
        std::array<double, kBlock> v{};
        for (std::size_t t = 0; t < kBlock && b * kBlock + t < n; ++t) v[t] = term(b * kBlock + t);
        last[b % kBlock] += detail::block_combine(v);
      }
      return detail::block_combine(last);
    }
    case SumOrder::host_chunks: {
      double s = 0;
      for (std::size_t lo = 0; lo < n; lo += kHostChunk) {
        double lane[4] = {0, 0, 0, 0};
        for (std::size_t k = lo; k < std::min(n, lo + kHostChunk); ++k)
          lane[(k - lo) % 4] += term(k);
        s += (lane[0] + lane[1]) + (lane[2] + lane[3]);
      }
      return s;
    }
  }
  return 0.0;
}

inline std::vector<double> mult(const Csr& A, const std::vector<double>& x,
                                SumOrder order = SumOrder::sequential) {
  std::vector<double> y(static_cast<std::size_t>(A.n));
  for (std::int64_t i = 0; i < A.n; ++i) {
    const auto first = A.row_ptr[i];
    y[static_cast<std::size_t>(i)] = sum(
        static_cast<std::size_t>(A.row_ptr[i + 1] - first),
        [&](std::size_t k) { return A.val[first + k] * x[A.col[first + k]]; }, order);
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

inline double dot(const std::vector<double>& a, const std::vector<double>& b,
                  SumOrder order = SumOrder::sequential) {
  return sum(
      a.size(), [&](std::size_t i) { return a[i] * b[i]; }, order);
}
inline double norm(const std::vector<double>& a, SumOrder order = SumOrder::sequential) {
  return std::sqrt(dot(a, a, order));
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
  // The orders of the sums, chosen independently (a device's SpMV and its reductions need not
  // share one); the host backend's rows are sequential and its dots and norms host_chunks.
  SumOrder row_order = SumOrder::sequential;  // of each row of A x
  SumOrder dot_order = SumOrder::sequential;  // of every dot product and norm
  // CG: one reduction an iteration (Chronopoulos-Gear, PETSc's KSPCGUseSingleReduction): s = A z
  // and delta = z's beside the norm and z'r, p'Ap from delta - beta^2 dpiold / betaold^2.
  bool single_reduction = false;
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
      dp = norm(Z, o.dot_order);
      break;
    case KspNormType::unpreconditioned:
      dp = norm(R, o.dot_order);
      break;
    case KspNormType::natural:
      dp = std::sqrt(std::abs(dot(Z, R, o.dot_order)));
      break;
    default:
      dp = 0;
  }
  res.history.push_back(dp);
  res.rnorm = dp;
  if ((res.reason = converged(0, dp)) != ConvergedReason::iterating) return res.x = X, res;
  beta = dot(Z, R, o.dot_order);
  std::vector<double> S;
  double delta = 0;
  if (o.single_reduction) {
    S = mult(A, Z, o.row_order);
    delta = dot(Z, S, o.dot_order);
  }
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
    if (!o.single_reduction) {
      W = mult(A, P, o.row_order);
      dpi = dot(P, W, o.dot_order);
    } else if (!i) {
      W = S;
      dpi = delta;
    } else {
      for (std::size_t k = 0; k < n; ++k) W[k] = S[k] + b * W[k];
      dpi = delta - beta * beta * dpiold / (betaold * betaold);
    }
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
      dp = norm(Z, o.dot_order);
    } else if (o.norm == KspNormType::unpreconditioned) {
      dp = norm(R, o.dot_order);
    } else if (o.norm == KspNormType::natural) {
      dp = std::sqrt(std::abs(dot(Z, R, o.dot_order)));
    } else {
      dp = 0;
    }
    res.rnorm = dp;
    res.history.push_back(dp);
    if ((res.reason = converged(i + 1, dp)) != ConvergedReason::iterating) break;
    beta = dot(Z, R, o.dot_order);
    if (o.single_reduction) {
      S = mult(A, Z, o.row_order);
      delta = dot(Z, S, o.dot_order);
    }
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
    if (!o.jacobi) return mult(A, v, o.row_order);
    return right ? mult(A, scale(v), o.row_order) : scale(mult(A, v, o.row_order));
  };
  Result res;
  Converged converged{o};
  std::vector<double> X(n, 0.0), R = (o.jacobi && !right) ? scale(Bv) : Bv;
  double dp = norm(R, o.dot_order);
  res.rnorm = o.norm != KspNormType::none ? dp : 0.0;
  if ((res.reason = converged(0, res.rnorm)) != ConvergedReason::iterating) return res.x = X, res;
  std::vector<double> RP = R, U = R, P = R, V = K(P), D(n, 0.0), Q(n), T(n);
  double etaold = 0, psiold = 0, tau = dp, dpold = dp;
  double rhoold = dot(R, RP, o.dot_order), rho = 0, s = 0, a = 0, b = 0, eta = 0, cf = 0;
  int i = 0;
  do {
    res.its++;
    s = dot(V, RP, o.dot_order);
    a = rhoold / s;
    for (std::size_t k = 0; k < n; ++k) Q[k] = -a * V[k] + U[k];
    for (std::size_t k = 0; k < n; ++k) T[k] = 1.0 * U[k] + Q[k];
    const auto AUQ = K(T);
    for (std::size_t k = 0; k < n; ++k) R[k] = R[k] + -a * AUQ[k];
    dp = norm(R, o.dot_order);
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
    rho = dot(R, RP, o.dot_order);
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
