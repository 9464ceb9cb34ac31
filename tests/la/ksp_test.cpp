// Krylov solvers: PETSc's iteration counts, reasons and histories (against the transcription in
// la_reference.hpp), sync, async and graph modes giving the same iterates, known solutions, bad
// input.

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "ksp_test_fixture.hpp"
#include "sluice/graph.hpp"
#include "sluice/la.hpp"

namespace sluice::test {

/// CG and TFQMR, both norms, both modes, against the PETSc transcription, on real SPD matrices.
void KspTest::check_real_matrices(std::initializer_list<const char*> names, int cap) {
  const std::filesystem::path dir = ref::matrix_dir();
  if (dir.empty() || !std::filesystem::exists(dir / "nos4.mtx")) {
    GTEST_SKIP() << "no test matrices at '" << dir.string()
                 << "': set SLUICE_MATRIX_DIR to a copy of ../shared/data/matrices";
  }
  auto ctx = make_context();
  for (const char* name : names) {
    auto A = Mat::read_matrix_market(ctx, (dir / (std::string(name) + ".mtx")).string());
    const auto n = static_cast<std::size_t>(A.rows());
    const auto hb = ref::mult(ref::from_mat(A), ones(n));
    KspOptions o{.rtol = 1e-8, .max_it = real_matrix_cap(cap)};
    check_against_reference(A, hb, o, std::string(name) + " cg jacobi preconditioned");
    o.pc = PcType::none;
    o.norm_type = KspNormType::unpreconditioned;
    check_against_reference(A, hb, o, std::string(name) + " cg none unpreconditioned");
    o = {.type = KspType::tfqmr, .rtol = 1e-8, .max_it = real_matrix_cap(cap)};
    check_against_reference(A, hb, o, std::string(name) + " tfqmr jacobi preconditioned (left)");
    o.norm_type = KspNormType::unpreconditioned;
    check_against_reference(A, hb, o, std::string(name) + " tfqmr jacobi unpreconditioned (right)");
  }
}

namespace {

TEST_P(KspTest, RealMatricesMatchPetscSmall) {
  check_real_matrices({"bcsstk01", "nos4", "bcsstk03", "mesh2e1"});
}
TEST_P(KspTest, RealMatricesMatchPetscMedium) {
  check_real_matrices({"plat362", "gr_30_30", "nos3"});
}
// Enough iterations for most to converge; the others stop at DIVERGED_ITS, compared alike.
TEST_P(KspTest, RealMatricesMatchPetsc1138Bus) {
  check_real_matrices({"1138_bus"});
}
TEST_P(KspTest, RealMatricesMatchPetscBcsstk15) {
  check_real_matrices({"bcsstk15"}, 250);
}

TEST_P(KspTest, NormTypesMatchPetsc) {
  auto ctx = make_context();
  auto A = Mat::stencil_csr(ctx, Stencil::d2p9, 24, 17);
  std::mt19937_64 gen(3);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<double> hb(static_cast<std::size_t>(A.rows()));
  for (auto& v : hb) v = d(gen);
  for (auto nt :
       {KspNormType::preconditioned, KspNormType::unpreconditioned, KspNormType::natural}) {
    for (auto pc : {PcType::none, PcType::jacobi}) {
      KspOptions o{.pc = pc, .norm_type = nt, .rtol = 1e-9};
      check_against_reference(
          A, hb, o, "cg " + std::string(to_string(nt)) + " " + std::string(to_string(pc)));
    }
  }
  // dtol below 1 makes the first iteration that does not shrink the norm enough diverge.
  check_against_reference(A, hb, {.rtol = 1e-12, .dtol = 0.9}, "cg dtol");
  check_against_reference(A, hb, {.type = KspType::tfqmr, .rtol = 1e-12, .dtol = 0.5},
                          "tfqmr dtol");
  check_against_reference(A, hb, {.rtol = 0, .atol = 1e-3}, "cg atol");
  check_against_reference(A, hb, {.rtol = 1e-12, .max_it = 7}, "cg max_it");
  check_against_reference(A, hb, {.type = KspType::tfqmr, .rtol = 1e-12, .max_it = 5},
                          "tfqmr max_it");
}

TEST_P(KspTest, StencilsReachKnownSolutions) {
  auto ctx = make_context();
  struct Case {
    Stencil kind;
    std::int64_t nx, ny, nz;
  };
  // The larger shapes span several tiles of a device's stencil kernels in x, y and z, with
  // partial tiles at the edges (3D 70 x 9 x 40: two 64-point tiles in x, the second part-empty).
  for (const auto& c : {Case{Stencil::d2p5, 40, 30, 1}, Case{Stencil::d2p9, 33, 33, 1},
                        Case{Stencil::d3p7, 12, 10, 9}, Case{Stencil::d3p27, 9, 9, 9},
                        Case{Stencil::d2p5, 130, 37, 1}, Case{Stencil::d2p9, 65, 40, 1},
                        Case{Stencil::d3p7, 70, 9, 40}, Case{Stencil::d3p27, 33, 17, 5}}) {
    // The larger shapes test a device's tiling; the host's sanitizer runs keep the four small.
    if (under_host_sanitizer() && c.nx * c.ny * c.nz > 2000) continue;
    for (bool free : {true, false}) {
      for (auto type : {KspType::cg, KspType::tfqmr}) {
        SCOPED_TRACE(std::string(to_string(c.kind)) + (free ? " matrix-free " : " csr ") +
                     std::string(to_string(type)));
        auto A = free ? Mat::stencil(ctx, c.kind, c.nx, c.ny, c.nz)
                      : Mat::stencil_csr(ctx, c.kind, c.nx, c.ny, c.nz);
        const auto n = static_cast<std::size_t>(A.rows());
        std::vector<double> xstar(n);
        for (std::size_t i = 0; i < n; ++i) xstar[i] = std::sin(0.01 * static_cast<double>(i)) + 1;
        auto b = rhs(A, xstar, ctx);
        Vec x(ctx, n);
        Ksp ksp(A, {.type = type, .rtol = 1e-12, .max_it = 2000});
        const auto r = ksp.solve(b, x);
        EXPECT_TRUE(r.converged()) << to_string(r.reason) << " after " << r.iterations;
        const auto got = x.to_vector();
        double err = 0;
        for (std::size_t i = 0; i < n; ++i) err = std::max(err, std::abs(got[i] - xstar[i]));
        EXPECT_LT(err, 1e-8);
      }
    }
  }
}

TEST_P(KspTest, AsyncMatchesSyncForEveryCheckInterval) {
  auto ctx = make_context();
  const std::int64_t side = under_host_sanitizer() ? 10 : 20;  // the same paths at less cost
  auto A = Mat::stencil(ctx, Stencil::d3p7, side, side, side);
  auto b = rhs(A, ones(static_cast<std::size_t>(A.rows())), ctx);
  for (auto type : {KspType::cg, KspType::tfqmr}) {
    SCOPED_TRACE(std::string(to_string(type)));
    KspOptions o{.type = type, .rtol = 1e-7, .mode = SolveMode::sync, .history = true};
    Vec xs(ctx, b.size());
    Ksp sync_ksp(A, o);
    const auto want = sync_ksp.solve(b, xs);
    const auto want_x = xs.to_vector();
    EXPECT_TRUE(want.converged());
    for (auto mode : {SolveMode::async, SolveMode::graph}) {
      if (mode == SolveMode::graph && !graph_runs()) continue;
      for (int k : {1, 2, 3, 8, 13, 1000}) {
        SCOPED_TRACE(std::string(to_string(mode)) + " check_every " + std::to_string(k));
        o.mode = mode;
        o.check_every = k;
        Vec x(ctx, b.size());
        Ksp ksp(A, o);
        const auto got = ksp.solve(b, x);
        EXPECT_EQ(got.iterations, want.iterations);
        EXPECT_EQ(got.reason, want.reason);
        EXPECT_EQ(got.history, want.history);
        EXPECT_EQ(x.to_vector(), want_x);
        // Solving again with the same object reuses its work space (graph: relaunches the
        // recorded solve) and gives the same result.
        const auto again = ksp.solve(b, x);
        EXPECT_EQ(again.iterations, want.iterations);
        EXPECT_EQ(again.history, want.history);
        EXPECT_EQ(x.to_vector(), want_x);
      }
    }
  }
}

// Async CG on a matrix-free stencil with a constant preconditioner runs a block of iterations
// as one operation (on cuda one cooperative kernel per block, its steps split exactly as their
// own kernels split them in sync mode): the iterates must equal sync's bit for bit, on every
// stencil, at sizes where a kernel's block does the work of several of the steps' blocks, with
// blocks of odd length, a stop inside a block, every norm type, and fixed-iteration blocks.
TEST_P(KspTest, AsyncCgBlocksMatchSyncOnEveryStencil) {
  auto ctx = make_context();
  struct Case {
    Stencil kind;
    std::int64_t nx, ny, nz;
  };
  // On a GPU the large shapes give more update blocks than the cooperative grid has (H100 and
  // H200: 1056 against 528; 2d5 600 x 500: 585 against 528, the one large shape kept under
  // compute-sanitizer); on the host (the default block implementation) small ones suffice.
  const std::vector<Case> small = {{Stencil::d2p5, 61, 47, 1},
                                   {Stencil::d2p9, 40, 33, 1},
                                   {Stencil::d3p7, 19, 13, 11},
                                   {Stencil::d3p27, 11, 9, 10}};
  const std::vector<Case> large = {{Stencil::d2p5, 1000, 700, 1},
                                   {Stencil::d2p9, 611, 509, 1},
                                   {Stencil::d3p7, 90, 87, 85},
                                   {Stencil::d3p27, 70, 65, 61},
                                   {Stencil::d3p7, 7, 5, 3},
                                   // Planes of more tiles than a group (src/la/cuda/tile_walk.hpp):
                                   // the direction product takes its tiles group by group (3D
                                   // 7-point: 270 flat tiles against 256; 27-point: 135 tiles of
                                   // 32 x 16 against 130), the last group narrower.
                                   {Stencil::d3p7, 300, 230, 6},
                                   {Stencil::d3p27, 130, 420, 4}};
  const std::vector<Case> sanitized = {{Stencil::d2p5, 600, 500, 1}, {Stencil::d3p27, 11, 9, 10}};
  const char* tool = std::getenv("SLUICE_UNDER_SANITIZER");
  const std::string sanitizer = tool != nullptr ? tool : "";
  // racecheck (shared memory: the same in every shape) is too slow for the large one.
  const auto& cases = is_host() || sanitizer == "racecheck" ? small
                      : sanitizer.empty()                   ? large
                                                            : sanitized;
  struct Variant {
    PcType pc;
    KspNormType norm;
    int check_every;
    bool fixed;
  };
  const Variant variants[] = {{PcType::jacobi, KspNormType::preconditioned, 3, false},
                              {PcType::none, KspNormType::unpreconditioned, 8, false},
                              {PcType::jacobi, KspNormType::natural, 5, false},
                              {PcType::jacobi, KspNormType::unpreconditioned, 8, true}};
  for (const auto& c : cases) {
    auto A = Mat::stencil(ctx, c.kind, c.nx, c.ny, c.nz);
    const auto n = static_cast<std::size_t>(A.rows());
    std::vector<double> v(n);
    std::mt19937_64 gen(n);
    std::uniform_real_distribution<double> dist(-1, 1);
    for (auto& e : v) e = dist(gen);
    Vec b(ctx, v);
    for (const auto& var : variants) {
      SCOPED_TRACE(std::string(to_string(c.kind)) + " " + std::to_string(n) + " rows, pc " +
                   std::string(to_string(var.pc)) + ", norm " + std::string(to_string(var.norm)) +
                   (var.fixed ? ", fixed" : ""));
      // Fixed: 70 iterations are a 64-iteration block and a 6-iteration one. Otherwise several
      // check blocks, the last stopping inside (converged, or at 301 iterations: no multiple of
      // the check intervals).
      KspOptions o{.type = KspType::cg,
                   .pc = var.pc,
                   .norm_type = var.norm,
                   .rtol = 1e-7,
                   .max_it = var.fixed ? 70 : 301,
                   .fixed_iterations = var.fixed,
                   .check_every = var.check_every,
                   .history = true};
      KspResult r[3];
      std::vector<double> x_of[3];
      for (int m = 0; m < modes(); ++m) {
        o.mode = kModes[m];
        Vec x(ctx, n);
        r[m] = Ksp(A, o).solve(b, x);
        x_of[m] = x.to_vector();
      }
      if (var.fixed) {
        EXPECT_EQ(r[0].iterations, 70);
      } else {
        EXPECT_TRUE(r[0].converged() || r[0].reason == ConvergedReason::diverged_its)
            << to_string(r[0].reason);
        EXPECT_GT(r[0].iterations, 2 * var.check_every);
      }
      for (int m = 1; m < modes(); ++m) {
        SCOPED_TRACE(to_string(kModes[m]));
        EXPECT_EQ(r[m].iterations, r[0].iterations);
        EXPECT_EQ(r[m].reason, r[0].reason);
        EXPECT_EQ(r[m].history, r[0].history);
        EXPECT_EQ(x_of[m], x_of[0]);
      }
    }
  }
}

TEST_P(KspTest, FixedIterations) {
  auto ctx = make_context();
  auto A = Mat::stencil(ctx, Stencil::d2p5, 64, 64);
  auto b = rhs(A, ones(64 * 64), ctx);
  for (auto type : {KspType::cg, KspType::tfqmr}) {
    std::vector<double> x_of[3];
    for (int m = 0; m < modes(); ++m) {
      Vec x(ctx, b.size());
      Ksp ksp(A, {.type = type, .max_it = 20, .fixed_iterations = true, .mode = kModes[m]});
      const auto r = ksp.solve(b, x);
      EXPECT_EQ(r.iterations, 20);
      EXPECT_EQ(r.reason, ConvergedReason::converged_its);
      x_of[m] = x.to_vector();
    }
    EXPECT_EQ(x_of[0], x_of[1]);
    if (graph_runs()) {
      EXPECT_EQ(x_of[0], x_of[2]);
    }
    // Without norms at all (PETSc: KSP_NORM_NONE with KSPConvergedSkip).
    Vec x(ctx, b.size());
    Ksp ksp(A,
            {.type = type, .norm_type = KspNormType::none, .max_it = 20, .fixed_iterations = true});
    const auto r = ksp.solve(b, x);
    EXPECT_EQ(r.iterations, 20);
    EXPECT_EQ(r.residual_norm, 0.0);
    EXPECT_EQ(x.to_vector(), x_of[0]);
  }
  // A fixed solve of two blocks (64 + 36 iterations) that stops inside the first (CG on 2 x 2
  // points is exact after two): the second block starts stopped, and async reads the state it
  // leaves as sync's.
  auto small = Mat::stencil(ctx, Stencil::d2p5, 2, 2);
  auto c = rhs(small, {1.0, 2.0, 3.0, 4.0}, ctx);
  KspResult r[3];
  for (int m = 0; m < modes(); ++m) {
    Vec x(ctx, c.size());
    r[m] = Ksp(small, {.max_it = 100, .fixed_iterations = true, .mode = kModes[m]}).solve(c, x);
  }
  EXPECT_LT(r[0].iterations, 64);
  for (int m = 1; m < modes(); ++m) {
    EXPECT_EQ(r[m].iterations, r[0].iterations);
    EXPECT_EQ(r[m].reason, r[0].reason);
    EXPECT_EQ(r[m].residual_norm, r[0].residual_norm);
  }
}

TEST_P(KspTest, MonitorSeesTheHistoryInEveryMode) {
  auto ctx = make_context();
  auto A = Mat::stencil(ctx, Stencil::d2p5, 30, 30);
  auto b = rhs(A, ones(900), ctx);
  for (auto type : {KspType::cg, KspType::tfqmr}) {
    std::vector<std::pair<int, double>> seen[3];
    KspResult results[3];
    for (int m = 0; m < modes(); ++m) {
      std::vector<std::pair<int, Managed<double>>> values;
      KspOptions o{.type = type,
                   .rtol = 1e-6,
                   .mode = kModes[m],
                   .check_every = 5,
                   .history = true,
                   .monitor = [&](int it, const Managed<double>& rnorm) {
                     values.emplace_back(it, rnorm);  // no wait: read after the solve
                   }};
      Vec x(ctx, b.size());
      results[m] = Ksp(A, o).solve(b, x);
      for (auto& [it, v] : values) seen[m].emplace_back(it, v.value());
    }
    EXPECT_EQ(seen[0], seen[1]);
    if (graph_runs()) {
      EXPECT_EQ(seen[0], seen[2]);
    }
    const auto& r = results[0];
    ASSERT_FALSE(seen[0].empty());
    EXPECT_EQ(seen[0].front().first, 0);
    EXPECT_EQ(seen[0].back().first, r.iterations);
    EXPECT_EQ(seen[0].back().second, r.residual_norm);
    if (type == KspType::cg) {
      ASSERT_EQ(seen[0].size(), r.history.size());
      EXPECT_EQ(r.history.size(), static_cast<std::size_t>(r.iterations) + 1);
      for (std::size_t i = 0; i < seen[0].size(); ++i) {
        EXPECT_EQ(seen[0][i].second, r.history[i]);
      }
    } else {
      // TFQMR logs two estimates per iteration and none at 0, but monitors at 0 (as PETSc).
      ASSERT_EQ(seen[0].size(), r.history.size() + 1);
      for (std::size_t i = 0; i < r.history.size(); ++i) {
        EXPECT_EQ(seen[0][i + 1].second, r.history[i]);
      }
    }
  }
}

TEST_P(KspTest, NonzeroInitialGuess) {
  auto ctx = make_context();
  auto A = Mat::stencil(ctx, Stencil::d2p5, 20, 20);
  const auto n = static_cast<std::size_t>(A.rows());
  std::vector<double> xstar(n);
  for (std::size_t i = 0; i < n; ++i) xstar[i] = std::cos(0.1 * static_cast<double>(i));
  auto b = rhs(A, xstar, ctx);
  for (int m = 0; m < modes(); ++m) {
    const SolveMode mode = kModes[m];
    for (auto type : {KspType::cg, KspType::tfqmr}) {
      // Starting at the solution: the residual is exactly 0, converged at iteration 0 by atol,
      // x untouched.
      Vec x(ctx, xstar);
      Ksp ksp(A, {.type = type, .rtol = 1e-8, .initial_guess_nonzero = true, .mode = mode});
      auto r = ksp.solve(b, x);
      EXPECT_EQ(r.iterations, 0);
      EXPECT_EQ(r.reason, ConvergedReason::converged_atol);
      EXPECT_EQ(x.to_vector(), xstar);
      // Slightly off: the initial residual is small against ||b|| (PETSc's rnorm0 for a nonzero
      // guess), so rtol is met at once.
      std::vector<double> off = xstar;
      off[7] += 1e-10;
      x.assign(off);
      r = ksp.solve(b, x);
      EXPECT_EQ(r.iterations, 0);
      EXPECT_EQ(r.reason, ConvergedReason::converged_rtol);
      // Starting nearby: converges to the solution.
      std::vector<double> near = xstar;
      for (auto& v : near) v += 0.01;
      x.assign(near);
      r = ksp.solve(b, x);
      EXPECT_TRUE(r.converged());
      const auto got = x.to_vector();
      for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], xstar[i], 1e-6);
    }
  }
}

