#pragma once
// The Krylov solver tests' fixture: every mode of a solve against each other and against the
// PETSc transcription (la_reference.hpp), exactly on the host, within the envelope of summation
// orders on a device (ksp_test.cpp, ksp_cg_variant_test.cpp).

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend_param.hpp"
#include "la_reference.hpp"
#include "sluice/la.hpp"

namespace sluice::test {

using namespace sluice::la;  // NOLINT: the layer under test

class KspTest : public BackendTest {
 protected:
  static std::vector<double> ones(std::size_t n) { return std::vector<double>(n, 1.0); }

  /// b = A v.
  static Vec rhs(const Mat& A, const std::vector<double>& v, const Context& ctx) {
    Vec x(ctx, v), b(ctx, v.size());
    mult(A, x, b);
    return b;
  }

  static ref::Options ref_options(const KspOptions& o) {
    ref::Options r;
    r.jacobi = o.pc == PcType::jacobi;
    r.norm = o.norm_type;
    r.rtol = o.rtol;
    r.atol = o.atol;
    r.dtol = o.dtol;
    r.max_it = o.max_it;
    r.single_reduction = o.cg_variant == CgVariant::single_reduction;
    return r;
  }

  void check_real_matrices(std::initializer_list<const char*> names, int cap = 600);

  /// The iteration cap of a real matrix's solve checked against the transcription: `cap`, or at
  /// most 30 under the asan and tsan test presets (SLUICE_TEST_SANITIZER), where the full solves
  /// took minutes of CI for code paths their first iterations already run. The modes and the
  /// transcription must still agree iterate by iterate up to the cap; the full solves run in
  /// the other builds.
  static int real_matrix_cap(int cap) { return under_host_sanitizer() ? std::min(cap, 30) : cap; }

  static constexpr SolveMode kModes[] = {SolveMode::sync, SolveMode::async, SolveMode::graph};

  /// Whether graph mode runs here: not on cuda under compute-sanitizer's synccheck or racecheck,
  /// which fail a cooperative kernel inside a graph's while node even in a plain CUDA program
  /// (tests/graph/repro/cooperative_in_while.cu); memcheck runs it.
  [[nodiscard]] bool graph_runs() const {
    const char* tool = std::getenv("SLUICE_UNDER_SANITIZER");
    const std::string t = tool != nullptr ? tool : "";
    return is_host() || (t != "synccheck" && t != "racecheck");
  }
  /// How many of kModes run here (graph last).
  [[nodiscard]] int modes() const { return graph_runs() ? 3 : 2; }

  /// Solves with `o` in every mode and checks them against each other and the reference.
  void check_against_reference(const Mat& A, const std::vector<double>& hb, KspOptions o,
                               const std::string& label) {
    SCOPED_TRACE(label);
    auto ctx = make_context();
    Vec b(ctx, hb);
    const auto csr = ref::from_mat(A);
    // On the host the reference sums the dots and norms in the backend's own order.
    auto eo = ref_options(o);
    if (is_host()) eo.dot_order = ref::SumOrder::host_chunks;
    const auto expect = o.type == KspType::cg ? ref::cg(csr, hb, eo) : ref::tfqmr(csr, hb, eo);
    o.history = true;
    KspResult results[3];
    std::vector<double> xs[3];
    for (int m = 0; m < modes(); ++m) {
      o.mode = kModes[m];
      Vec x(ctx, hb.size());
      Ksp ksp(A, o);
      results[m] = ksp.solve(b, x);
      xs[m] = x.to_vector();
    }
    // The modes: the same kernels, the same scalars, so the same bits.
    for (int m = 1; m < modes(); ++m) {
      SCOPED_TRACE(to_string(kModes[m]));
      EXPECT_EQ(results[0].iterations, results[m].iterations);
      EXPECT_EQ(results[0].reason, results[m].reason);
      EXPECT_EQ(results[0].history, results[m].history);
      EXPECT_EQ(results[0].residual_norm, results[m].residual_norm);
      EXPECT_EQ(xs[0], xs[m]) << "sync and " << to_string(kModes[m]) << " iterates differ";
    }

    // PETSc's algorithm. On the host backend the sums run in the reference's order (rows first
    // to last, dots and norms in the backend's chunks), so the counts are exact.
    const auto& r = results[1];
    if (is_host()) {
      EXPECT_EQ(r.iterations, expect.its)
          << "sluice " << r.iterations << " iterations, PETSc " << expect.its;
      EXPECT_EQ(r.reason, expect.reason)
          << to_string(r.reason) << " vs " << to_string(expect.reason);
      ASSERT_EQ(r.history.size(), expect.history.size());
      for (std::size_t i = 0; i < r.history.size(); ++i) {
        ASSERT_NEAR(r.history[i], expect.history[i], 1e-12 * (1 + std::abs(expect.history[i])))
            << "history entry " << i;
      }
      for (std::size_t i = 0; i < xs[1].size(); ++i) {
        ASSERT_NEAR(xs[1][i], expect.x[i], 1e-9 * (1 + std::abs(expect.x[i]))) << i;
      }
      return;
    }
    // A device sums in other orders (cuSPARSE's rows, block-tree reductions), which may move
    // the iteration where an ill-conditioned solve crosses rtol. Its count must lie in the
    // envelope of the counts PETSc's algorithm gives under other equally valid orders: each
    // ref::SumOrder (sequential, reversed, pairwise, the backend's block tree) for the rows of
    // A x times each for the dots and norms, independently, as a device's SpMV need not sum in
    // its reductions' order. It must also stop the way one of them does (converged or not).
    auto ro = ref_options(o);
    int lo = expect.its, hi = expect.its;
    bool may_converge = false, may_fail = false;
    std::string counts;  // per row order, the counts for each dot order; * if not converged
    for (auto row : ref::kSumOrders) {
      counts += std::string(counts.empty() ? "" : "; ") + ref::to_string(row) + ":";
      for (auto dot : ref::kSumOrders) {
        ro.row_order = row;
        ro.dot_order = dot;
        const bool seq = row == ref::SumOrder::sequential && dot == ref::SumOrder::sequential;
        const auto e = seq                     ? expect
                       : o.type == KspType::cg ? ref::cg(csr, hb, ro)
                                               : ref::tfqmr(csr, hb, ro);
        lo = std::min(lo, e.its);
        hi = std::max(hi, e.its);
        const bool conv = e.reason > ConvergedReason::iterating;
        (conv ? may_converge : may_fail) = true;
        counts += " " + std::to_string(e.its) + (conv ? "" : "*");
      }
    }
    // Sixteen combinations sample the valid orders; they need not reach the extremes of that
    // set, so the envelope is widened by s: 2 iterations, or 2% of the largest count for long
    // solves.
    const int s = std::max(2, hi / 50);
    const auto what = [&] {
      return "sluice " + std::to_string(r.iterations) + " iterations " +
             std::string(to_string(r.reason)) + "; envelope [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "] +- " + std::to_string(s) +
             " of PETSc's counts by row order, each for dot order sequential reversed pairwise "
             "blocked (* not converged): " +
             counts;
    };
    EXPECT_GE(r.iterations, lo - s) << what();
    EXPECT_LE(r.iterations, hi + s) << what();
    EXPECT_TRUE(r.converged() ? may_converge : may_fail) << what();
  }
};

}  // namespace sluice::test
