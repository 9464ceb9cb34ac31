// Single-reduction CG across ranks (la::CgVariant::single_reduction): one gather of partial
// sums an iteration instead of classic's two, the same answers as la's variant on one context,
// async and graph iterating exactly as sync, and counts within a couple of classic's on the real
// matrices.

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "dist_test_util.hpp"
#include "sluice/dist.hpp"
#include "sluice/error.hpp"
#include "sluice/observe.hpp"

namespace sluice::dist {
namespace {

using test::host_comm;
using test::solve_local_counts;

constexpr la::CgVariant kSingle = la::CgVariant::single_reduction;

struct Solved {
  la::KspResult result;
  std::vector<double> x;  // this process's rows
};

/// b = A 1, x = 0, solved across ranks.
Solved solve_dist(const Mat& A, const la::KspOptions& o) {
  Vec one = A.create_vec(), b = A.create_vec(), x = A.create_vec();
  set(one, 1.0);
  mult(A, one, b);
  Ksp ksp(A, o);
  Solved s;
  s.result = ksp.solve(b, x);
  for (int l = 0; l < x.local_count(); ++l) {
    const auto v = x.local(l).to_vector();
    s.x.insert(s.x.end(), v.begin(), v.end());
  }
  return s;
}

/// The same on one context: this process's rows of x.
Solved solve_whole(const la::Mat& A, const la::KspOptions& o, const Comm& c, const Layout& layout) {
  const Context& ctx = A.context();
  la::Vec one(ctx, static_cast<std::size_t>(A.rows())), b = one.duplicate(), x = one.duplicate();
  la::set(one, 1.0);
  la::mult(A, one, b);
  Solved s;
  s.result = la::Ksp(A, o).solve(b, x);
  const auto all = x.to_vector();
  s.x.assign(all.begin() + layout.start(c.rank(0)),
             all.begin() + layout.end(c.rank(c.local_size() - 1)));
  return s;
}

std::string describe(const la::KspOptions& o) {
  return std::string(la::to_string(o.cg_variant)) + " " + std::string(la::to_string(o.pc)) + " " +
         std::string(la::to_string(o.norm_type)) + " " + std::string(la::to_string(o.mode));
}

TEST(DistCgVariant, MatchesOneContextAndModesIterateAlike) {
  Context ctx(Device{"host", 0});
  for (int L : solve_local_counts()) {
    Comm c = host_comm(L);
    // 3 planes a rank or more: the product's interior pass overlaps the exchange (3 parts).
    const std::int64_t planes = 3 * c.size() + 1;
    struct Case {
      la::Stencil kind;
      bool assembled;
    };
    for (const auto& k : {Case{la::Stencil::d3p7, false}, Case{la::Stencil::d2p9, false},
                          Case{la::Stencil::d3p27, true}}) {
      const bool three = la::stencil_is_3d(k.kind);
      const std::int64_t nx = 7, ny = three ? 6 : planes, nz = three ? planes : 1;
      const Mat A = k.assembled ? Mat::stencil_csr(c, k.kind, nx, ny, nz)
                                : Mat::stencil(c, k.kind, nx, ny, nz);
      const la::Mat whole = k.assembled ? la::Mat::stencil_csr(ctx, k.kind, nx, ny, nz)
                                        : la::Mat::stencil(ctx, k.kind, nx, ny, nz);
      for (auto nt : {la::KspNormType::preconditioned, la::KspNormType::unpreconditioned}) {
        la::KspOptions o{.cg_variant = kSingle,
                         .norm_type = nt,
                         .rtol = 1e-10,
                         .check_every = 5,
                         .history = true};
        o.mode = la::SolveMode::sync;
        const Solved s = solve_dist(A, o);
        const Solved w = solve_whole(whole, o, c, A.layout());
        SCOPED_TRACE(std::string(la::to_string(k.kind)) + (k.assembled ? " csr " : " ") +
                     describe(o) + " L=" + std::to_string(L));
        EXPECT_TRUE(s.result.converged()) << la::to_string(s.result.reason);
        EXPECT_LE(std::abs(s.result.iterations - w.result.iterations), 1);
        ASSERT_EQ(s.x.size(), w.x.size());
        for (std::size_t i = 0; i < s.x.size(); ++i) {
          ASSERT_NEAR(s.x[i], 1.0, 1e-7) << i;
        }
        if (c.size() == 1) {
          EXPECT_EQ(s.x, w.x);  // one rank: la's own solve
        }
        for (auto mode : {la::SolveMode::async, la::SolveMode::graph}) {
          o.mode = mode;
          SCOPED_TRACE(la::to_string(mode));
          const Solved a = solve_dist(A, o);
          EXPECT_EQ(a.result.iterations, s.result.iterations);
          EXPECT_EQ(a.result.history, s.result.history);
          EXPECT_EQ(a.x, s.x);
        }
      }
    }
  }
}

/// Counts the gathers of partial sums issued while it is installed.
class GatherCounter final : public Observer {
 public:
  void issue_begin(const OpEvent& op) override {
    if (op.what == "dist allgather of partial sums") n.fetch_add(1);
  }
  std::atomic<int> n{0};
};

TEST(DistCgVariant, OneGatherAnIterationWhereClassicTakesTwo) {
  Comm c = host_comm(Environment::process_count() == 1 ? 2 : 1);
  if (c.size() < 2) GTEST_SKIP() << "needs two ranks";
  const Mat A = Mat::stencil(c, la::Stencil::d3p7, 6, 5, 3 * c.size() + 1);
  int gathers[2] = {0, 0};
  const int its = 30;
  for (int v = 0; v < 2; ++v) {
    const la::KspOptions o{
        .cg_variant = v == 0 ? la::CgVariant::classic : kSingle,
        .max_it = its,
        .fixed_iterations = true,
        .mode = la::SolveMode::async,
    };
    auto counter = std::make_shared<GatherCounter>();
    add_observer(counter);
    const Solved s = solve_dist(A, o);
    remove_observer(counter.get());
    EXPECT_EQ(s.result.iterations, its);
    gathers[v] = counter->n.load() / c.local_size();  // per rank
  }
  // The set-up's gathers (classic: 1; single: 1) and the iterations' (classic: 2 each).
  EXPECT_EQ(gathers[0], 1 + 2 * its);
  EXPECT_EQ(gathers[1], 1 + its);
}

TEST(DistCgVariant, OneRankStepwiseEqualsLasOwnSolveBitForBit) {
  if (Environment::process_count() > 1) GTEST_SKIP() << "one rank: runs alone";
  Comm c = host_comm(1);
  const Mat A = Mat::stencil(c, la::Stencil::d3p7, 9, 8, 7);
  const la::Mat whole = la::Mat::stencil(Context(Device{"host", 0}), la::Stencil::d3p7, 9, 8, 7);
  for (auto mode : {la::SolveMode::sync, la::SolveMode::async, la::SolveMode::graph}) {
    const la::KspOptions o{.cg_variant = kSingle, .rtol = 1e-10, .mode = mode, .history = true};
    SCOPED_TRACE(describe(o));
    const Solved want = solve_whole(whole, o, c, A.layout());
    ::setenv("SLUICE_DIST_STEPWISE", "1", 1);
    const Solved got = solve_dist(A, o);
    ::unsetenv("SLUICE_DIST_STEPWISE");
    // One part of partial sums a step on one rank: the same sums as la's kernels.
    EXPECT_EQ(got.result.iterations, want.result.iterations);
    EXPECT_EQ(got.result.history, want.result.history);
    EXPECT_EQ(got.x, want.x);
  }
}

TEST(DistCgVariant, RealMatricesWithinACoupleOfClassic) {
  const std::filesystem::path dir = SLUICE_MATRIX_DIR;
  if (!std::filesystem::exists(dir / "nos4.mtx")) GTEST_SKIP() << "no test matrices at " << dir;
  Context ctx(Device{"host", 0});
  Comm c = host_comm(Environment::process_count() == 1 ? 2 : 1);
  for (const char* name : {"bcsstk01", "nos4", "bcsstk03", "mesh2e1", "gr_30_30", "nos3"}) {
    const std::string path = (dir / (std::string(name) + ".mtx")).string();
    const la::Mat whole = la::Mat::read_matrix_market(ctx, path);
    const Mat A = Mat::read_matrix_market(c, path);
    for (la::KspOptions o : {la::KspOptions{.rtol = 1e-8, .max_it = 600},
                             la::KspOptions{.pc = la::PcType::none,
                             .norm_type = la::KspNormType::unpreconditioned,
                             .rtol = 1e-8,
                             .max_it = 600}}) {
      const Solved classic = solve_whole(whole, o, c, A.layout());
      o.cg_variant = kSingle;
      const Solved single = solve_dist(A, o);
      const int a = classic.result.iterations, b = single.result.iterations;
      SCOPED_TRACE(std::string(name) + " " + describe(o) + " on " + std::to_string(c.size()) +
                   " ranks: classic on one context " + std::to_string(a) +
                   ", single-reduction across ranks " + std::to_string(b));
      EXPECT_EQ(single.result.converged(), classic.result.converged());
      if (o.pc == la::PcType::jacobi) {
        EXPECT_LE(std::abs(a - b), std::max(2, a / 50));
      } else {  // bcsstk01 and bcsstk03 unpreconditioned: see tests/la/ksp_cg_variant_test.cpp
        EXPECT_LE(b, a + a * 35 / 100);
      }
    }
  }
}

TEST(DistCgVariant, ProcessesWithAnotherVariantFailAllAlike) {
  if (Environment::process_count() < 2) GTEST_SKIP() << "needs mpirun with 2 processes or more";
  Comm c = host_comm(1);
  const Mat A = Mat::stencil(c, la::Stencil::d2p5, 8, 2 * c.size());
  Vec b = A.create_vec(), x = A.create_vec();
  set(b, 1.0);
  Ksp ksp(A, {.cg_variant = Environment::process_rank() == 1 ? kSingle : la::CgVariant::classic});
  try {
    (void)ksp.solve(b, x);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CG variant"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sluice::dist
