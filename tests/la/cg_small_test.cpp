// The cuda backend's small CG kernel (src/la/cuda/cg_small.cu): one thread block, or a cluster of
// up to 16, running blocks of async and graph-mode CG iterations of small matrix-free problems.
// Its iterates, counts, reasons and histories must equal sync mode's bit for bit on every stencil,
// shape, norm type and block length, in each of its shapes. SLUICE_CUDA_CG_SMALL with `require`
// makes a block that the kernel does not take an error, so a passing case proves it ran.

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <string>

#include "backend_param.hpp"
#include "scoped_env.hpp"
#include "sluice/la.hpp"

namespace sluice::test {
namespace {

using namespace sluice::la;  // NOLINT: the layer under test

using sluice::test::ScopedEnv;

class CgSmallTest : public BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (is_host()) GTEST_SKIP() << "the small CG kernel is the cuda backend's (cg_small.cu)";
  }

  /// Graph mode runs but under synccheck and racecheck (see KspTest::graph_runs).
  static bool graph_runs() {
    const char* tool = std::getenv("SLUICE_UNDER_SANITIZER");
    const std::string t = tool != nullptr ? tool : "";
    return t != "synccheck" && t != "racecheck";
  }

  struct Outcome {
    KspResult result;
    std::vector<double> x;
  };

  static Outcome solve(const Mat& A, const Vec& b, KspOptions o, SolveMode mode) {
    o.mode = mode;
    o.history = true;
    Vec x(b.context(), b.size());
    if (o.initial_guess_nonzero) {  // the same guess in every mode
      std::vector<double> g(b.size());
      std::mt19937_64 gen(7);
      std::uniform_real_distribution<double> dist(-1, 1);
      for (auto& e : g) e = dist(gen);
      x.assign(g);
    }
    Outcome out;
    out.result = Ksp(A, o).solve(b, x);
    out.x = x.to_vector();
    return out;
  }

  /// Sync against async and graph with SLUICE_CUDA_CG_SMALL = `setting`: the same bits.
  static void expect_same(const Mat& A, const Vec& b, const KspOptions& o,
                          const std::string& setting) {
    const Outcome want = solve(A, b, o, SolveMode::sync);
    ScopedEnv env("SLUICE_CUDA_CG_SMALL", setting);
    for (SolveMode mode : {SolveMode::async, SolveMode::graph}) {
      if (mode == SolveMode::graph && !graph_runs()) continue;
      SCOPED_TRACE(std::string(to_string(mode)) + ", SLUICE_CUDA_CG_SMALL=" + setting);
      const Outcome got = solve(A, b, o, mode);
      EXPECT_EQ(got.result.iterations, want.result.iterations);
      EXPECT_EQ(got.result.reason, want.result.reason);
      EXPECT_EQ(got.result.history, want.result.history);
      EXPECT_EQ(got.x, want.x);
    }
  }

  static Vec random_rhs(const Context& ctx, std::size_t n) {
    std::vector<double> v(n);
    std::mt19937_64 gen(n);
    std::uniform_real_distribution<double> dist(-1, 1);
    for (auto& e : v) e = dist(gen);
    return Vec(ctx, v);
  }
};

struct Shape {
  Stencil kind;
  std::int64_t nx, ny, nz;
};

// Every stencil; the goal's 64 x 64; shapes whose tiles and chunks end inside the grid; a grid
// smaller than one tile; the largest sizes the kernel takes (a cluster of 16).
const Shape kShapes[] = {{Stencil::d2p5, 64, 64, 1},   {Stencil::d2p5, 61, 47, 1},
                         {Stencil::d2p5, 5, 3, 1},     {Stencil::d2p9, 40, 33, 1},
                         {Stencil::d3p7, 16, 16, 16},  {Stencil::d3p7, 19, 13, 11},
                         {Stencil::d3p7, 7, 5, 3},     {Stencil::d3p27, 11, 9, 10},
                         {Stencil::d2p5, 181, 181, 1}, {Stencil::d3p7, 32, 32, 32}};

struct Variant {
  PcType pc;
  KspNormType norm;
  int check_every;
  bool fixed;
  int max_it;
  bool guess;  // a nonzero initial guess: the set-up runs before the first block, not in it
};

