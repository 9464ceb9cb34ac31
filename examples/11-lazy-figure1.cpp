// Figure 1 of reference 001: where(x > y, 2x, sin y) + 1 as a lazy array program. The program is
// compiled once (one fused kernel), run on two pairs of buffers (the second run rebinds them in
// place), and checked against a plain loop.

#include <sluice/lazy.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  using namespace sluice;
  const std::int64_t n = 1 << 16;
  auto x = lazy::placeholder<double>("x", {n});
  auto y = lazy::placeholder<double>("y", {n});
  auto r = lazy::where(x > y, 2 * x, lazy::sin(y)) + 1;
  lazy::Program program = lazy::compile({r});

  Context ctx;
  std::vector<double> hx(n), hy(n), hr(n);
  for (std::int64_t i = 0; i < n; ++i) {
    hx[static_cast<std::size_t>(i)] = std::sin(0.001 * static_cast<double>(i));
    hy[static_cast<std::size_t>(i)] = std::cos(0.002 * static_cast<double>(i));
  }
  DeviceBuffer<double> dx(ctx, n), dy(ctx, n), out(ctx, n), dx2(ctx, n), dy2(ctx, n);
  copy(ctx, dx, hx);
  copy(ctx, dy, hy);
  copy(ctx, dx2, hy);  // the second run swaps the inputs
  copy(ctx, dy2, hx);

  int failures = 0;
  for (int run = 0; run < 2; ++run) {
    program.run(ctx, {{"x", run == 0 ? dx : dx2}, {"y", run == 0 ? dy : dy2}}, {out});
    copy(ctx, hr, out);
    ctx.synchronize();
    for (std::size_t i = 0; i < hr.size(); ++i) {
      const double a = run == 0 ? hx[i] : hy[i], b = run == 0 ? hy[i] : hx[i];
      const double expect = (a > b ? 2 * a : std::sin(b)) + 1;
      if (std::abs(hr[i] - expect) > 1e-14 * (1 + std::abs(expect))) ++failures;
    }
  }
  const auto s = program.stats();
  std::printf("figure 1: %zu kernel(s), %llu instantiation(s), %llu rebind(s), %s\n", s.kernels,
              static_cast<unsigned long long>(s.instantiations),
              static_cast<unsigned long long>(s.rebinds), failures == 0 ? "correct" : "WRONG");
  std::printf("%s", program.kernels().at(0).source.c_str());
  return failures == 0 && s.kernels == 1 && s.rebinds == 1 ? 0 : 1;
}
