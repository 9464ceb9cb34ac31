// The shapes of generated cuda reductions (src/lazy/cuda_shape.hpp): which kernels stage their
// operator in shared memory and which share an output between lanes, chosen from the shapes
// (checked on the generated source, every build), and the results of those kernels against
// plain loops on every backend (on cuda they run the new shapes; on the host the same programs).

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend_param.hpp"
#include "lazy/source.hpp"
#include "sluice/lazy.hpp"

namespace sluice::test {
namespace {

namespace L = sluice::lazy;

std::string cuda_source(const std::vector<L::Array<double>>& outputs) {
  std::vector<L::detail::NodePtr> nodes;
  for (const auto& a : outputs) nodes.push_back(a.node());
  return L::detail::generate_source(nodes, {}, LazyDialect::cuda).source;
}

bool has(const std::string& s, const char* what) {
  return s.find(what) != std::string::npos;
}

TEST(LazyCudaShapes, SmallOperatorsOfEinsumsAreStagedInSharedMemory) {
  // The DG gradient's S·u at p = 4 (Np = 35) and the wide DAG's branch product.
  auto S = L::placeholder<double>("S", {3, 35, 35});
  auto u = L::placeholder<double>("u", {4000, 35});
  const auto dg = cuda_source({L::einsum("rij,ej->rei", S, u)});
  EXPECT_TRUE(has(dg, "__shared__ double sh2[4096]")) << dg;  // S is read second
  // Consecutive outputs read u[e, j] at the same address: a thread each, not lanes.
  EXPECT_FALSE(has(dg, "__shfl_down_sync")) << dg;
  auto M = L::placeholder<double>("M", {64, 64});
  auto X = L::placeholder<double>("X", {16384, 64});
  const auto wide = cuda_source({L::einsum("ij,ej->ei", M, X)});
  EXPECT_TRUE(has(wide, "__shared__ double sh2[5120]")) << wide;  // M, 64 x 65 padded
  // Too few outputs for S to pay: read from global memory (u, the small one, is staged).
  auto few = L::placeholder<double>("few", {2, 35});
  const auto small = cuda_source({L::einsum("rij,ej->rei", S, few)});
  EXPECT_FALSE(has(small, "sh2[")) << small;
  // The host dialect is unchanged.
  std::vector<L::detail::NodePtr> nodes{L::einsum("ij,ej->ei", M, X).node()};
  EXPECT_FALSE(has(L::detail::generate_source(nodes, {}, LazyDialect::cpp).source, "sh1"));
}

TEST(LazyCudaShapes, LongReductionsAlongTheContiguousAxisShareAWarp) {
  auto y = L::placeholder<double>("y", {16384, 64});
  const auto rows = cuda_source({L::sum(L::tanh(y) * y + 1.0, 1)});
  EXPECT_TRUE(has(rows, "__shfl_down_sync(0xffffffffu, acc, o_, 32)")) << rows;
  // Along the outer axis consecutive outputs are contiguous already: a thread each.
  const auto cols = cuda_source({L::sum(y, 0)});
  EXPECT_FALSE(has(cols, "__shfl_down_sync")) << cols;
  // Short reductions keep a thread per output.
  auto z = L::placeholder<double>("z", {16384, 8});
  EXPECT_FALSE(has(cuda_source({L::max(z, 1)}), "__shfl_down_sync"));
}

class LazyShapes : public BackendTest {
 protected:
  std::vector<double> fill(std::size_t n, double s) {
    std::vector<double> h(n);
    for (std::size_t i = 0; i < n; ++i) h[i] = std::sin(s * static_cast<double>(i + 1));
    return h;
  }
  DeviceBuffer<double> upload(const Context& ctx, const std::vector<double>& h) {
    DeviceBuffer<double> d(ctx, h.size());
    copy(ctx, d, h);
    ctx.synchronize();
    return d;
  }
  std::vector<double> download(const Context& ctx, const DeviceBuffer<double>& d) {
    std::vector<double> h(d.size());
    copy(ctx, h, d);
    ctx.synchronize();
    return h;
  }
};

// The DG einsums (gradient, lifting, inverse mass with its epilogue) at Np = 20 (p = 3) on
// enough elements that the operators are staged, against plain loops.
TEST_P(LazyShapes, DgEinsumsMatchPlainLoops) {
  Context ctx = make_context();
  const std::int64_t E = 1500, Np = 20, Nfp = 10, F = 4;
  auto S = L::placeholder<double>("S", {3, Np, Np});
  auto u = L::placeholder<double>("u", {E, Np});
  auto Lf = L::placeholder<double>("L", {Np, F, Nfp});
  auto sJ = L::placeholder<double>("sJ", {F, E, Nfp});
  auto Fl = L::placeholder<double>("F", {F, E, Nfp});
  auto Mi = L::placeholder<double>("Mi", {Np, Np});
  auto Ji = L::placeholder<double>("Ji", {E, Np});
  auto grad = L::einsum("rij,ej->rei", S, u);
  auto lift = L::einsum("ifj,fej,fej->ei", Lf, sJ, Fl);
  auto mass = L::einsum("ei,ij,ej->ei", Ji, Mi, lift);
  L::Program p = L::compile({grad, mass}, {.device = device()});
  const auto hS = fill(3 * Np * Np, 0.3), hu = fill(E * Np, 0.7), hL = fill(Np * F * Nfp, 1.1),
             hsJ = fill(F * E * Nfp, 0.13), hF = fill(F * E * Nfp, 0.29), hM = fill(Np * Np, 0.5),
             hJ = fill(E * Np, 0.9);
  auto dS = upload(ctx, hS), du = upload(ctx, hu), dL = upload(ctx, hL), dsJ = upload(ctx, hsJ),
       dF = upload(ctx, hF), dM = upload(ctx, hM), dJ = upload(ctx, hJ);
  DeviceBuffer<double> og(ctx, 3 * E * Np), om(ctx, E * Np);
  p.run(ctx, {{"S", dS}, {"u", du}, {"L", dL}, {"sJ", dsJ}, {"F", dF}, {"Mi", dM}, {"Ji", dJ}},
        {og, om});
  const auto g = download(ctx, og), m = download(ctx, om);
  auto at = [](const std::vector<double>& v, std::int64_t i) {
    return v[static_cast<std::size_t>(i)];
  };
  for (std::int64_t e = 0; e < E; ++e) {
    std::vector<double> l(static_cast<std::size_t>(Np));
    for (std::int64_t i = 0; i < Np; ++i) {
      for (std::int64_t r = 0; r < 3; ++r) {
        double s = 0;
        for (std::int64_t j = 0; j < Np; ++j)
          s += at(hS, (r * Np + i) * Np + j) * at(hu, e * Np + j);
        ASSERT_NEAR(at(g, (r * E + e) * Np + i), s, 1e-12) << r << " " << e << " " << i;
      }
      double s = 0;
      for (std::int64_t f = 0; f < F; ++f) {
        for (std::int64_t j = 0; j < Nfp; ++j) {
          s += at(hL, (i * F + f) * Nfp + j) * at(hsJ, (f * E + e) * Nfp + j) *
               at(hF, (f * E + e) * Nfp + j);
        }
      }
      l[static_cast<std::size_t>(i)] = s;
    }
    for (std::int64_t i = 0; i < Np; ++i) {
      double s = 0;
      for (std::int64_t j = 0; j < Np; ++j)
        s += at(hM, i * Np + j) * l[static_cast<std::size_t>(j)];
      ASSERT_NEAR(at(m, e * Np + i), at(hJ, e * Np + i) * s, 1e-11) << e << " " << i;
    }
  }
}

// The wide DAG's branch (a staged 64 x 64 operator, then a row sum shared by lanes), with rows
// that are not a multiple of the lanes per warp.
TEST_P(LazyShapes, WideBranchMatchesPlainLoops) {
  Context ctx = make_context();
  const std::int64_t e = 3001, n = 64;
  auto M = L::placeholder<double>("M", {n, n});
  auto X = L::placeholder<double>("X", {e, n});
  auto y = L::einsum("ij,ej->ei", M, X);
  auto r = L::sum(L::tanh(y) * X + 1.0, 1);
  auto mx = L::max(X, 1);
  // Generated kernels on cuda too (the product would be cuBLAS's there: tests/lazy/blas_test.cpp).
  L::Program p = L::compile({r, mx}, {.device = device(), .gemm = L::Gemm::generated});
  const auto hM = fill(n * n, 0.37), hX = fill(e * n, 0.11);
  auto dM = upload(ctx, hM), dX = upload(ctx, hX);
  DeviceBuffer<double> o(ctx, e), om(ctx, e);
  p.run(ctx, {{"M", dM}, {"X", dX}}, {o, om});
  const auto got = download(ctx, o), gotm = download(ctx, om);
  for (std::int64_t q = 0; q < e; ++q) {
    double s = 0, best = -INFINITY;
    for (std::int64_t i = 0; i < n; ++i) {
      double yi = 0;
      for (std::int64_t j = 0; j < n; ++j) {
        yi += hM[static_cast<std::size_t>(i * n + j)] * hX[static_cast<std::size_t>(q * n + j)];
      }
      const double x = hX[static_cast<std::size_t>(q * n + i)];
      s += std::tanh(yi) * x + 1.0;
      best = std::max(best, x);
    }
    ASSERT_NEAR(got[static_cast<std::size_t>(q)], s, 1e-11) << q;
    ASSERT_EQ(gotm[static_cast<std::size_t>(q)], best) << q;
  }
}

SLUICE_INSTANTIATE_BACKENDS(LazyShapes);

}  // namespace
}  // namespace sluice::test