// Converging solves whose check intervals (odd ones too) stop inside a block, a solve stopped by
// its iteration limit inside a block, a fixed one of a 64-iteration block and a 6-iteration one,
// and one from a nonzero guess.
const Variant kVariants[] = {{PcType::jacobi, KspNormType::preconditioned, 3, false, 301, false},
                             {PcType::none, KspNormType::unpreconditioned, 8, false, 301, false},
                             {PcType::jacobi, KspNormType::natural, 5, false, 301, false},
                             {PcType::jacobi, KspNormType::preconditioned, 4, false, 7, false},
                             {PcType::jacobi, KspNormType::unpreconditioned, 8, true, 70, false},
                             {PcType::jacobi, KspNormType::preconditioned, 6, false, 301, true}};

TEST_P(CgSmallTest, MatchesSyncOnEveryStencilShapeAndNorm) {
  auto ctx = make_context();
  for (const auto& s : kShapes) {
    auto A = Mat::stencil(ctx, s.kind, s.nx, s.ny, s.nz);
    const Vec b = random_rhs(ctx, static_cast<std::size_t>(A.rows()));
    for (const auto& v : kVariants) {
      SCOPED_TRACE(std::string(to_string(s.kind)) + " " + std::to_string(s.nx) + " x " +
                   std::to_string(s.ny) + " x " + std::to_string(s.nz) + ", pc " +
                   std::string(to_string(v.pc)) + ", norm " + std::string(to_string(v.norm)) +
                   ", max_it " + std::to_string(v.max_it) + (v.fixed ? ", fixed" : "") +
                   (v.guess ? ", nonzero guess" : ""));
      const KspOptions o{.type = KspType::cg,
                         .pc = v.pc,
                         .norm_type = v.norm,
                         .rtol = 1e-7,
                         .max_it = v.max_it,
                         .fixed_iterations = v.fixed,
                         .initial_guess_nonzero = v.guess,
                         .check_every = v.check_every};
      expect_same(A, b, o, "require");
    }
  }
}

// Each shape of the kernel (one block; clusters of 2 to 16) on the goal's problem. A cluster of 16
// needs a GPC with 16 free multiprocessors, which not every part has: that one case may report
// that it is not resident.
TEST_P(CgSmallTest, EveryClusterSizeMatchesSync) {
  auto ctx = make_context();
  for (const auto& s : {Shape{Stencil::d2p5, 64, 64, 1}, Shape{Stencil::d3p7, 13, 11, 9}}) {
    auto A = Mat::stencil(ctx, s.kind, s.nx, s.ny, s.nz);
    const Vec b = random_rhs(ctx, static_cast<std::size_t>(A.rows()));
    for (const std::string shape : {"block", "cluster:2", "cluster:4", "cluster:8", "cluster:16"}) {
      SCOPED_TRACE(std::string(to_string(s.kind)) + " " + shape);
      const KspOptions fixed{.max_it = 70, .fixed_iterations = true};
      const KspOptions converging{.rtol = 1e-8, .check_every = 7};
      try {
        expect_same(A, b, fixed, shape + ",require");
        expect_same(A, b, converging, shape + ",require");
      } catch (const Error& e) {
        const std::string what = e.what();
        if (shape == "cluster:16" && what.find("not resident") != std::string::npos) {
          std::cout << "note: " << what << "\n";
          continue;
        }
        ADD_FAILURE() << what;
      }
    }
  }
}

// A solve that stops before its first block (zero right-hand side) and blocks issued after the
// stop (the async driver keeps one queued): nothing changes x.
TEST_P(CgSmallTest, BlocksAfterTheStopChangeNothing) {
  auto ctx = make_context();
  auto A = Mat::stencil(ctx, Stencil::d2p5, 64, 64);
  Vec b(ctx, 4096), x(ctx, 4096);
  set(b, 0.0);
  ScopedEnv env("SLUICE_CUDA_CG_SMALL", "require");
  for (SolveMode mode : {SolveMode::async, SolveMode::graph}) {
    if (mode == SolveMode::graph && !graph_runs()) continue;
    set(x, 3.0);
    const auto r = Ksp(A, {.mode = mode}).solve(b, x);
    EXPECT_EQ(r.iterations, 0);
    EXPECT_EQ(r.reason, ConvergedReason::converged_atol);
    EXPECT_EQ(norm(x), 0.0);
  }
  const Vec rhs = random_rhs(ctx, 4096);
  // Converges after about 100 iterations; blocks of 2 leave the next one queued past the stop.
  expect_same(A, rhs, {.rtol = 1e-6, .check_every = 2}, "require");
}

