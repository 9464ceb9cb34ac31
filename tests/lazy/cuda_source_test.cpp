// The CUDA dialect of generated programs compiles with NVRTC (no GPU needed): random programs in
// every fusion mode, debug checks included, and the DG-like einsum kernels. Running them is the
// backend suites' job (Backends/Lazy*/cuda, on a machine with a GPU).

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "dg/dg_wave.hpp"
#include "lazy/codegen.hpp"
#include "lazy/cuda_shape.hpp"
#include "lazy/generator.hpp"
#include "lazy/source.hpp"
#include "lazy/tune.hpp"
#include "lazy/units.hpp"
#include "sluice/kernel.hpp"

namespace sluice::test {
namespace {

/// Compiles `source`, which defines `names`, with NVRTC as the cuda backend does: in chunks of
/// its units (lazy/units.hpp), each apart; every kernel lies in exactly one chunk.
void expect_chunks_compile(const std::string& source, const std::vector<std::string>& names) {
  const auto chunks = L::detail::module_chunks(source, names);
  std::vector<std::string> found;
  const std::vector<std::string> options{"-std=c++17"};
  for (const auto& c : chunks) {
    ASSERT_FALSE(c.names.empty());
    found.insert(found.end(), c.names.begin(), c.names.end());
    try {
      (void)kernel_cache::compile(c.source, c.names.front(), options, 90);
    } catch (const Error& e) {
      ADD_FAILURE() << e.what() << "\n" << c.source;
    }
  }
  EXPECT_EQ(found, names);
}

/// The DG right-hand side (upwind) at order p on a box of 4 cubes a side.
dg::Rhs dg_rhs_of(const Context& ctx, int p) {
  const auto R = dg::make_reference(p);
  const auto m = dg::make_mesh(R, 4);
  const auto ops = dg::operators(ctx, R, m);
  auto u = L::placeholder<double>("u", {m.E, R.Np});
  auto v = L::placeholder<double>("v", {3, m.E, R.Np});
  return dg::rhs(ops, u, v, dg::Flux::upwind);
}

/// Compiles the program's cuda source with NVRTC; returns the source.
std::string expect_compiles(const std::vector<L::Array<double>>& outputs, const L::Options& o) {
  std::vector<L::detail::NodePtr> nodes;
  for (const auto& a : outputs) nodes.push_back(a.node());
  const auto g = L::detail::generate_source(nodes, o, LazyDialect::cuda);
  if (g.kernels.empty()) return g.source;
  expect_chunks_compile(g.source, g.kernels);
  return g.source;
}

TEST(LazyCudaSource, RandomProgramsCompileWithNvrtc) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    Generator gen(seed);
    const auto outs = gen.program(14, 3);
    std::vector<L::Array<double>> arrays;
    for (const auto& v : outs) arrays.push_back(v.a);
    for (auto f : {L::Fusion::none, L::Fusion::elementwise, L::Fusion::full}) {
      L::Options o;
      o.fusion = f;
      o.debug = seed % 2 == 0;
      SCOPED_TRACE("seed " + std::to_string(seed));
      expect_compiles(arrays, o);
      if (HasFailure()) return;
    }
  }
}

TEST(LazyCudaSource, EinsumWithEpilogueCompiles) {
  auto ijm = L::placeholder<double>("ijm", {3, 3, 100, 10});
  auto S = L::placeholder<double>("S", {3, 10, 10});
  auto u = L::placeholder<double>("u", {100, 10});
  auto g = L::einsum("xrej,rij,ej->xei", ijm, S, u);
  auto r = L::tanh(g) * 2.0 + 1.0;
  expect_compiles({r, L::sum(r, {0, 2})}, {});
}

