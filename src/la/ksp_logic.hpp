#pragma once
// The scalar logic of the Krylov solvers, written once. In async mode it runs on the device, in
// the last block of the reduction whose sums it consumes (so a solve's decisions never need the
// host); in sync mode the host runs the same functions on a host copy of the state after reading
// the sums. The same arithmetic in the same order on both sides gives the same iterates and the
// same iteration counts.
//
// The algorithms are PETSc's KSPSolve_CG and KSPSolve_TFQMR with KSPConvergedDefault (or
// KSPConvergedSkip for a fixed number of iterations), step by step; each function names the part
// of the PETSc loop it is.

#include <cstdint>

#include "la/kernel_math.hpp"
#include "sluice/ext/la_kernels.hpp"

namespace sluice::detail {

/// One solve's scalars and progress. Trivially copyable: it travels between host and device.
struct LaKspState {
  // settings
  double rtol = 0, atol = 0, dtol = 0;
  std::int32_t max_it = 0;
  std::int32_t norm_type = 0;      // 0 none, 1 preconditioned, 2 unpreconditioned, 3 natural
  std::int32_t skip_test = 0;      // fixed iterations: KSPConvergedSkip
  std::int32_t nonzero_guess = 0;  // rnorm0 is the norm of b (KSPConvergedDefault)
  std::int32_t hist_cap = 0;
  std::int32_t pad0 = 0;
  double* hist = nullptr;  // residual history (device memory in async mode)
  // progress
  std::int32_t its = 0;     // PETSc's ksp->its
  std::int32_t i = 0;       // the loop index
  std::int32_t stop = 0;    // 0 iterating; 1 stopped, this iteration's tail pending; 2 stopped
  std::int32_t reason = 0;  // KspReason
  std::int32_t nhist = 0;   // history entries written (may exceed hist_cap; those are dropped)
  std::int32_t xsteps = 2;  // TFQMR: quasi-minimal steps to apply to x this iteration
  double rnorm = 0, rnorm0 = 0, ttol = 0, snorm = 0;
  // CG
  double beta = 0, betaold = 0, dpi = 0, dpiold = 0, a = 0, b = 0;
  // CG with one reduction: z's, the factor that makes it from s'r where z = c r is not stored,
  // and (on one context) the update's sums until the product's arrives
  double delta = 0, zc = 1, stash0 = 0, stash1 = 0;
  // TFQMR
  double s = 0, rho = 0, rhoold = 0, tau = 0, dp = 0, dpold = 0;
  double eta0 = 0, cf0 = 0, eta1 = 0, cf1 = 0, etaold = 0, psiold = 0;
};

namespace ksp_logic {

// PETSc's KSPConvergedReason values.
inline constexpr std::int32_t kIterating = 0;
inline constexpr std::int32_t kConvergedRtol = 2;
inline constexpr std::int32_t kConvergedAtol = 3;
inline constexpr std::int32_t kConvergedIts = 4;
inline constexpr std::int32_t kDivergedIts = -3;
inline constexpr std::int32_t kDivergedDtol = -4;
inline constexpr std::int32_t kDivergedBreakdown = -5;
inline constexpr std::int32_t kDivergedIndefinitePc = -8;
inline constexpr std::int32_t kDivergedNanOrInf = -9;
inline constexpr std::int32_t kDivergedIndefiniteMat = -10;

inline constexpr std::int32_t kNormNone = 0;
inline constexpr std::int32_t kNormPreconditioned = 1;
inline constexpr std::int32_t kNormUnpreconditioned = 2;
inline constexpr std::int32_t kNormNatural = 3;

SLUICE_HD bool finite(double x) {
  return x - x == 0.0;
}  // false for NaN and +-inf
SLUICE_HD double sqrt(double x) {
  return ::sqrt(x);
}
SLUICE_HD double max(double a, double b) {
  return a < b ? b : a;
}

SLUICE_HD void stop(LaKspState& st, std::int32_t reason) {
  st.reason = reason;
  st.stop = 2;
}

/// KSPLogResidualHistory.
SLUICE_HD void log(LaKspState& st, double rnorm) {
  if (st.nhist < st.hist_cap) st.hist[st.nhist] = rnorm;
  ++st.nhist;
}

/// KSPConvergedDefault (or KSPConvergedSkip) at iteration n.
SLUICE_HD std::int32_t converged(LaKspState& st, std::int32_t n, double rnorm) {
  if (st.skip_test != 0) return n >= st.max_it ? kConvergedIts : kIterating;
  if (n == 0) {
    if (st.nonzero_guess != 0) {
      st.rnorm0 = st.snorm != 0.0 ? st.snorm : rnorm;  // zero rhs with a nonzero guess
    } else {
      st.rnorm0 = rnorm;
    }
    st.ttol = max(st.rtol * st.rnorm0, st.atol);
  }
  if (!finite(rnorm)) return kDivergedNanOrInf;
  if (rnorm <= st.ttol) return rnorm < st.atol ? kConvergedAtol : kConvergedRtol;
  if (rnorm >= st.dtol * st.rnorm0) return kDivergedDtol;
  return kIterating;
}

/// The norm of b that KSPConvergedDefault uses as rnorm0 with a nonzero initial guess:
/// ||b|| (unpreconditioned or right preconditioning), ||B b|| (preconditioned), sqrt|b'Bb|
/// (natural). `right` says the preconditioner is applied on the right.
SLUICE_HD void rhs_norm(LaKspState& st, const double* sums, bool right) {
  if (st.norm_type == kNormUnpreconditioned || right) {
    st.snorm = sqrt(sums[2]);
  } else if (st.norm_type == kNormNatural) {
    st.snorm = sqrt(la_math::abs(sums[1]));
  } else {
    st.snorm = sqrt(sums[0]);
  }
}

// ---- CG (KSPSolve_CG) ----------------------------------------------------------------------

/// The top of the loop for iteration st.i: its = i + 1, the tests on beta, b = beta / betaold.
SLUICE_HD void cg_loop_top(LaKspState& st) {
  st.its = st.i + 1;
  if (st.beta == 0.0) return stop(st, kConvergedAtol);
  if (st.i > 0 && st.beta * st.betaold < 0.0) return stop(st, kDivergedIndefinitePc);
  st.b = st.i == 0 ? 0.0 : st.beta / st.betaold;
}

/// The norm of the residual from a cg_init / cg_update pass; false (and stopped) if not finite.
SLUICE_HD bool cg_norm(LaKspState& st, const double* sums, double& dp) {
  if (st.norm_type == kNormNatural) {
    if (!finite(sums[1])) {  // KSPCheckDot(beta)
      stop(st, kDivergedNanOrInf);
      return false;
    }
    dp = sqrt(la_math::abs(sums[1]));
    return true;
  }
  dp = st.norm_type == kNormNone ? 0.0 : sqrt(sums[0]);
  if (!finite(dp)) {  // KSPCheckNorm
    stop(st, kDivergedNanOrInf);
    return false;
  }
  return true;
}

/// Before the loop: sums = [rnorm^2, z'r] of z = B r.
SLUICE_HD void cg_init(LaKspState& st, const double* sums) {
  st.its = 0;
  double dp = 0;
  if (!cg_norm(st, sums, dp)) return;
  log(st, dp);
  st.rnorm = dp;
  if (const auto reason = converged(st, 0, dp); reason != kIterating) return stop(st, reason);
  st.beta = sums[1];
  if (!finite(st.beta)) return stop(st, kDivergedNanOrInf);
  st.i = 0;
  cg_loop_top(st);
}

/// With st.dpi = p'Ap: the indefinite-matrix test and alpha.
SLUICE_HD void cg_alpha(LaKspState& st) {
  if (!finite(st.dpi)) return stop(st, kDivergedNanOrInf);
  st.betaold = st.beta;
  const double sign = (st.dpi > 0 ? 1.0 : -1.0) * (st.dpiold > 0   ? 1.0
                                                   : st.dpiold < 0 ? -1.0
                                                                   : 0.0);
  if (st.dpi == 0.0 || (st.i > 0 && sign < 0.0)) return stop(st, kDivergedIndefiniteMat);
  st.a = st.beta / st.dpi;
}

/// After w = A p: sums = [p'w].
SLUICE_HD void cg_dpi(LaKspState& st, const double* sums) {
  st.dpiold = st.dpi;
  st.dpi = sums[0];
  cg_alpha(st);
}

/// After x += a p, r -= a w, z = B r: sums = [rnorm^2, z'r].
SLUICE_HD void cg_iter(LaKspState& st, const double* sums) {
  double dp = 0;
  if (!cg_norm(st, sums, dp)) return;
  st.rnorm = dp;
  log(st, dp);
  if (const auto reason = converged(st, st.i + 1, dp); reason != kIterating) {
    return stop(st, reason);
  }
  st.beta = sums[1];
  if (!finite(st.beta)) return stop(st, kDivergedNanOrInf);
  ++st.i;
  if (st.i >= st.max_it) return stop(st, kDivergedIts);
  cg_loop_top(st);
}

// ---- CG with one reduction (Chronopoulos-Gear; PETSc's KSPCGUseSingleReduction) -----------

/// The loop top's p'Ap without a product of its own: with s = A z and delta = z's,
/// p'Ap = delta + 2 b z'A p_old + b^2 p_old'A p_old, and z'A p_old = -beta dpiold / betaold
/// (r_new = r_old - a A p_old, z_new'r_old = 0), so p'Ap = delta - beta^2 dpiold / betaold^2
/// (PETSc's expression); then alpha. The recurrence differs from p'Ap by rounding only.
SLUICE_HD void cg1_dpi(LaKspState& st, const double* sums) {
  if (st.stop != 0) return;
  st.delta = st.zc * sums[2];
  st.dpiold = st.dpi;
  st.dpi =
      st.i == 0 ? st.delta : st.delta - st.beta * st.beta * st.dpiold / (st.betaold * st.betaold);
  cg_alpha(st);
}

/// Before the loop: sums = [norm^2, z'r, z's] of z = B r and s = A z.
SLUICE_HD void cg1_init(LaKspState& st, const double* sums) {
  cg_init(st, sums);
  cg1_dpi(st, sums);
}

/// After the update and s = A z: sums = [norm^2, z'r, z's].
SLUICE_HD void cg1_iter(LaKspState& st, const double* sums) {
  cg_iter(st, sums);
  cg1_dpi(st, sums);
}

/// One context: the update's [norm^2, z'r] wait in the state for the product's [z's].
SLUICE_HD void cg1_stash(LaKspState& st, const double* sums) {
  st.stash0 = sums[0];
  st.stash1 = sums[1];
}

SLUICE_HD void cg1_unstash(const LaKspState& st, const double* sums, double* all) {
  all[0] = st.stash0;
  all[1] = st.stash1;
  all[2] = sums[0];
}

// ---- TFQMR (KSPSolve_TFQMR) ----------------------------------------------------------------

/// Before the loop: sums = [r'r, r'rp] with rp = r.
SLUICE_HD void tf_init(LaKspState& st, const double* sums) {
  const double dp = sqrt(sums[0]);
  if (!finite(dp)) return stop(st, kDivergedNanOrInf);
  st.rnorm = st.norm_type != kNormNone ? dp : 0.0;
  st.its = 0;
  // PETSc's TFQMR monitors this norm but leaves it out of the history; sluice keeps it as entry
  // 0 for the monitor and drops it from the history it reports (see la/ksp_run.cpp, finish).
  log(st, st.rnorm);
  if (const auto reason = converged(st, 0, st.rnorm); reason != kIterating) {
    return stop(st, reason);
  }
  st.etaold = 0;
  st.psiold = 0;
  st.tau = dp;
  st.dpold = dp;
  st.dp = dp;
  st.rhoold = sums[1];
  st.i = 0;
}

/// The top of the loop, after v = K p: sums = [v'rp].
SLUICE_HD void tf_s(LaKspState& st, const double* sums) {
  ++st.its;
  st.s = sums[0];
  if (!finite(st.s)) return stop(st, kDivergedNanOrInf);
  // PETSc divides by s = 0 and reports DIVERGED_NANORINF once the infinities reach the norm,
  // in this same iteration and before x changes; the breakdown is named for what it is.
  if (st.s == 0.0) return stop(st, kDivergedBreakdown);
  st.a = st.rhoold / st.s;
}

/// After r -= a K (u + q): sums = [r'r]. The two quasi-minimal steps (m = 0, 1): their scalars
/// and convergence tests; x changes in the tf_dx pass that follows.
SLUICE_HD void tf_m(LaKspState& st, const double* sums) {
  const double dp = sqrt(sums[0]);
  if (!finite(dp)) return stop(st, kDivergedNanOrInf);
  st.dp = dp;
  for (int m = 0; m < 2; ++m) {
    const double w = m == 0 ? sqrt(dp * st.dpold) : dp;
    const double psi = w / st.tau;
    const double cm = 1.0 / sqrt(1.0 + psi * psi);
    st.tau = st.tau * psi * cm;
    const double eta = cm * cm * st.a;
    const double cf = st.psiold * st.psiold * st.etaold / st.a;
    if (m == 0) {
      st.eta0 = eta;
      st.cf0 = cf;
    } else {
      st.eta1 = eta;
      st.cf1 = cf;
    }
    const double dpest = sqrt(2.0 * st.i + m + 2.0) * st.tau;
    st.rnorm = st.norm_type != kNormNone ? dpest : 0.0;
    log(st, st.rnorm);
    if (const auto reason = converged(st, st.i + 1, st.rnorm); reason != kIterating) {
      st.reason = reason;
      st.xsteps = m + 1;
      st.stop = 1;  // x still takes this iteration's steps up to m
      return;
    }
    st.etaold = eta;
    st.psiold = psi;
  }
  st.xsteps = 2;
}

/// The end of the loop, after the x steps: sums = [r'rp].
SLUICE_HD void tf_rho(LaKspState& st, const double* sums) {
  if (st.stop == 1) {
    st.stop = 2;
    return;
  }
  st.rho = sums[0];
  st.b = st.rho / st.rhoold;
  st.rhoold = st.rho;
  st.dpold = st.dp;
  ++st.i;
  if (st.i >= st.max_it) stop(st, kDivergedIts);
}

/// Applies `f` to the state with the sums of a kernel (both backends call this from the last
/// block of a guarded reduction; the host solver calls the step functions directly).
SLUICE_HD void finalize(LaFinalize f, LaKspState& st, const double* sums) {
  switch (f) {
    case LaFinalize::none:
      break;
    case LaFinalize::rhs_norm:
      rhs_norm(st, sums, false);
      break;
    case LaFinalize::cg_init:
      cg_init(st, sums);
      break;
    case LaFinalize::cg_dpi:
      cg_dpi(st, sums);
      break;
    case LaFinalize::cg_iter:
      cg_iter(st, sums);
      break;
    case LaFinalize::tf_init:
      tf_init(st, sums);
      break;
    case LaFinalize::tf_s:
      tf_s(st, sums);
      break;
    case LaFinalize::tf_m:
      tf_m(st, sums);
      break;
    case LaFinalize::tf_rho:
      tf_rho(st, sums);
      break;
    case LaFinalize::cg1_init:
      cg1_init(st, sums);
      break;
    case LaFinalize::cg1_iter:
      cg1_iter(st, sums);
      break;
    case LaFinalize::cg1_stash:
      cg1_stash(st, sums);
      break;
    case LaFinalize::cg1_init_stashed:
    case LaFinalize::cg1_iter_stashed: {
      double all[la_math::kMaxSums];
      cg1_unstash(st, sums, all);
      if (f == LaFinalize::cg1_init_stashed) {
        cg1_init(st, all);
      } else {
        cg1_iter(st, all);
      }
      break;
    }
  }
}

/// Whether a guarded kernel runs at all: everything stops once the solve stopped, except the
/// x steps (tf_dx) of the iteration that stopped at its quasi-minimal test.
SLUICE_HD bool guard_runs(const LaKspState* st, bool is_tf_dx) {
  if (st == nullptr) return true;
  return st->stop == 0 || (is_tf_dx && st->stop == 1);
}

/// tf_dx's step count under a state (2, or fewer in the iteration that stopped).
SLUICE_HD int tf_steps(const LaKspState* st, int fallback) {
  if (st == nullptr) return fallback;
  return st->stop == 1 ? st->xsteps : 2;
}

}  // namespace ksp_logic
}  // namespace sluice::detail
