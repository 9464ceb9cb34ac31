// Distributed Krylov solvers against la's on one context (every process solves the whole
// problem too), against PETSc's counts with the same number of ranks (recorded by
// scripts/petsc-counts in petsc_counts.json), and sync, async and graph modes against each other.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "dist_test_util.hpp"
#include "la_reference.hpp"
#include "sluice/dist.hpp"
#include "sluice/error.hpp"

namespace sluice::dist {
namespace {

using test::host_comm;
using test::solve_local_counts;

struct Solved {
  la::KspResult result;
  std::vector<double> x;  // this process's rows
};

std::vector<double> local_part(const Vec& v) {
  std::vector<double> out;
  for (int l = 0; l < v.local_count(); ++l) {
    const auto b = v.local(l).to_vector();
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

/// b = A 1, x = 0: the distributed solve.
Solved solve_dist(const Mat& A, const la::KspOptions& o) {
  Vec one = A.create_vec(), b = A.create_vec(), x = A.create_vec();
  set(one, 1.0);
  mult(A, one, b);
  Ksp ksp(A, o);
  Solved s;
  s.result = ksp.solve(b, x);
  s.x = local_part(x);
  return s;
}

/// The same on one context: this process's rows of x.
Solved solve_whole(const la::Mat& A, const la::KspOptions& o, const Comm& c, const Layout& layout) {
  const Context& ctx = A.context();
  la::Vec one(ctx, static_cast<std::size_t>(A.rows())), b = one.duplicate(), x = one.duplicate();
  la::set(one, 1.0);
  la::mult(A, one, b);
  la::Ksp ksp(A, o);
  Solved s;
  s.result = ksp.solve(b, x);
  const auto all = x.to_vector();
  s.x.assign(all.begin() + layout.start(c.rank(0)),
             all.begin() + layout.end(c.rank(c.local_size() - 1)));
  return s;
}

std::string describe(const la::KspOptions& o) {
  return std::string(la::to_string(o.type)) + " " + std::string(la::to_string(o.pc)) + " " +
         std::string(la::to_string(o.norm_type)) + " " + std::string(la::to_string(o.mode));
}

TEST(DistKsp, StencilSolvesMatchOneContext) {
  Context ctx(Device{"host", 0});
  for (int L : solve_local_counts()) {
    Comm c = host_comm(L);
    const std::int64_t planes = 3 * c.size() + 2;
    for (auto kind : {la::Stencil::d3p7, la::Stencil::d2p9}) {
      const bool three = la::stencil_is_3d(kind);
      const std::int64_t nx = 7, ny = three ? 6 : planes, nz = three ? planes : 1;
      const Mat A = Mat::stencil(c, kind, nx, ny, nz);
      const la::Mat whole = la::Mat::stencil(ctx, kind, nx, ny, nz);
      for (la::KspOptions o : {la::KspOptions{.type = la::KspType::cg, .rtol = 1e-10},
                               la::KspOptions{.type = la::KspType::tfqmr, .rtol = 1e-10},
                               la::KspOptions{.type = la::KspType::tfqmr,
                               .norm_type = la::KspNormType::unpreconditioned,
                               .rtol = 1e-10}}) {
        for (auto mode : {la::SolveMode::sync, la::SolveMode::async, la::SolveMode::graph}) {
          o.mode = mode;
          SCOPED_TRACE(std::string(la::to_string(kind)) + " " + describe(o) +
                       " L=" + std::to_string(L));
          const Solved d = solve_dist(A, o);
          const Solved w = solve_whole(whole, o, c, A.layout());
          EXPECT_TRUE(d.result.converged());
          EXPECT_EQ(d.result.reason, w.result.reason);
          EXPECT_LE(std::abs(d.result.iterations - w.result.iterations), 1);
          ASSERT_EQ(d.x.size(), w.x.size());
          if (c.size() == 1) {  // one rank: la's arithmetic exactly
            EXPECT_EQ(d.result.iterations, w.result.iterations);
            EXPECT_EQ(d.result.residual_norm, w.result.residual_norm);
            EXPECT_EQ(d.x, w.x);
          } else {
            for (std::size_t i = 0; i < d.x.size(); ++i) ASSERT_NEAR(d.x[i], 1.0, 1e-7) << i;
          }
        }
      }
    }
  }
}

TEST(DistKsp, AsyncAndGraphIterateExactlyAsSync) {
  for (int L : solve_local_counts()) {
    Comm c = host_comm(L);
    for (bool assembled : {false, true}) {
      const Mat A = assembled ? Mat::stencil_csr(c, la::Stencil::d3p27, 7, 6, 3 * c.size() + 1)
                              : Mat::stencil(c, la::Stencil::d3p27, 7, 6, 3 * c.size() + 1);
      for (auto type : {la::KspType::cg, la::KspType::tfqmr}) {
        la::KspOptions o{.type = type, .rtol = 1e-9, .check_every = 5, .history = true};
        o.mode = la::SolveMode::sync;
        const Solved s = solve_dist(A, o);
        for (auto mode : {la::SolveMode::async, la::SolveMode::graph}) {
          o.mode = mode;
          SCOPED_TRACE(describe(o) + (assembled ? " csr" : " stencil") + " L=" + std::to_string(L));
          const Solved a = solve_dist(A, o);
          EXPECT_EQ(a.result.iterations, s.result.iterations);
          EXPECT_EQ(a.result.residual_norm, s.result.residual_norm);
          EXPECT_EQ(a.result.history, s.result.history);
          EXPECT_EQ(a.x, s.x);
        }
      }
    }
  }
}

TEST(DistKsp, NonzeroGuessFixedIterationsAndAGraphRelaunched) {
  Comm c = host_comm(2);
  const Mat A = Mat::stencil(c, la::Stencil::d2p5, 12, 3 * c.size() + 3);
  Vec one = A.create_vec(), b = A.create_vec(), x = A.create_vec();
  set(one, 1.0);
  mult(A, one, b);
  set(x, 0.5);
  Ksp ksp(A, {.rtol = 1e-9, .initial_guess_nonzero = true, .mode = la::SolveMode::graph});
  const auto r = ksp.solve(b, x);
  EXPECT_TRUE(r.converged());
  for (double v : x.to_vector()) EXPECT_NEAR(v, 1.0, 1e-6);
  // Relaunched with other vectors: the graph is updated, the answer the same.
  Vec x2 = A.create_vec();
  set(x2, 0.5);
  const auto r2 = ksp.solve(b, x2);
  EXPECT_EQ(r2.iterations, r.iterations);
  EXPECT_EQ(x2.to_vector(), x.to_vector());
  ksp.set_options({.max_it = 7, .fixed_iterations = true, .mode = la::SolveMode::async});
  const auto f = ksp.solve(b, x);
  EXPECT_EQ(f.iterations, 7);
  EXPECT_EQ(f.reason, la::ConvergedReason::converged_its);
}

// ---- real matrices ------------------------------------------------------------------------------

struct PetscCounts {
  // (matrix, ksp, pc, norm) -> counts by ranks (1, 2, 3)
  std::map<std::string, std::map<int, int>> counts;
  static std::string key(const std::string& m, const la::KspOptions& o) {
    std::string norm =
        o.norm_type == la::KspNormType::preconditioned ? "PRECONDITIONED" : "UNPRECONDITIONED";
    return m + ".mtx " + std::string(la::to_string(o.type)) + " " +
           std::string(la::to_string(o.pc)) + " " + norm;
  }
};

PetscCounts load_petsc_counts() {
  PetscCounts p;
  std::ifstream in(SLUICE_DIST_TEST_DIR "/petsc_counts.json");
  if (!in) return p;
  const auto j = nlohmann::json::parse(in);
  for (const auto& s : j["solves"]) {
    std::string norm = s["norm"];
    const std::string k = s["matrix"].get<std::string>() + " " + s["ksp"].get<std::string>() + " " +
                          s["pc"].get<std::string>() + " " + norm;
    p.counts[k][s["ranks"].get<int>()] = s["iterations"].get<int>();
  }
  return p;
}

/// The counts a solve may take where summation order alone decides: PETSc's algorithm
/// (tests/la/la_reference.hpp) with its row sums and its dot products each in four orders
/// (sequential, reversed, pairwise, blocked), PETSc's own with 1, 2 and 3 ranks
/// (petsc_counts.json), and la's on one context.
struct Envelope {
  int lo = 0, hi = 0;
  bool may_converge = false;
};

Envelope envelope(const la::Mat& whole, const la::KspOptions& o, const std::map<int, int>& petsc,
                  int one_context) {
  const auto csr = sluice::test::ref::from_mat(whole);
  const auto b = sluice::test::ref::mult(
      csr, std::vector<double>(static_cast<std::size_t>(whole.rows()), 1.0));
  sluice::test::ref::Options ro;
  ro.jacobi = o.pc == la::PcType::jacobi;
  ro.norm = o.norm_type;
  ro.rtol = o.rtol;
  ro.max_it = o.max_it;
  Envelope e{one_context, one_context, false};
  for (auto row : sluice::test::ref::kSumOrders) {
    for (auto dot : sluice::test::ref::kSumOrders) {
      ro.row_order = row;
      ro.dot_order = dot;
      const auto r = o.type == la::KspType::cg ? sluice::test::ref::cg(csr, b, ro)
                                               : sluice::test::ref::tfqmr(csr, b, ro);
      e.lo = std::min(e.lo, r.its);
      e.hi = std::max(e.hi, r.its);
      e.may_converge = e.may_converge || r.reason > la::ConvergedReason::iterating;
    }
  }
  for (const auto& [ranks, n] : petsc) {
    e.lo = std::min(e.lo, n);
    e.hi = std::max(e.hi, n);
  }
  return e;
}

/// Iteration counts on 1 to 6 ranks within one of PETSc's with as many ranks (where recorded)
/// and of la's on one context; where summation order moves them further (an ill-conditioned
/// solve crossing rtol), within one of the Envelope of counts it gives.
void check_real(const std::vector<std::string>& names, int cap) {
  const std::filesystem::path dir = SLUICE_MATRIX_DIR;
  if (!std::filesystem::exists(dir / "nos4.mtx")) GTEST_SKIP() << "no test matrices at " << dir;
  const PetscCounts petsc = load_petsc_counts();
  ASSERT_FALSE(petsc.counts.empty()) << "tests/dist/petsc_counts.json is missing";
  Context ctx(Device{"host", 0});
  std::vector<Comm> comms;
  for (int L : solve_local_counts()) {
    if (L <= 2) comms.push_back(host_comm(L));
  }
  int checked = 0, within_one = 0;
  for (const auto& name : names) {
    const std::string path = (dir / (name + ".mtx")).string();
    const la::Mat whole = la::Mat::read_matrix_market(ctx, path);
    std::vector<Mat> mats;
    for (const Comm& c : comms) mats.push_back(Mat::read_matrix_market(c, path));
    for (la::KspOptions o :
         {la::KspOptions{.rtol = 1e-8, .max_it = cap},
          la::KspOptions{.pc = la::PcType::none,
          .norm_type = la::KspNormType::unpreconditioned,
          .rtol = 1e-8,
          .max_it = cap},
          la::KspOptions{.type = la::KspType::tfqmr, .rtol = 1e-8, .max_it = cap},
          la::KspOptions{.type = la::KspType::tfqmr,
          .norm_type = la::KspNormType::unpreconditioned,
          .rtol = 1e-8,
          .max_it = cap}}) {
      const auto& by_ranks = petsc.counts.at(PetscCounts::key(name, o));
      const Solved w =
          solve_whole(whole, o, comms[0], Layout::split(comms[0].size(), whole.rows()));
      std::optional<Envelope> e;  // computed only where needed: 16 reference solves
      for (const Mat& A : mats) {
        const int ranks = A.comm().size();
        const Solved d = solve_dist(A, o);
        const int its = d.result.iterations;
        const auto p = by_ranks.find(ranks);
        std::string what = name + " " + describe(o) + " on " + std::to_string(ranks) +
                           " ranks: " + std::to_string(its) + " iterations; one context " +
                           std::to_string(w.result.iterations);
        if (p != by_ranks.end()) what += ", PETSc with as many ranks " + std::to_string(p->second);
        ++checked;
        if (std::abs(its - w.result.iterations) <= 1 &&
            (p == by_ranks.end() || std::abs(its - p->second) <= 1) &&
            d.result.reason == w.result.reason) {
          ++within_one;
          continue;
        }
        if (!e) e = envelope(whole, o, by_ranks, w.result.iterations);
        what += "; summation orders and PETSc [" + std::to_string(e->lo) + ", " +
                std::to_string(e->hi) + "]";
        EXPECT_GE(its, e->lo - 1) << what;
        EXPECT_LE(its, e->hi + 1) << what;
        if (!e->may_converge) {
          EXPECT_FALSE(d.result.converged()) << what;
        }
      }
    }
  }
  ::testing::Test::RecordProperty("solves", checked);
  ::testing::Test::RecordProperty("within_one", within_one);
}

TEST(DistKsp, RealMatricesSmall) {
  check_real({"bcsstk01", "nos4", "bcsstk03", "mesh2e1"}, 600);
}
TEST(DistKsp, RealMatricesMedium) {
  check_real({"gr_30_30", "nos3", "plat362", "1138_bus"}, 600);
}
TEST(DistKsp, RealMatricesBcsstk15) {
  check_real({"bcsstk15"}, 250);
}

// ---- misuse -------------------------------------------------------------------------------------

TEST(DistKsp, ProcessesThatDisagreeFailAllAlike) {
  if (Environment::process_count() < 2) GTEST_SKIP() << "needs mpirun with 2 processes or more";
  Comm c = host_comm(1);
  const Mat A = Mat::stencil(c, la::Stencil::d2p5, 8, 2 * c.size());
  Vec b = A.create_vec(), x = A.create_vec();
  set(b, 1.0);
  // Process 1 asks for other options: every process refuses the solve, nobody hangs.
  Ksp ksp(A, {.max_it = 50 + (Environment::process_rank() == 1 ? 1 : 0)});
  try {
    (void)ksp.solve(b, x);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_it"), std::string::npos) << e.what();
  }
  // And a vector whose size differs on one process.
  EXPECT_THROW(Vec(c, 100 + Environment::process_rank()), Error);
}

}  // namespace
}  // namespace sluice::dist

namespace sluice::dist {
namespace {

/// SLUICE_DIST_STEPWISE=1 makes a one-rank solve take the loop across ranks (a diagnostic for
/// the scaling benchmark): la's own solve's iterations (within one: the sums add up by pass) and
/// solution, in every mode.
TEST(DistKsp, OneRankStepwiseMatchesLasOwnSolve) {
  if (Environment::process_count() > 1) GTEST_SKIP() << "one rank: runs alone";
  Comm c = host_comm(1);
  const Mat A = Mat::stencil(c, la::Stencil::d3p7, 9, 8, 7);
  const la::Mat whole = la::Mat::stencil(Context(Device{"host", 0}), la::Stencil::d3p7, 9, 8, 7);
  for (auto mode : {la::SolveMode::sync, la::SolveMode::async, la::SolveMode::graph}) {
    const la::KspOptions o{.type = la::KspType::cg, .rtol = 1e-10, .mode = mode, .history = true};
    SCOPED_TRACE(describe(o));
    const Solved want = solve_whole(whole, o, c, A.layout());
    ::setenv("SLUICE_DIST_STEPWISE", "1", 1);
    const Solved got = solve_dist(A, o);
    ::unsetenv("SLUICE_DIST_STEPWISE");
    EXPECT_TRUE(got.result.converged());
    EXPECT_LE(std::abs(got.result.iterations - want.result.iterations), 1);
    for (std::size_t i = 0; i < got.x.size(); ++i) ASSERT_NEAR(got.x[i], want.x[i], 1e-9);
  }
}

}  // namespace
}  // namespace sluice::dist