// The shapes of cuda_shape.hpp at the sizes that choose them: staged operators (the DG einsums at
// p = 1 and 4, the wide DAG's product) and lanes sharing an output (the wide DAG's row sum).
TEST(LazyCudaSource, StagedAndGroupedKernelsCompile) {
  for (std::int64_t np : {4, 35}) {
    const std::int64_t nfp = np == 4 ? 3 : 15, e = 3000;
    auto ijm = L::placeholder<double>("ijm", {3, 3, e, 1});
    auto S = L::placeholder<double>("S", {3, np, np});
    auto u = L::placeholder<double>("u", {e, np});
    auto Lf = L::placeholder<double>("L", {np, 4, nfp});
    auto sJ = L::placeholder<double>("sJ", {4, e, nfp});
    auto F = L::placeholder<double>("F", {4, e, nfp});
    auto Mi = L::placeholder<double>("Mi", {np, np});
    auto Ji = L::placeholder<double>("Ji", {e, np});
    auto grad = L::einsum("xrej,rij,ej->xei", ijm, S, u);
    auto lift = L::einsum("ifj,fej,fej->ei", Lf, sJ, F);
    auto rhs = L::einsum("ei,ij,ej->ei", Ji, Mi, lift) - L::sum(grad, 0);
    SCOPED_TRACE("Np " + std::to_string(np));
    expect_compiles({grad, rhs}, {});
    expect_compiles({grad, rhs}, {.debug = true});
  }
  auto M = L::placeholder<double>("M", {64, 64});
  auto X = L::placeholder<double>("X", {16384, 64});
  auto y = L::einsum("ij,ej->ei", M, X);
  expect_compiles({L::sum(L::tanh(y) * X + 1.0, 1), L::max(X, 1)}, {});
}

// Horizontal kernels (Options::horizontal): the wide DAG's branches as one staged product kernel
// and one row sum with lanes per output, each over its members; copies of random programs in
// every shape, debug checks included; the operand table of a batched product.
TEST(LazyCudaSource, HorizontalKernelsCompile) {
  auto M = L::placeholder<double>("M", {64, 64});
  L::Array<double> total;
  for (int w = 0; w < 4; ++w) {
    auto X = L::placeholder<double>("X" + std::to_string(w), {16384, 64});
    auto r = L::sum(L::tanh(L::einsum("ij,ej->ei", M, X)) * X + 1.0, 1);
    total = w == 0 ? r : total + r;
  }
  for (const bool debug : {false, true}) {
    const auto src = expect_compiles({total}, {.debug = debug});
    EXPECT_NE(src.find("sl_k0_one("), std::string::npos) << src;
    EXPECT_NE(src.find("__shared__"), std::string::npos) << src;
    EXPECT_NE(src.find("__shfl_down_sync"), std::string::npos) << src;
  }
  struct Force {
    L::detail::CudaShapeRules saved = L::detail::cuda_shape_rules();
    Force() {
      auto& r = L::detail::cuda_shape_rules();
      r.stage_reuse = 0;
      r.group_terms = 2;
      r.force_group = true;
    }
    ~Force() { L::detail::cuda_shape_rules() = saved; }
  } force;
  int horizontal = 0;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    std::vector<L::Array<double>> arrays;
    for (int c = 0; c < 3; ++c) {
      Generator gen(seed, "c" + std::to_string(c) + "_", seed);
      for (const auto& v : gen.program(10, 2)) arrays.push_back(v.a);
    }
    SCOPED_TRACE("seed " + std::to_string(seed));
    const auto src = expect_compiles(arrays, {.debug = seed % 2 == 0});
    if (HasFailure()) return;
    horizontal += src.find("_one(") != std::string::npos;
  }
  EXPECT_GT(horizontal, 0);
  const auto table = L::detail::emit_table(0, 12, LazyDialect::cuda);
  const std::vector<std::string> options{"-std=c++17"};
  try {
    (void)kernel_cache::compile(L::detail::prelude(LazyDialect::cuda) + table.text, table.name,
                                options, 90);
  } catch (const Error& e) {
    ADD_FAILURE() << e.what() << "\n" << table.text;
  }
}