// The switch: off falls back to the other kernels (same bits), a bad value is a clear error.
TEST_P(CgSmallTest, SwitchIsCheckedAndOffFallsBack) {
  auto ctx = make_context();
  auto A = Mat::stencil(ctx, Stencil::d2p5, 30, 30);
  const Vec b = random_rhs(ctx, 900);
  expect_same(A, b, {.max_it = 20, .fixed_iterations = true}, "off");
  ScopedEnv env("SLUICE_CUDA_CG_SMALL", "cluster:3");
  Vec x(ctx, 900);
  try {
    (void)Ksp(A, {.max_it = 20, .fixed_iterations = true}).solve(b, x);
    ADD_FAILURE() << "cluster:3 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a cluster size"), std::string::npos) << e.what();
  }
  // A problem over the kernel's size limit with `require`: refused, saying why.
  ScopedEnv big("SLUICE_CUDA_CG_SMALL", "require");
  auto L = Mat::stencil(ctx, Stencil::d2p5, 200, 200);
  Vec lb(ctx, 40000), lx(ctx, 40000);
  set(lb, 1.0);
  try {
    (void)Ksp(L, {.max_it = 20, .fixed_iterations = true}).solve(lb, lx);
    ADD_FAILURE() << "a 40000-point block was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than"), std::string::npos) << e.what();
  }
}

// The phase clock (SLUICE_CUDA_CG_SMALL_PROFILE): its kernel computes the same bits as sync mode
// in one block and in a cluster, and each async launch appends its breakdown (graph mode, which
// cannot wait, runs the plain kernel); a path that cannot be written is refused before anything
// is issued.
TEST_P(CgSmallTest, PhaseClockKeepsTheBitsAndWritesItsBreakdown) {
  auto ctx = make_context();
  auto A = Mat::stencil(ctx, Stencil::d2p5, 64, 64);
  const Vec b = random_rhs(ctx, 4096);
  const std::string file = ::testing::TempDir() + "sluice_cg_small_profile_test.txt";
  for (const std::string shape : {"block", "cluster:4"}) {
    SCOPED_TRACE(shape);
    std::remove(file.c_str());
    {
      ScopedEnv profile("SLUICE_CUDA_CG_SMALL_PROFILE", file);
      expect_same(A, b, {.max_it = 20, .fixed_iterations = true}, shape + ",require");
    }
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    const std::string got = text.str();
    EXPECT_NE(got.find("cg_small profile: 4096 points"), std::string::npos) << got;
    EXPECT_NE(got.find("20 iterations"), std::string::npos) << got;
    EXPECT_NE(got.find("us per iteration (warp 0)"), std::string::npos) << got;
  }
  std::remove(file.c_str());
  ScopedEnv bad("SLUICE_CUDA_CG_SMALL_PROFILE", "/nonexistent-dir/profile.txt");
  ScopedEnv on("SLUICE_CUDA_CG_SMALL", "require");
  Vec x(ctx, 4096);
  set(x, 2.0);
  try {
    (void)Ksp(A, {.max_it = 20, .fixed_iterations = true}).solve(b, x);
    ADD_FAILURE() << "an unwritable profile file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SLUICE_CUDA_CG_SMALL_PROFILE"), std::string::npos)
        << e.what();
  }
}

