// Register tiles of reductions (Options::tile): the DG right-hand side fused for tiles against
// its plain loops, an einsum with an epilogue at the tiled index and a last axis that is not a
// multiple of the tile, a tiled min, and SLUICE_LAZY_TILE. On every backend: cuda runs the tiled
// kernels; the host runs the kernels that fusing for tiles forms (Tile::on).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend_param.hpp"
#include "dg/dg_wave.hpp"
#include "sluice/lazy.hpp"

namespace sluice::test {
namespace {

namespace L = sluice::lazy;

class LazyTile : public BackendTest {
 public:
  static std::vector<double> fill(std::size_t n, double s) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(s * static_cast<double>(i + 1));
    return v;
  }
  static DeviceBuffer<double> upload(const Context& ctx, const std::vector<double>& h) {
    DeviceBuffer<double> d(ctx, h.size());
    copy(ctx, d, h);
    ctx.synchronize();
    return d;
  }
  static std::vector<double> download(const Context& ctx, const DeviceBuffer<double>& d) {
    std::vector<double> h(d.size());
    copy(ctx, h, d);
    ctx.synchronize();
    return h;
  }
};

// The whole DG right-hand side (upwind) with and without tiles against dg::rhs_loops: tiles fuse
// the face fluxes, the normals' product and `div - lift` into the reductions (fewer kernels).
TEST_P(LazyTile, DgRightHandSideMatchesPlainLoops) {
  Context ctx = make_context();
  // The host compiles each program with its C++ compiler: two degrees keep CI short.
  const std::vector<int> degrees =
      is_host() ? std::vector<int>{1, 3} : std::vector<int>{1, 2, 3, 4};
  for (int p : degrees) {
    SCOPED_TRACE("p = " + std::to_string(p));
    const auto R = dg::make_reference(p);
    const auto m = dg::make_mesh(R, 3);
    const auto ops = dg::operators(ctx, R, m);
    const auto n = static_cast<std::size_t>(m.E * R.Np);
    const auto hu = fill(n, 0.37), hv = fill(3 * n, 0.61);
    std::vector<double> eu(n), ev(3 * n);
    dg::rhs_loops(R, m, hu.data(), hv.data(), eu.data(), ev.data(), dg::Flux::upwind);
    auto du = upload(ctx, hu), dv = upload(ctx, hv);
    auto u = L::placeholder<double>("u", {m.E, R.Np});
    auto v = L::placeholder<double>("v", {3, m.E, R.Np});
    const auto r = dg::rhs(ops, u, v, dg::Flux::upwind);
    std::size_t kernels_off = 0;
    for (const L::Tile t : {L::Tile::off, L::Tile::on}) {
      const bool on = t == L::Tile::on;
      SCOPED_TRACE(on ? "tiles on" : "tiles off");
      L::Program prog =
          L::compile(std::make_tuple(r.du, r.dv), {.device = ctx.device(), .tile = t});
      DeviceBuffer<double> ou(ctx, n), ov(ctx, 3 * n);
      prog.run(ctx, {{"u", du}, {"v", dv}}, {ou, ov});
      const auto gu = download(ctx, ou), gv = download(ctx, ov);
      double scale = 1;
      for (double x : eu) scale = std::max(scale, std::abs(x));
      for (double x : ev) scale = std::max(scale, std::abs(x));
      for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(gu[i], eu[i], 1e-12 * scale) << i;
      for (std::size_t i = 0; i < 3 * n; ++i) ASSERT_NEAR(gv[i], ev[i], 1e-12 * scale) << i;
      const auto s = prog.stats();
      EXPECT_EQ(s.tile_mode, on ? "on" : "off");
      if (!on) {
        EXPECT_EQ(s.tiled_kernels, 0u);
        kernels_off = s.kernels;
      } else {
        EXPECT_GE(s.tiled_kernels, 5u);
        // p = 1: the face fluxes, the normals' product and both `div - lift` fuse into the
        // reductions, the divergence is one loop nest (15 kernels -> 10; the BLAS inverse mass of
        // the host is fused too).
        if (p == 1) {
          EXPECT_LT(s.kernels, kernels_off);
        }
        EXPECT_LE(s.kernels, kernels_off);
      }
    }
  }
}

// A product with an epilogue that reads the output's own index (the tiled axis) and a last axis
// of 11 (tiles of 6, the second one short); a min over the same terms is not tiled (its body
// reads one array, every load depends on the tiled axis: nothing to share).
TEST_P(LazyTile, EpilogueAndShortTileMatchPlainLoops) {
  Context ctx = make_context();
  const std::int64_t E = 301, N = 11, J = 9;
  auto M = L::placeholder<double>("M", {N, J});
  auto X = L::placeholder<double>("X", {E, J});
  auto Y = L::placeholder<double>("Y", {E, N});
  auto prod = L::einsum("ij,ej->ei", M, X) * Y + 1.0;
  auto low = L::min(L::reshape(M, {1, N, J}) + L::reshape(X, {E, 1, J}), 2);
  const auto hM = fill(static_cast<std::size_t>(N * J), 0.3),
             hX = fill(static_cast<std::size_t>(E * J), 0.7),
             hY = fill(static_cast<std::size_t>(E * N), 1.1);
  auto dM = upload(ctx, hM), dX = upload(ctx, hX), dY = upload(ctx, hY);
  for (const L::Tile t : {L::Tile::off, L::Tile::on}) {
    SCOPED_TRACE(t == L::Tile::on ? "tiles on" : "tiles off");
    L::Program p =
        L::compile({prod, low}, {.device = ctx.device(), .gemm = L::Gemm::generated, .tile = t});
    if (t == L::Tile::on) {
      EXPECT_EQ(p.stats().tiled_kernels, 1u);
    }
    DeviceBuffer<double> o1(ctx, static_cast<std::size_t>(E * N)),
        o2(ctx, static_cast<std::size_t>(E * N));
    p.run(ctx, {{"M", dM}, {"X", dX}, {"Y", dY}}, {o1, o2});
    const auto g1 = download(ctx, o1), g2 = download(ctx, o2);
    for (std::int64_t e = 0; e < E; ++e) {
      for (std::int64_t i = 0; i < N; ++i) {
        double s = 0, lo = 1e300;
        for (std::int64_t j = 0; j < J; ++j) {
          const double a = hM[static_cast<std::size_t>(i * J + j)];
          const double b = hX[static_cast<std::size_t>(e * J + j)];
          s += a * b;
          lo = std::min(lo, a + b);
        }
        const auto f = static_cast<std::size_t>(e * N + i);
        ASSERT_NEAR(g1[f], s * hY[f] + 1.0, 1e-12) << e << " " << i;
        ASSERT_EQ(g2[f], lo) << e << " " << i;
      }
    }
  }
}

TEST_P(LazyTile, TileModeFromTheEnvironment) {
  auto M = L::placeholder<double>("M", {4, 4});
  auto X = L::placeholder<double>("X", {16, 4});
  auto r = L::einsum("ij,ej->ei", M, X);
  const L::Options o{.device = device()};
  const char* old = std::getenv("SLUICE_LAZY_TILE");
  const std::string saved = old ? old : "";
  ::setenv("SLUICE_LAZY_TILE", "off", 1);
  EXPECT_EQ(L::compile({r}, o).stats().tile_mode, "off");
  EXPECT_EQ(L::compile({r}, o).stats().tiled_kernels, 0u);
  ::setenv("SLUICE_LAZY_TILE", "on", 1);
  EXPECT_EQ(L::compile({r}, o).stats().tile_mode, "on");
  ::setenv("SLUICE_LAZY_TILE", "auto", 1);
  EXPECT_EQ(L::compile({r}, o).stats().tile_mode, "auto");
  ::setenv("SLUICE_LAZY_TILE", "yes", 1);
  try {
    (void)L::compile({r}, o);
    ADD_FAILURE() << "an unknown SLUICE_LAZY_TILE was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("auto, off or on"), std::string::npos) << e.what();
  }
  if (old != nullptr) {
    ::setenv("SLUICE_LAZY_TILE", saved.c_str(), 1);
  } else {
    ::unsetenv("SLUICE_LAZY_TILE");
  }
}

SLUICE_INSTANTIATE_BACKENDS(LazyTile);

}  // namespace
}  // namespace sluice::test
