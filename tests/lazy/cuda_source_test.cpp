// The CUDA dialect of generated programs compiles with NVRTC (no GPU needed): random programs in
// every fusion mode, debug checks included, and the DG-like einsum kernels. Running them is the
// backend suites' job (Backends/Lazy*/cuda, on a machine with a GPU).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lazy/generator.hpp"
#include "lazy/source.hpp"
#include "sluice/kernel.hpp"

namespace sluice::test {
namespace {

void expect_compiles(const std::vector<L::Array<double>>& outputs, const L::Options& o) {
  std::vector<L::detail::NodePtr> nodes;
  for (const auto& a : outputs) nodes.push_back(a.node());
  const auto g = L::detail::generate_source(nodes, o, LazyDialect::cuda);
  if (g.kernels.empty()) return;
  const std::vector<std::string> options{"-std=c++17"};
  try {
    (void)kernel_cache::compile(g.source, g.kernels.front(), options, 90);
  } catch (const Error& e) {
    FAIL() << e.what() << "\n" << g.source;
  }
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
      if (HasFatalFailure()) return;
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

}  // namespace
}  // namespace sluice::test
