// Where an einsum sums a letter under which an operand is broadcast (Options::broadcast_sum):
// the DG gradient einsum("xrej,rij,ej->xei") sums S·u early (an intermediate kernel) or late (one
// loop nest), automatic choosing by the cost model (late up to Np = 16), and every choice equal
// to plain loops on every backend.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend_param.hpp"
#include "sluice/lazy.hpp"

namespace sluice::test {
namespace {

namespace L = sluice::lazy;

class LazyContraction : public BackendTest {
 public:
  [[nodiscard]] const Device& dev() const { return device(); }
};

std::size_t at(std::int64_t v) {
  return static_cast<std::size_t>(v);
}

void check_gradient(LazyContraction& t, const Context& ctx, std::int64_t np, L::BroadcastSum mode,
                    std::size_t expect_kernels) {
  const std::int64_t e = 7;
  auto ijm = L::placeholder<double>("ijm", {3, 3, e, 1});
  auto S = L::placeholder<double>("S", {3, np, np});
  auto u = L::placeholder<double>("u", {e, np});
  L::Options o;
  o.device = t.dev();
  o.tune = L::Tune::off;
  o.broadcast_sum = mode;
  o.binding = L::Binding::arguments;  // the count below is of kernels and products alone
  L::Program p = L::compile({L::einsum("xrej,rij,ej->xei", ijm, S, u)}, o);
  EXPECT_EQ(p.stats().kernels + p.stats().blas, expect_kernels)
      << "Np = " << np << ", mode " << static_cast<int>(mode) << "\n"
      << p.dot();
  auto fill = [](std::size_t n, double s) {
    std::vector<double> h(n);
    for (std::size_t i = 0; i < n; ++i) h[i] = std::sin(s * static_cast<double>(i + 1));
    return h;
  };
  const auto hj = fill(at(9 * e), 0.37), hs = fill(at(3 * np * np), 0.11),
             hu = fill(at(e * np), 0.23);
  DeviceBuffer<double> dj(ctx, hj.size()), ds(ctx, hs.size()), du(ctx, hu.size()),
      out(ctx, at(3 * e * np));
  copy(ctx, dj, hj);
  copy(ctx, ds, hs);
  copy(ctx, du, hu);
  p.run(ctx, {{"ijm", dj}, {"S", ds}, {"u", du}}, {out});
  std::vector<double> got(out.size());
  copy(ctx, got, out);
  ctx.synchronize();
  for (std::int64_t x = 0; x < 3; ++x) {
    for (std::int64_t k = 0; k < e; ++k) {
      for (std::int64_t i = 0; i < np; ++i) {
        double want = 0;
        for (std::int64_t r = 0; r < 3; ++r) {
          for (std::int64_t j = 0; j < np; ++j) {
            want +=
                hj[at((x * 3 + r) * e + k)] * hs[at((r * np + i) * np + j)] * hu[at(k * np + j)];
          }
        }
        ASSERT_NEAR(got[at((x * e + k) * np + i)], want, 1e-12)
            << "Np = " << np << " x " << x << " e " << k << " i " << i;
      }
    }
  }
}

TEST_P(LazyContraction, DgGradientSumsBroadcastsLateForSmallNpAndEarlyForLarge) {
  Context ctx = make_context();
  // Np of p = 1..4: late (one kernel) up to Np = 16, early (S·u, then the sum over r) beyond.
  check_gradient(*this, ctx, 4, L::BroadcastSum::automatic, 1);
  check_gradient(*this, ctx, 10, L::BroadcastSum::automatic, 1);
  check_gradient(*this, ctx, 20, L::BroadcastSum::automatic, 2);
  check_gradient(*this, ctx, 35, L::BroadcastSum::automatic, 2);
}

TEST_P(LazyContraction, ForcedOrdersMatchLoops) {
  Context ctx = make_context();
  for (std::int64_t np : {4, 20}) {
    check_gradient(*this, ctx, np, L::BroadcastSum::early, 2);
    check_gradient(*this, ctx, np, L::BroadcastSum::late, 1);
  }
}

SLUICE_INSTANTIATE_BACKENDS(LazyContraction);

}  // namespace
}  // namespace sluice::test
