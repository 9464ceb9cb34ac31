// A wide DAG: W independent branches, each a matrix product einsum("ij,ej->ei", M, X_i), then
// tanh(y) * X_i + 1 summed over the second axis, and all branches summed. By default the
// branches are fused horizontally: one batched BLAS call for every branch's product and one
// kernel for every branch's row sum. Without that (Options::horizontal = false), the dataflow
// schedule makes the branches independent nodes of one graph that run concurrently, with no
// stream in user code, and the serial schedule chains them. Checked against plain loops.

#include <sluice/lazy.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

int main() {
  using namespace sluice;
  namespace L = sluice::lazy;
  const int W = 8;
  const std::int64_t n = 64, e = 512;
  auto M = L::placeholder<double>("M", {n, n});
  std::vector<L::Array<double>> X;
  L::Array<double> total;
  for (int i = 0; i < W; ++i) {
    X.push_back(L::placeholder<double>("X" + std::to_string(i), {e, n}));
    auto y = L::einsum("ij,ej->ei", M, X.back());
    auto branch = L::sum(L::tanh(y) * X.back() + 1.0, 1);
    total = i == 0 ? branch : total + branch;
  }
  Context ctx;
  std::vector<double> hM(static_cast<std::size_t>(n * n));
  for (std::size_t k = 0; k < hM.size(); ++k) hM[k] = std::sin(0.1 * static_cast<double>(k)) / 8;
  std::vector<std::vector<double>> hX(W, std::vector<double>(static_cast<std::size_t>(e * n)));
  DeviceBuffer<double> dM(ctx, hM.size()), out(ctx, static_cast<std::size_t>(e));
  copy(ctx, dM, hM);
  std::vector<DeviceBuffer<double>> dX;
  std::vector<std::string> names;  // inputs name placeholders by views of these
  std::vector<L::Input> inputs{{"M", dM}};
  for (int i = 0; i < W; ++i) {
    for (std::size_t k = 0; k < hX[static_cast<std::size_t>(i)].size(); ++k) {
      hX[static_cast<std::size_t>(i)][k] = std::cos(0.01 * static_cast<double>(k) + i);
    }
    dX.emplace_back(ctx, hX[static_cast<std::size_t>(i)].size());
    copy(ctx, dX.back(), hX[static_cast<std::size_t>(i)]);
  }
  for (int i = 0; i < W; ++i) names.push_back("X" + std::to_string(i));
  for (int i = 0; i < W; ++i)
    inputs.emplace_back(names[static_cast<std::size_t>(i)], dX[static_cast<std::size_t>(i)]);
  ctx.synchronize();

  // The expected result, by loops.
  std::vector<double> expect(static_cast<std::size_t>(e), 0.0);
  for (int i = 0; i < W; ++i) {
    const auto& x = hX[static_cast<std::size_t>(i)];
    for (std::int64_t r = 0; r < e; ++r) {
      for (std::int64_t a = 0; a < n; ++a) {
        double y = 0;
        for (std::int64_t b = 0; b < n; ++b) {
          y += hM[static_cast<std::size_t>(a * n + b)] * x[static_cast<std::size_t>(r * n + b)];
        }
        expect[static_cast<std::size_t>(r)] +=
            std::tanh(y) * x[static_cast<std::size_t>(r * n + a)] + 1.0;
      }
    }
  }
  int failures = 0;
  struct Mode {
    const char* name;
    L::Schedule schedule;
    bool horizontal;
  };
  for (const Mode& m : {Mode{"horizontal", L::Schedule::dataflow, true},
                        Mode{"dataflow  ", L::Schedule::dataflow, false},
                        Mode{"serial    ", L::Schedule::serial, false}}) {
    L::Program p = L::compile(
        {total}, {.schedule = m.schedule, .device = ctx.device(), .horizontal = m.horizontal});
    p.run(ctx, inputs, {out});
    ctx.synchronize();
    const auto start = std::chrono::steady_clock::now();
    const int reps = 20;
    for (int r = 0; r < reps; ++r) p.run(ctx, inputs, {out});
    ctx.synchronize();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count() /
        reps;
    std::vector<double> got(static_cast<std::size_t>(e));
    copy(ctx, got, out);
    ctx.synchronize();
    double err = 0;
    for (std::size_t k = 0; k < got.size(); ++k) err = std::max(err, std::abs(got[k] - expect[k]));
    const auto s = p.stats();
    std::printf(
        "%s: %zu kernels + %zu BLAS, up to %zu at once, %zu temporaries; %.3f ms per run; "
        "max error %.2e\n",
        m.name, s.kernels, s.blas, s.concurrency, s.temporaries, ms, err);
    failures += err > 1e-9 * W * n;
    if (m.horizontal) {
      failures += s.merged_kernels < static_cast<std::size_t>(W);  // the row sums at least
    } else if (m.schedule == L::Schedule::dataflow) {
      failures += s.concurrency != static_cast<std::size_t>(W);
    }
  }
  return failures == 0 ? 0 : 1;
}