TEST(LazyCudaSource, RandomProgramsCompileInEveryCudaShape) {
  struct Force {
    L::detail::CudaShapeRules saved = L::detail::cuda_shape_rules();
    Force() {
      auto& r = L::detail::cuda_shape_rules();
      r.stage_reuse = 0;
      r.group_terms = 2;
      r.force_group = true;
    }
    ~Force() { L::detail::cuda_shape_rules() = saved; }
  } force;
  int staged = 0, shared = 0;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    Generator gen(seed);
    const auto outs = gen.program(14, 3);
    std::vector<L::Array<double>> arrays;
    for (const auto& v : outs) arrays.push_back(v.a);
    L::Options o;
    o.debug = seed % 2 == 0;
    SCOPED_TRACE("seed " + std::to_string(seed));
    const auto src = expect_compiles(arrays, o);
    if (HasFailure()) return;
    staged += src.find("__shared__") != std::string::npos;
    shared += src.find("__shfl_down_sync") != std::string::npos;
  }
  // The forced shapes did appear.
  EXPECT_GT(staged, 0);
  EXPECT_GT(shared, 0);
}

// Register tiles (Options::tile): the DG right-hand side at p = 1..4 as the cuda plan forms it
// with tiles (auto: fluxes and `div - lift` fused into tiled reductions) and without (off), and
// random programs with every eligible reduction tiled (staged operands forced too, debug checks
// on half of them), compile with NVRTC; the tiled shapes appear.
TEST(LazyCudaSource, TiledKernelsCompile) {
  Context ctx;
  for (int p = 1; p <= 4; ++p) {
    SCOPED_TRACE("p = " + std::to_string(p));
    const auto r = dg_rhs_of(ctx, p);
    const auto tiled = expect_compiles({r.du, r.dv}, {.tile = L::Tile::automatic});
    const auto untiled = expect_compiles({r.du, r.dv}, {.tile = L::Tile::off});
    if (HasFailure()) return;
    EXPECT_NE(tiled.find("+tile"), std::string::npos) << tiled;
    EXPECT_EQ(untiled.find("tile"), std::string::npos);
  }
  struct Force {
    L::detail::CudaShapeRules saved = L::detail::cuda_shape_rules();
    Force() { L::detail::cuda_shape_rules().stage_reuse = 0; }
    ~Force() { L::detail::cuda_shape_rules() = saved; }
  } force;
  int tiles = 0;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    Generator gen(seed);
    std::vector<L::Array<double>> arrays;
    for (const auto& o : gen.program(14, 3)) arrays.push_back(o.a);
    SCOPED_TRACE("seed " + std::to_string(seed));
    const auto src = expect_compiles(arrays, {.debug = seed % 2 == 0, .tile = L::Tile::on});
    if (HasFailure()) return;
    tiles += src.find("tile") != std::string::npos;
  }
  EXPECT_GT(tiles, 0);
}

// Multi-output kernels (Options::multi_output): the DG right-hand side's face arrays at p = 1..4
// (one kernel of 4 outputs, two of them short reductions), and random programs with every
// reduction forced towards lanes and staging (a multi-output kernel keeps a thread per output),
// debug checks on half, compile with NVRTC.
TEST(LazyCudaSource, MultiOutputKernelsCompile) {
  Context ctx;
  for (int p = 1; p <= 4; ++p) {
    SCOPED_TRACE("p = " + std::to_string(p));
    const auto r = dg_rhs_of(ctx, p);
    const auto src = expect_compiles({r.du, r.dv}, {.debug = p % 2 == 0});
    const auto apart = expect_compiles({r.du, r.dv}, {.multi_output = false});
    if (HasFailure()) return;
    EXPECT_NE(src.find("out1[f] = acc1;"), std::string::npos) << src;
    EXPECT_NE(src.find("out3[f] = "), std::string::npos) << src;
    EXPECT_EQ(apart.find("out1[f]"), std::string::npos);
  }
  struct Force {
    L::detail::CudaShapeRules saved = L::detail::cuda_shape_rules();
    Force() {
      L::detail::cuda_shape_rules().stage_reuse = 0;
      L::detail::cuda_shape_rules().force_group = true;
    }
    ~Force() { L::detail::cuda_shape_rules() = saved; }
  } force;
  int merged = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    Generator gen(7000 + seed);
    std::vector<L::Array<double>> arrays;
    for (const auto& o : gen.program(12, 4)) arrays.push_back(o.a);
    SCOPED_TRACE("seed " + std::to_string(seed));
    const auto src = expect_compiles(arrays, {.debug = seed % 2 == 0});
    if (HasFailure()) return;
    merged += src.find("out1[f]") != std::string::npos;
  }
  EXPECT_GT(merged, 0);
}