// The small TFQMR kernel (src/la/cuda/tf_small.cu; SLUICE_CUDA_TF_SMALL, auto by default): every
// stencil up to its 4096 points, left (preconditioned norm) and right (unpreconditioned: x moves
// in y, unwound at the end) Jacobi and none, converging, limited and fixed solves; `require`
// makes a block it does not take an error, so a passing case proves it ran.
TEST_P(CgSmallTest, TfqmrMatchesSyncOnEveryStencilAndNorm) {
  auto ctx = make_context();
  const Shape shapes[] = {{Stencil::d2p5, 64, 64, 1}, {Stencil::d2p5, 61, 47, 1},
                          {Stencil::d2p9, 40, 33, 1}, {Stencil::d3p7, 16, 16, 16},
                          {Stencil::d3p7, 7, 5, 3},   {Stencil::d3p27, 11, 9, 10},
                          {Stencil::d2p5, 5, 3, 1}};
  struct TfVariant {
    PcType pc;
    KspNormType norm;
    int check_every;
    bool fixed;
    int max_it;
  };
  const TfVariant variants[] = {{PcType::jacobi, KspNormType::preconditioned, 3, false, 301},
                                {PcType::jacobi, KspNormType::unpreconditioned, 8, false, 301},
                                {PcType::none, KspNormType::preconditioned, 5, false, 301},
                                {PcType::jacobi, KspNormType::preconditioned, 4, false, 7},
                                {PcType::jacobi, KspNormType::preconditioned, 8, true, 70}};
  for (const auto& s : shapes) {
    auto A = Mat::stencil(ctx, s.kind, s.nx, s.ny, s.nz);
    const Vec b = random_rhs(ctx, static_cast<std::size_t>(A.rows()));
    for (const auto& v : variants) {
      SCOPED_TRACE(std::string(to_string(s.kind)) + " " + std::to_string(s.nx) + " x " +
                   std::to_string(s.ny) + " x " + std::to_string(s.nz) + ", pc " +
                   std::string(to_string(v.pc)) + ", norm " + std::string(to_string(v.norm)) +
                   ", max_it " + std::to_string(v.max_it) + (v.fixed ? ", fixed" : ""));
      const KspOptions o{.type = KspType::tfqmr,
                         .pc = v.pc,
                         .norm_type = v.norm,
                         .rtol = 1e-7,
                         .max_it = v.max_it,
                         .fixed_iterations = v.fixed,
                         .check_every = v.check_every};
      ScopedEnv tf("SLUICE_CUDA_TF_SMALL", "require");
      expect_same(A, b, o, "auto");
    }
  }
}

// Each of the small TFQMR kernel's instantiations (every stencil with 1, 2 and 4 update units
// per warp: up to 1024, 2048 and 4096 points) against sync mode, in short solves (the
// racecheck step of scripts/gpu-perf26 runs this one): a fixed block, one stopped by its
// iteration limit inside a block (tf_rho's stop), and one converging inside a block (tf_m's
// stops after the first or the second quasi-minimal step).
TEST_P(CgSmallTest, TfqmrEveryKernelShapeMatchesSync) {
  auto ctx = make_context();
  const Shape shapes[] = {
      {Stencil::d2p5, 30, 30, 1},   {Stencil::d2p5, 48, 40, 1},   {Stencil::d2p5, 64, 64, 1},
      {Stencil::d2p9, 31, 29, 1},   {Stencil::d2p9, 45, 41, 1},   {Stencil::d2p9, 63, 61, 1},
      {Stencil::d3p7, 9, 10, 11},   {Stencil::d3p7, 12, 12, 12},  {Stencil::d3p7, 16, 16, 16},
      {Stencil::d3p27, 10, 10, 10}, {Stencil::d3p27, 13, 12, 11}, {Stencil::d3p27, 15, 16, 17}};
  const KspOptions variants[] = {
      {.type = KspType::tfqmr, .max_it = 12, .fixed_iterations = true, .check_every = 12},
      {.type = KspType::tfqmr, .rtol = 1e-12, .max_it = 5, .check_every = 8},
      {.type = KspType::tfqmr, .rtol = 1e-2, .check_every = 16}};
  ScopedEnv tf("SLUICE_CUDA_TF_SMALL", "require");
  // Under racecheck (scripts/gpu-perf26 sets SLUICE_UNDER_SANITIZER) every 2D 5-point shape
  // (1, 2 and 4 units a warp) and the first of each other stencil, the fixed block only: the
  // whole set runs past the step's limit there.
  const char* tool = std::getenv("SLUICE_UNDER_SANITIZER");
  const bool subset = tool != nullptr && std::string(tool) == "racecheck";
  for (std::size_t i = 0; i < std::size(shapes); ++i) {
    const auto& s = shapes[i];
    if (subset && s.kind != Stencil::d2p5 && i % 3 != 0) continue;
    auto A = Mat::stencil(ctx, s.kind, s.nx, s.ny, s.nz);
    const Vec b = random_rhs(ctx, static_cast<std::size_t>(A.rows()));
    for (const auto& o : variants) {
      if (subset && &o != &variants[0]) continue;
      SCOPED_TRACE(std::string(to_string(s.kind)) + " " + std::to_string(s.nx) + " x " +
                   std::to_string(s.ny) + " x " + std::to_string(s.nz) + ", max_it " +
                   std::to_string(o.max_it) + ", rtol " + std::to_string(o.rtol));
      expect_same(A, b, o, "auto");
    }
  }
}

