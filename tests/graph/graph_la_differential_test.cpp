// Invariant 6 (DESIGN.md) for the la layer: randomized programs of vector and matrix operations,
// reductions into Managed scalars and expressions of them, over two contexts with cross-context
// waits and the tracker's own ordering, give bit for bit the same results run eagerly as captured
// once and launched again and again (the graph relaunched on the context it was captured from).

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend_param.hpp"
#include "sluice/graph.hpp"
#include "sluice/la.hpp"

namespace sluice::test {
namespace {

using namespace sluice::la;  // NOLINT: the layer under test

constexpr int kVecs = 4;
constexpr int kScalars = 2;
constexpr std::int64_t kNx = 20, kNy = 10;
constexpr std::size_t kRows = kNx * kNy;

struct Op {
  int kind, ctx, ctx2, a, b, c, s;
  double alpha;
};

std::vector<Op> random_program(std::uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  std::uniform_real_distribution<double> unit(-1, 1);
  std::vector<Op> ops;
  for (int i = 0; i < count; ++i) {
    Op o{};
    o.kind = pick(9);
    o.ctx = pick(2);
    o.ctx2 = 1 - o.ctx;
    o.a = pick(kVecs);
    o.b = (o.a + 1 + pick(kVecs - 1)) % kVecs;  // another vector than a
    o.c = pick(kVecs);
    o.s = pick(kScalars);
    o.alpha = unit(rng);
    ops.push_back(o);
  }
  return ops;
}

/// The vectors and scalars a program works on, with the same initial values every time.
struct State {
  std::vector<Vec> v;
  std::vector<Managed<double>> m;

  State(const Context& ctx, std::uint64_t seed) {
    for (int i = 0; i < kVecs; ++i) v.emplace_back(ctx, kRows);
    for (int i = 0; i < kScalars; ++i) m.emplace_back(0.0, ctx);
    reset(ctx, seed);
  }
  void reset(const Context& ctx, std::uint64_t seed) {
    std::mt19937_64 rng(seed * 7 + 1);
    std::uniform_real_distribution<double> unit(-1, 1);
    for (auto& x : v) {
      std::vector<double> h(kRows);
      for (auto& e : h) e = unit(rng);
      x.assign(h);
    }
    for (auto& s : m) s.assign(unit(rng), ctx);
  }
};

/// Issues the program. Context 1 first joins context 0 and is joined back at the end, so that a
/// capture on context 0 records both.
void issue(const std::array<Context, 2>& ctxs, const Mat& A, const std::vector<Op>& ops,
           State& st) {
  ctxs[1].wait_for(ctxs[0]);
  for (const auto& o : ops) {
    const Context& c = ctxs[o.ctx];
    Vec &x = st.v[o.a], &y = st.v[o.b];
    Managed<double>& s = st.m[o.s];
    switch (o.kind) {
      case 0:
        axpy(y, o.alpha, x, c);
        break;
      case 1:
        scale(y, 0.5, c);
        break;
      case 2:
        if (o.c != o.b) pointwise_mult(y, x, st.v[o.c], c);
        break;
      case 3:  // y = A x / 8: bounded values
        mult(A, x, y, c);
        scale(y, 0.125, c);
        break;
      case 4:
        dot(x, st.v[o.c], s, c);
        break;
      case 5:  // a Managed expression as the coefficient
        axpy(y, s * 0.01 + o.alpha, x, c);
        break;
      case 6:
        norm(x, NormType::two, s, c);
        break;
      case 7:
        c.wait_for(ctxs[o.ctx2]);
        break;
      case 8:
        copy(x, y, c);
        break;
    }
  }
  ctxs[0].wait_for(ctxs[1]);
}

struct Result {
  std::vector<std::vector<double>> v;
  std::vector<double> m;
};

Result read(State& st) {
  Result r;
  for (auto& x : st.v) r.v.push_back(x.to_vector());
  for (auto& s : st.m) r.m.push_back(s.value());
  return r;
}

class GraphLaDifferential : public BackendTest {};

TEST_P(GraphLaDifferential, CapturedProgramsMatchEagerRuns) {
  std::array<Context, 2> ctxs{make_context(), make_context()};
  auto A = Mat::stencil(ctxs[0], Stencil::d2p5, kNx, kNy);
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const auto ops = random_program(seed, 40);
    State eager(ctxs[0], seed);
    issue(ctxs, A, ops, eager);
    const Result want = read(eager);
    for (const auto& x : want.v) {
      for (double e : x) ASSERT_TRUE(std::isfinite(e));
    }

    State captured(ctxs[0], seed);
    Capture cap(ctxs[0], "la program");
    issue(ctxs, A, ops, captured);
    Graph g = cap.end();
    GraphExec exec(g, ctxs[0].device());
    for (int launch = 0; launch < 3; ++launch) {
      SCOPED_TRACE("launch " + std::to_string(launch));
      if (launch > 0) captured.reset(ctxs[0], seed);
      exec.launch(ctxs[0]);
      const Result got = read(captured);
      EXPECT_EQ(got.v, want.v);
      EXPECT_EQ(got.m, want.m);
    }
  }
}

SLUICE_INSTANTIATE_BACKENDS(GraphLaDifferential);

}  // namespace
}  // namespace sluice::test