TEST_P(KspTest, IndefiniteMatrixInCg) {
  auto ctx = make_context();
  // The 2D Laplacian shifted into the middle of its spectrum: symmetric, indefinite.
  const std::int64_t g = 12;
  auto A = Mat::from_rows(ctx, g * g, g * g, [&](std::int64_t r, const RowAdder& add) {
    const auto ix = r % g, iy = r / g;
    add(r, 4.0 - 4.0);
    if (ix > 0) add(r - 1, -1.0);
    if (ix + 1 < g) add(r + 1, -1.0);
    if (iy > 0) add(r - g, -1.0);
    if (iy + 1 < g) add(r + g, -1.0);
  });
  std::vector<double> hb(static_cast<std::size_t>(g * g));
  for (std::size_t i = 0; i < hb.size(); ++i) hb[i] = 1.0 + static_cast<double>(i % 7);
  KspOptions o{.pc = PcType::none, .rtol = 1e-10};
  check_against_reference(A, hb, o, "indefinite");
  Vec b(ctx, hb), x(ctx, hb.size());
  const auto r = Ksp(A, o).solve(b, x);
  EXPECT_EQ(r.reason, ConvergedReason::diverged_indefinite_mat);
  EXPECT_FALSE(r.converged());
}

TEST_P(KspTest, BadInputIsAClearError) {
  auto ctx = make_context();
  auto A = Mat::stencil(ctx, Stencil::d2p5, 8, 8);
  Vec b(ctx, 64), x(ctx, 64), short_x(ctx, 63);
  set(b, 1.0);
  Ksp ksp(A);
  try {
    (void)ksp.solve(b, short_x);
    FAIL() << "no error for a size mismatch";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("sizes differ (64 and 63)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)ksp.solve(b, b), Error);
  EXPECT_THROW(Ksp(A, {.norm_type = KspNormType::none}), Error);
  EXPECT_THROW(Ksp(A, {.type = KspType::tfqmr, .norm_type = KspNormType::natural}), Error);
  EXPECT_THROW(Ksp(A, {.max_it = 0}), Error);
  EXPECT_THROW(Ksp(A, {.check_every = -1}), Error);
  EXPECT_THROW(Ksp(Mat::from_triplets(ctx, 2, 3, std::vector<Triplet>{})), Error);
  EXPECT_THROW(Ksp(Mat{}), Error);
  EXPECT_THROW((void)parse_ksp_type("gmres"), Error);
  EXPECT_EQ(parse_norm_type("unpreconditioned"), KspNormType::unpreconditioned);
  EXPECT_EQ(to_string(ConvergedReason::diverged_indefinite_mat), "DIVERGED_INDEFINITE_MAT");
  // The solver still works after the errors.
  const auto r = ksp.solve(b, x);
  EXPECT_TRUE(r.converged());
}

TEST_P(KspTest, CheckIntervalIsChosenPerSolverAndOperator) {
  auto ctx = make_context();
  const auto free = Mat::stencil(ctx, Stencil::d2p5, 30, 30);
  const auto csr = Mat::stencil_csr(ctx, Stencil::d2p5, 30, 30);
  // CG on a matrix-free operator: iterations past the stop cost nothing, so checks are rare.
  EXPECT_EQ(Ksp(free).check_interval(), 32);
  EXPECT_EQ(Ksp(free, {.pc = PcType::none}).check_interval(), 32);
  // CSR (unguarded cuSPARSE products past the stop) and TFQMR keep the shorter interval.
  EXPECT_EQ(Ksp(csr).check_interval(), 8);
  EXPECT_EQ(Ksp(free, {.type = KspType::tfqmr}).check_interval(), 8);
  // An explicit interval is kept.
  EXPECT_EQ(Ksp(free, {.check_every = 5}).check_interval(), 5);
  EXPECT_EQ(Ksp(csr, {.check_every = 64}).check_interval(), 64);
  // The chosen interval gives sync's count and residual (converging in more than 32).
  Vec b(ctx, 900), x(ctx, 900);
  set(b, 1.0);
  const auto as = Ksp(free, {.rtol = 1e-10}).solve(b, x);
  const auto sy = Ksp(free, {.rtol = 1e-10, .mode = SolveMode::sync}).solve(b, x);
  EXPECT_GT(as.iterations, 32);
  EXPECT_EQ(as.iterations, sy.iterations);
  EXPECT_EQ(as.reason, sy.reason);
  EXPECT_EQ(as.residual_norm, sy.residual_norm);
}

TEST_P(KspTest, ZeroRightHandSide) {
  auto ctx = make_context();
  auto A = Mat::stencil(ctx, Stencil::d2p5, 10, 10);
  Vec b(ctx, 100), x(ctx, 100);
  set(b, 0.0);
  for (int m = 0; m < modes(); ++m) {
    const SolveMode mode = kModes[m];
    for (auto type : {KspType::cg, KspType::tfqmr}) {
      const auto r = Ksp(A, {.type = type, .mode = mode}).solve(b, x);
      EXPECT_EQ(r.iterations, 0);
      EXPECT_EQ(r.reason, ConvergedReason::converged_atol);
      EXPECT_EQ(norm(x), 0.0);
    }
  }
}

// Graph mode records a solve once per key and relaunches it: the same vectors launch it as is,
// other vectors update it in place, other options re-instantiate it; every result equals sync's.
TEST_P(KspTest, GraphModeRecordsOnceAndUpdatesForNewVectors) {
  if (!graph_runs())
    GTEST_SKIP() << "synccheck and racecheck fail a cooperative kernel in a while node";
  auto ctx = make_context();
  auto A = Mat::stencil(ctx, Stencil::d2p5, 24, 19);
  const auto n = static_cast<std::size_t>(A.rows());
  std::vector<double> v1(n), v2(n);
  for (std::size_t i = 0; i < n; ++i) {
    v1[i] = std::sin(0.3 * static_cast<double>(i));
    v2[i] = 1.0 + std::cos(0.7 * static_cast<double>(i));
  }
  Vec b1(ctx, v1), b2(ctx, v2);
  for (auto type : {KspType::cg, KspType::tfqmr}) {
    SCOPED_TRACE(std::string(to_string(type)));
    KspOptions o{.type = type, .rtol = 1e-9, .check_every = 4, .history = true};
    auto sync_solve = [&](const Vec& b, KspOptions opts) {
      opts.mode = SolveMode::sync;
      Vec x(ctx, n);
      auto r = Ksp(A, opts).solve(b, x);
      return std::pair{r, x.to_vector()};
    };
    const auto [want1, x1] = sync_solve(b1, o);
    const auto [want2, x2] = sync_solve(b2, o);
    ASSERT_GT(want1.iterations, 3 * o.check_every);  // several trips of the while node

    o.mode = SolveMode::graph;
    Ksp ksp(A, o);
    Vec xa(ctx, n), xb(ctx, n);
    auto expect = [&](const KspResult& got, const Vec& x, const KspResult& want,
                      const std::vector<double>& wx) {
      EXPECT_EQ(got.iterations, want.iterations);
      EXPECT_EQ(got.reason, want.reason);
      EXPECT_EQ(got.history, want.history);
      EXPECT_EQ(x.to_vector(), wx);
    };
    const auto s0 = graph::stats();
    expect(ksp.solve(b1, xa), xa, want1, x1);
    const auto s1 = graph::stats();
    EXPECT_EQ(s1.instantiations, s0.instantiations + 1);
    EXPECT_EQ(s1.launches, s0.launches + 1);
    // The same vectors: launched as recorded, nothing captured.
    expect(ksp.solve(b1, xa), xa, want1, x1);
    const auto s2 = graph::stats();
    EXPECT_EQ(s2.captures, s1.captures);
    EXPECT_EQ(s2.instantiations, s1.instantiations);
    // Other vectors: recorded again and updated in place, not instantiated.
    expect(ksp.solve(b2, xb), xb, want2, x2);
    expect(ksp.solve(b1, xa), xa, want1, x1);
    const auto s3 = graph::stats();
    EXPECT_GT(s3.captures, s2.captures);
    EXPECT_EQ(s3.instantiations, s2.instantiations);
    // Other options (a nonzero guess adds the residual's operations): instantiated anew.
    auto guess = o;
    guess.initial_guess_nonzero = true;
    const auto [want3, x3] = [&] {
      guess.mode = SolveMode::sync;
      Vec x(ctx, v2);
      auto r = Ksp(A, guess).solve(b1, x);
      return std::pair{r, x.to_vector()};
    }();
    guess.mode = SolveMode::graph;
    ksp.set_options(guess);
    xb.assign(v2);
    expect(ksp.solve(b1, xb), xb, want3, x3);
    EXPECT_EQ(graph::stats().instantiations, s3.instantiations + 1);
  }
}

// A graph-mode solve is one operation ordered by the tracker: a right-hand side another context
// is still writing is waited for, and a reader of x on another context waits for the solve.
TEST_P(KspTest, GraphModeSolveIsOrderedAcrossContexts) {
  if (!graph_runs())
    GTEST_SKIP() << "synccheck and racecheck fail a cooperative kernel in a while node";
  auto ctx = make_context();
  auto other = make_context();
  auto A = Mat::stencil(ctx, Stencil::d3p7, 9, 8, 7);
  const auto n = static_cast<std::size_t>(A.rows());
  Vec b(ctx, n), x(ctx, n), y(other, n);
  KspOptions o{.rtol = 1e-10, .history = true};
  set(b, 1.0, ctx);
  Vec xs(ctx, n);
  const auto want = Ksp(A, {.rtol = 1e-10, .mode = SolveMode::sync}).solve(b, xs);
  o.mode = SolveMode::graph;
  Ksp ksp(A, o);
  for (int round = 0; round < 3; ++round) {
    set(b, 0.0, other);  // then 1 again, both on the other context: the solve must see 1
    set(b, 1.0, other);
    const auto got = ksp.solve(b, x, ctx);
    EXPECT_EQ(got.iterations, want.iterations);
    copy(x, y, other);  // ordered after the solve by the tracker
    EXPECT_EQ(y.to_vector(), xs.to_vector());
  }
}

SLUICE_INSTANTIATE_BACKENDS(KspTest);

}  // namespace
}  // namespace sluice::test