// Every candidate shape that tuning would time (the DG einsums at p = 1..4, the wide DAG's
// branch) compiles with NVRTC in the one module a tuning request builds.
TEST(LazyCudaSource, EveryTuningCandidateCompiles) {
  std::string dir = ::testing::TempDir() + "sluice-tune-src";
  const auto old_dir = kernel_cache::directory();
  kernel_cache::set_directory(dir);
  L::detail::forget_tune_memory();
  std::vector<std::pair<std::string, std::vector<std::string>>> sources;  // source, kernels
  std::size_t candidates = 0;
  auto old = L::detail::set_tune_timer([&](const L::detail::TuneRequest& r) {
    sources.emplace_back(r.source, r.names);
    std::vector<std::vector<std::vector<double>>> out;
    for (const auto& g : r.groups) {
      candidates += g.codes.size();
      out.emplace_back(g.codes.size(), std::vector<double>{1.0});
    }
    return out;
  });
  auto outputs = [](std::int64_t np, std::int64_t e) {
    const std::int64_t nfp = np == 4 ? 3 : np == 10 ? 6 : np == 20 ? 10 : 15;
    auto ijm = L::placeholder<double>("ijm", {3, 3, e, 1});
    auto S = L::placeholder<double>("S", {3, np, np});
    auto u = L::placeholder<double>("u", {e, np});
    auto Lf = L::placeholder<double>("L", {np, 4, nfp});
    auto sJ = L::placeholder<double>("sJ", {4, e, nfp});
    auto F = L::placeholder<double>("F", {4, e, nfp});
    auto Mi = L::placeholder<double>("Mi", {np, np});
    auto Ji = L::placeholder<double>("Ji", {e, np});
    auto grad = L::einsum("xrej,rij,ej->xei", ijm, S, u);
    auto lift = L::einsum("ifj,fej,fej->ei", Lf, sJ, F);
    return std::vector<L::detail::NodePtr>{
        grad.node(), (L::einsum("ei,ij,ej->ei", Ji, Mi, lift) - L::sum(grad, 0)).node()};
  };
  for (std::int64_t np : {4, 10, 20, 35}) {
    (void)L::detail::tune_source(outputs(np, 3000), {.tune = L::Tune::on}, "NVRTC");
  }
  auto M = L::placeholder<double>("M", {64, 64});
  auto X = L::placeholder<double>("X", {16384, 64});
  auto y = L::einsum("ij,ej->ei", M, X);
  (void)L::detail::tune_source({L::sum(L::tanh(y) * X + 1.0, 1).node()}, {.tune = L::Tune::on},
                               "NVRTC");
  L::detail::set_tune_timer(old);
  L::detail::forget_tune_memory();
  kernel_cache::set_directory(old_dir);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(sources.size(), 5u);
  EXPECT_GT(candidates, 10u);
  for (const auto& [s, names] : sources) {
    // A request of 6 kernels or more (the DG right-hand side's: 36 to 44) compiles in chunks.
    if (names.size() >= 6) {
      EXPECT_GT(L::detail::module_chunks(s, names).size(), 1u);
    }
    expect_chunks_compile(s, names);
  }
}

}  // namespace
}  // namespace sluice::test
