// The DG-FEM 3D wave operator of reference 001 as a lazy program (examples/dg/dg_wave.hpp): a box
// of 3^3 cubes split into 6 tetrahedra each, degree 3. The right-hand side is checked against the
// same operator written as plain loops; then a low-storage RK4 loop (one compiled program per
// stage kind, rebound to alternating buffers) advances a standing wave, with the central flux
// (energy conserved to RK4's accuracy) and the upwind flux (energy decays), and the result is
// compared with the exact solution u = cos(sqrt(3) pi t) sin(pi x) sin(pi y) sin(pi z).

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "dg/dg_wave.hpp"

namespace {

using namespace sluice;
namespace L = sluice::lazy;

struct Result {
  double energy0 = 0, energy1 = 0, error = 0;
};

Result advance(const Context& ctx, const dg::Reference& R, const dg::Mesh& m,
               const dg::Operators& ops, dg::Flux flux, double t_end) {
  const std::int64_t E = m.E, Np = R.Np;
  const double h = 1.0 / m.n;
  const int steps = static_cast<int>(std::ceil(t_end / (0.15 * h / (R.p * R.p))));
  const double dt = t_end / steps;
  // One stage: res = a res + dt rhs(q); q = q + b res (for u and v).
  auto u = L::placeholder<double>("u", {E, Np});
  auto v = L::placeholder<double>("v", {3, E, Np});
  auto ru = L::placeholder<double>("ru", {E, Np});
  auto rv = L::placeholder<double>("rv", {3, E, Np});
  auto a = L::placeholder<double>("a", {});
  auto b = L::placeholder<double>("b", {});
  const auto r = dg::rhs(ops, u, v, flux);
  auto ru2 = a * ru + dt * r.du;
  auto rv2 = a * rv + dt * r.dv;
  L::Program stage = L::compile(std::make_tuple(u + b * ru2, v + b * rv2, ru2, rv2),
                                {.device = ctx.device(), .name = "rk stage"});

  const auto n = static_cast<std::size_t>(E * Np);
  std::vector<double> hu(n), hv(3 * n, 0.0), zero(3 * n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const double* x = &m.x[3 * i];
    hu[i] = std::sin(M_PI * x[0]) * std::sin(M_PI * x[1]) * std::sin(M_PI * x[2]);
  }
  DeviceBuffer<double> U[2] = {{ctx, n}, {ctx, n}}, V[2] = {{ctx, 3 * n}, {ctx, 3 * n}},
                       RU[2] = {{ctx, n}, {ctx, n}}, RV[2] = {{ctx, 3 * n}, {ctx, 3 * n}};
  copy(ctx, U[0], hu);
  copy(ctx, V[0], hv);
  copy(ctx, RU[0], std::span(zero.data(), n));
  copy(ctx, RV[0], zero);
  std::vector<Managed<double>> A, B;
  for (int s = 0; s < 5; ++s) {
    A.emplace_back(dg::rk4a[s], ctx);
    B.emplace_back(dg::rk4b[s], ctx);
  }
  ctx.synchronize();
  Result res;
  res.energy0 = dg::energy(R, m, hu.data(), hv.data());
  int cur = 0;
  for (int step = 0; step < steps; ++step) {
    for (int s = 0; s < 5; ++s) {
      const int nxt = 1 - cur;
      stage.run(ctx,
                {{"u", U[cur]},
                 {"v", V[cur]},
                 {"ru", RU[cur]},
                 {"rv", RV[cur]},
                 {"a", A[static_cast<std::size_t>(s)]},
                 {"b", B[static_cast<std::size_t>(s)]}},
                {U[nxt], V[nxt], RU[nxt], RV[nxt]});
      cur = nxt;
    }
  }
  copy(ctx, hu, U[cur]);
  copy(ctx, hv, V[cur]);
  ctx.synchronize();
  res.energy1 = dg::energy(R, m, hu.data(), hv.data());
  const double c = std::cos(std::sqrt(3.0) * M_PI * t_end);
  for (std::size_t i = 0; i < n; ++i) {
    const double* x = &m.x[3 * i];
    const double exact = c * std::sin(M_PI * x[0]) * std::sin(M_PI * x[1]) * std::sin(M_PI * x[2]);
    res.error = std::max(res.error, std::abs(hu[i] - exact));
  }
  const auto st = stage.stats();
  std::printf(
      "  %s flux: %d steps of %.4g, %zu kernels (%zu graph nodes, up to %zu at once), "
      "%llu rebinds; energy %.10f -> %.10f, max error %.3g\n",
      flux == dg::Flux::central ? "central" : "upwind", steps, dt, st.kernels, st.graph_nodes,
      st.concurrency, static_cast<unsigned long long>(st.rebinds), res.energy0, res.energy1,
      res.error);
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  Context ctx;
  const int p = argc > 1 ? std::atoi(argv[1]) : 3, cubes = argc > 2 ? std::atoi(argv[2]) : 3;
  const auto R = dg::make_reference(p);
  const auto m = dg::make_mesh(R, cubes);
  const auto ops = dg::operators(ctx, R, m);
  std::printf("DG wave: p = %d (Np = %d, Nfp = %d), %lld tetrahedra on %s\n", p, R.Np, R.Nfp,
              static_cast<long long>(m.E), ctx.device().to_string().c_str());
  int failures = 0;

  // The lazy right-hand side against the plain loops, in every fusion mode.
  const std::size_t n = static_cast<std::size_t>(m.E * R.Np);
  std::vector<double> hu(n), hv(3 * n);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> dist(-1, 1);
  for (auto& x : hu) x = dist(rng);
  for (auto& x : hv) x = dist(rng);
  DeviceBuffer<double> du(ctx, n), dv(ctx, 3 * n), out_u(ctx, n), out_v(ctx, 3 * n);
  copy(ctx, du, hu);
  copy(ctx, dv, hv);
  auto u = L::placeholder<double>("u", {m.E, R.Np});
  auto v = L::placeholder<double>("v", {3, m.E, R.Np});
  for (auto flux : {dg::Flux::central, dg::Flux::upwind}) {
    std::vector<double> eu(n), ev(3 * n), gu(n), gv(3 * n);
    dg::rhs_loops(R, m, hu.data(), hv.data(), eu.data(), ev.data(), flux);
    double scale = 0;
    for (double x : eu) scale = std::max(scale, std::abs(x));
    for (auto fusion : {L::Fusion::none, L::Fusion::elementwise, L::Fusion::full}) {
      const auto r = dg::rhs(ops, u, v, flux);
      L::Program prog =
          L::compile(std::make_tuple(r.du, r.dv), {.fusion = fusion, .device = ctx.device()});
      prog.run(ctx, {{"u", du}, {"v", dv}}, {out_u, out_v});
      copy(ctx, gu, out_u);
      copy(ctx, gv, out_v);
      ctx.synchronize();
      double err = 0;
      for (std::size_t i = 0; i < n; ++i) err = std::max(err, std::abs(gu[i] - eu[i]));
      for (std::size_t i = 0; i < 3 * n; ++i) err = std::max(err, std::abs(gv[i] - ev[i]));
      const bool ok = err <= 1e-11 * scale;
      failures += !ok;
      std::printf(
          "  rhs (%s flux, fusion %d): %zu kernels, %zu BLAS, max |lazy - loops| = %.3g "
          "(of %.3g) %s\n",
          flux == dg::Flux::central ? "central" : "upwind", static_cast<int>(fusion),
          prog.stats().kernels, prog.stats().blas, err, scale, ok ? "ok" : "WRONG");
    }
  }

  // Time loops: energy behaviour and accuracy.
  const double t_end = 0.2;
  const auto central = advance(ctx, R, m, ops, dg::Flux::central, t_end);
  const auto upwind = advance(ctx, R, m, ops, dg::Flux::upwind, t_end);
  const double drift = std::abs(central.energy1 - central.energy0) / central.energy0;
  const bool energy_ok = drift < 1e-6 && upwind.energy1 < upwind.energy0 * (1 - 1e-6) &&
                         upwind.energy1 < central.energy1;
  const bool accurate = central.error < 2e-2 && upwind.error < 2e-2;  // h = 1/3, p = 3
  std::printf("central: relative energy change %.2e; upwind: %.2e; %s, %s\n", drift,
              (upwind.energy1 - upwind.energy0) / upwind.energy0,
              energy_ok ? "energy as expected" : "ENERGY WRONG",
              accurate ? "close to the exact solution" : "INACCURATE");
  failures += !energy_ok + !accurate;
  return failures == 0 ? 0 : 1;
}