// A TFQMR solve that stops before its first block (zero right-hand side) and blocks issued after
// the stop (the async driver keeps one queued): nothing changes x, every mode the same bits.
TEST_P(CgSmallTest, TfqmrBlocksAfterTheStopChangeNothing) {
  auto ctx = make_context();
  auto A = Mat::stencil(ctx, Stencil::d2p5, 64, 64);
  Vec b(ctx, 4096), x(ctx, 4096);
  set(b, 0.0);
  ScopedEnv env("SLUICE_CUDA_TF_SMALL", "require");
  for (SolveMode mode : {SolveMode::async, SolveMode::graph}) {
    if (mode == SolveMode::graph && !graph_runs()) continue;
    set(x, 3.0);
    const auto r = Ksp(A, {.type = KspType::tfqmr, .mode = mode}).solve(b, x);
    EXPECT_EQ(r.iterations, 0);
    EXPECT_EQ(r.reason, ConvergedReason::converged_atol);
    EXPECT_EQ(norm(x), 0.0);
  }
  const Vec rhs = random_rhs(ctx, 4096);
  // Converges after some dozens of iterations; blocks of 2 leave the next one queued past it.
  expect_same(A, rhs, {.type = KspType::tfqmr, .rtol = 1e-6, .check_every = 2}, "auto");
}

// The switch on cuda: auto (the default) and off give sync mode's bits, a bad word is a clear
// error before anything is issued, and `require` over the kernel's 4096 points says why.
TEST_P(CgSmallTest, TfqmrSwitchIsCheckedAndEveryValueMatchesSync) {
  auto ctx = make_context();
  auto A = Mat::stencil(ctx, Stencil::d2p5, 64, 64);
  const Vec b = random_rhs(ctx, 4096);
  const KspOptions o{.type = KspType::tfqmr, .max_it = 20, .fixed_iterations = true};
  for (const char* v : {"auto", "off", "on"}) {
    ScopedEnv tf("SLUICE_CUDA_TF_SMALL", v);
    expect_same(A, b, o, "auto");
  }
  {
    ScopedEnv tf("SLUICE_CUDA_TF_SMALL", "sometimes");
    Vec x(ctx, 4096);
    try {
      (void)Ksp(A, {.type = KspType::tfqmr, .mode = SolveMode::async}).solve(b, x);
      ADD_FAILURE() << "SLUICE_CUDA_TF_SMALL=sometimes was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("unknown word 'sometimes'"), std::string::npos)
          << e.what();
    }
  }
  ScopedEnv tf("SLUICE_CUDA_TF_SMALL", "require");
  auto L = Mat::stencil(ctx, Stencil::d2p5, 65, 64);
  Vec lb(ctx, 65 * 64), lx(ctx, 65 * 64);
  set(lb, 1.0);
  try {
    (void)Ksp(L, {.type = KspType::tfqmr, .max_it = 20, .fixed_iterations = true}).solve(lb, lx);
    ADD_FAILURE() << "a 4160-point TFQMR block was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 4096"), std::string::npos) << e.what();
  }
}

SLUICE_INSTANTIATE_BACKENDS(CgSmallTest);

}  // namespace
}  // namespace sluice::test
