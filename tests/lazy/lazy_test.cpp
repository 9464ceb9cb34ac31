// The lazy layer's semantics on every backend: element types, reductions (split and scalar),
// einsum through BLAS, rebinding and the instance cache, Managed values, ordering by the tracker
// against other contexts, the debug index check, introspection, one-off evaluation.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "backend_param.hpp"
#include "sluice/lazy.hpp"

namespace sluice::test {
namespace {

namespace L = sluice::lazy;

class Lazy : public BackendTest {
 protected:
  template <class T>
  DeviceBuffer<T> upload(const Context& ctx, const std::vector<T>& h) {
    DeviceBuffer<T> d(ctx, h.size());
    copy(ctx, d, h);
    ctx.synchronize();
    return d;
  }
  template <class T>
  std::vector<T> download(const Context& ctx, const DeviceBuffer<T>& d) {
    std::vector<T> h(d.size());
    copy(ctx, h, d);
    ctx.synchronize();
    return h;
  }
  /// Arguments: the kernel counts below are of that plan (a binding table adds its own kernel;
  /// rebind_test.cpp and random_test.cpp run programs through one).
  L::Options opts(L::Fusion f = L::Fusion::full) const {
    L::Options o;
    o.fusion = f;
    o.device = device();
    o.binding = L::Binding::arguments;
    return o;
  }
};

TEST_P(Lazy, IntegerBoolAndFloatElements) {
  Context ctx = make_context();
  const std::int64_t n = 1000;
  auto i = L::placeholder<std::int32_t>("i", {n});
  auto j = L::placeholder<std::int64_t>("j", {n});
  auto f = L::placeholder<float>("f", {n});
  auto mixed = i + j * 3;                           // int64
  auto q = (j - 7) / (i % 5);                       // division by zero gives 0
  auto mask = ((i > 10) & !(j == 3)) | (f < 0.5f);  // bool
  auto g = L::where(mask, f * 2.0f, L::sqrt(f)) + L::cast<float>(i);
  L::Program p = L::compile(std::make_tuple(mixed, q, mask, g), opts());
  std::vector<std::int32_t> hi(n);
  std::vector<std::int64_t> hj(n);
  std::vector<float> hf(n);
  for (std::int64_t k = 0; k < n; ++k) {
    hi[static_cast<std::size_t>(k)] = static_cast<std::int32_t>(k % 37 - 5);
    hj[static_cast<std::size_t>(k)] = k % 11;
    hf[static_cast<std::size_t>(k)] = static_cast<float>(k % 13) / 13.0f;
  }
  auto di = upload(ctx, hi);
  auto dj = upload(ctx, hj);
  auto df = upload(ctx, hf);
  DeviceBuffer<std::int64_t> o1(ctx, n), o2(ctx, n);
  DeviceBuffer<bool> o3(ctx, n);
  DeviceBuffer<float> o4(ctx, n);
  p.run(ctx, {{"i", di}, {"j", dj}, {"f", df}}, {o1, o2, o3, o4});
  const auto r1 = download(ctx, o1);
  const auto r2 = download(ctx, o2);
  auto r3 = std::make_unique<bool[]>(static_cast<std::size_t>(n));
  copy(ctx, std::span<bool>(r3.get(), static_cast<std::size_t>(n)), o3);
  ctx.synchronize();
  const auto r4 = download(ctx, o4);
  for (std::size_t k = 0; k < static_cast<std::size_t>(n); ++k) {
    ASSERT_EQ(r1[k], hi[k] + hj[k] * 3);
    const std::int64_t d = hi[k] % 5;
    ASSERT_EQ(r2[k], d == 0 ? 0 : (hj[k] - 7) / d) << k;
    const bool m = ((hi[k] > 10) && !(hj[k] == 3)) || (hf[k] < 0.5f);
    ASSERT_EQ(r3[k], m);
    const float e = (m ? hf[k] * 2.0f : std::sqrt(hf[k])) + static_cast<float>(hi[k]);
    ASSERT_NEAR(r4[k], e, 1e-5f * (1 + std::abs(e)));
  }
}

TEST_P(Lazy, ReductionsAlongAxesAndToScalars) {
  Context ctx = make_context();
  auto x = L::placeholder<double>("x", {3, 4, 5});
  auto s = L::sum(x, {0, 2}, true);  // (1, 4, 1)
  auto pr = L::prod(x, -1);          // (3, 4)
  auto mn = L::min(x);               // ()
  auto mx = L::max(x, 1);            // (3, 5)
  L::Program p = L::compile({s, pr, mn, mx}, opts());
  std::vector<double> h(60);
  for (std::size_t k = 0; k < h.size(); ++k) h[k] = std::cos(0.37 * static_cast<double>(k)) + 0.1;
  auto dx = upload(ctx, h);
  DeviceBuffer<double> bs(ctx, 4), bp(ctx, 12), bm(ctx, 15);
  Managed<double> m;
  p.run(ctx, {{"x", dx}}, {bs, bp, m, bm});
  auto at = [&](int a, int b, int c) { return h[static_cast<std::size_t>(a * 20 + b * 5 + c)]; };
  const auto rs = download(ctx, bs);
  const auto rp = download(ctx, bp);
  const auto rm = download(ctx, bm);
  for (int b = 0; b < 4; ++b) {
    double e = 0;
    for (int a = 0; a < 3; ++a) {
      for (int c = 0; c < 5; ++c) e += at(a, b, c);
    }
    EXPECT_NEAR(rs[static_cast<std::size_t>(b)], e, 1e-12);
  }
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b < 4; ++b) {
      double e = 1;
      for (int c = 0; c < 5; ++c) e *= at(a, b, c);
      EXPECT_NEAR(rp[static_cast<std::size_t>(a * 4 + b)], e, 1e-12);
    }
    for (int c = 0; c < 5; ++c) {
      double e = -INFINITY;
      for (int b = 0; b < 4; ++b) e = std::max(e, at(a, b, c));
      EXPECT_EQ(rm[static_cast<std::size_t>(a * 5 + c)], e);
    }
  }
  EXPECT_EQ(m.value(), *std::min_element(h.begin(), h.end()));
}

TEST_P(Lazy, LargeReductionsSplitIntoTwoStages) {
  Context ctx = make_context();
  const std::int64_t n = 300000;
  auto x = L::placeholder<double>("x", {n});
  auto total = L::sum(x * x);
  L::Program p = L::compile({total}, opts());
  EXPECT_EQ(p.stats().kernels, 2u) << p.source();
  std::vector<double> h(static_cast<std::size_t>(n));
  for (std::size_t k = 0; k < h.size(); ++k) h[k] = 1.0 / static_cast<double>(k + 1);
  auto dx = upload(ctx, h);
  Managed<double> r;
  p.run(ctx, {{"x", dx}}, {r});
  double e = 0;
  for (double v : h) e += v * v;
  EXPECT_NEAR(r.value(), e, 1e-12);
  // eval_scalar gives the same through the one-off path.
  EXPECT_NEAR(L::eval_scalar(ctx, total, {{"x", dx}}, opts()).value(), e, 1e-12);
}

TEST_P(Lazy, EinsumMatrixProducts) {
  Context ctx = make_context();
  const std::int64_t m = 17, k = 9, n = 13, b = 3;
  auto A = L::placeholder<double>("A", {m, k});
  auto B = L::placeholder<double>("B", {k, n});
  auto Bt = L::placeholder<double>("Bt", {n, k});
  auto X = L::placeholder<double>("X", {b, m, k});
  auto Y = L::placeholder<double>("Y", {b, k, n});
  auto c1 = L::einsum("ik,kj->ij", A, B);
  auto c2 = L::einsum("ik,jk->ji", A, Bt);
  auto c3 = L::einsum("bik,bkj->bij", X, Y);
  auto c4 = L::einsum("ik,k->i", A, L::sum(B, 1));
  L::Program p = L::compile({c1, c2, c3, c4}, opts());
  if (is_host()) {
    EXPECT_EQ(p.stats().blas, 4u) << p.dot();  // OpenBLAS on the host
  }
  auto fill = [](std::size_t count, double s) {
    std::vector<double> h(count);
    for (std::size_t i = 0; i < count; ++i) h[i] = std::sin(s * static_cast<double>(i + 1));
    return h;
  };
  const auto hA = fill(m * k, 0.3), hB = fill(k * n, 0.7), hBt = fill(n * k, 1.1),
             hX = fill(b * m * k, 0.13), hY = fill(b * k * n, 0.29);
  auto dA = upload(ctx, hA), dB = upload(ctx, hB), dBt = upload(ctx, hBt), dX = upload(ctx, hX),
       dY = upload(ctx, hY);
  DeviceBuffer<double> o1(ctx, m * n), o2(ctx, n * m), o3(ctx, b * m * n), o4(ctx, m);
  p.run(ctx, {{"A", dA}, {"B", dB}, {"Bt", dBt}, {"X", dX}, {"Y", dY}}, {o1, o2, o3, o4});
  const auto r1 = download(ctx, o1), r2 = download(ctx, o2), r3 = download(ctx, o3),
             r4 = download(ctx, o4);
  for (std::int64_t i = 0; i < m; ++i) {
    double e4 = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      double e1 = 0, e2 = 0;
      for (std::int64_t q = 0; q < k; ++q) {
        e1 += hA[static_cast<std::size_t>(i * k + q)] * hB[static_cast<std::size_t>(q * n + j)];
        e2 += hA[static_cast<std::size_t>(i * k + q)] * hBt[static_cast<std::size_t>(j * k + q)];
      }
      EXPECT_NEAR(r1[static_cast<std::size_t>(i * n + j)], e1, 1e-12);
      EXPECT_NEAR(r2[static_cast<std::size_t>(j * m + i)], e2, 1e-12);
    }
    for (std::int64_t q = 0; q < k; ++q) {
      double bs = 0;
      for (std::int64_t j = 0; j < n; ++j) bs += hB[static_cast<std::size_t>(q * n + j)];
      e4 += hA[static_cast<std::size_t>(i * k + q)] * bs;
    }
    EXPECT_NEAR(r4[static_cast<std::size_t>(i)], e4, 1e-12);
  }
  for (std::int64_t z = 0; z < b; ++z) {
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double e = 0;
        for (std::int64_t q = 0; q < k; ++q) {
          e += hX[static_cast<std::size_t>((z * m + i) * k + q)] *
               hY[static_cast<std::size_t>((z * k + q) * n + j)];
        }
        EXPECT_NEAR(r3[static_cast<std::size_t>((z * m + i) * n + j)], e, 1e-12);
      }
    }
  }
}

TEST_P(Lazy, EinsumOfThreeOperandsContractsPairwiseWhenThatPays) {
  Context ctx = make_context();
  const std::int64_t a = 6, b = 40, c = 40, d = 5;
  auto X = L::placeholder<double>("X", {a, b});
  auto Y = L::placeholder<double>("Y", {b, c});
  auto Z = L::placeholder<double>("Z", {c, d});
  auto chain = L::einsum("ij,jk,kl->il", X, Y, Z);  // (X Y) Z or X (Y Z): a*b*c + a*c*d terms
  L::Program p = L::compile({chain}, opts());
  EXPECT_EQ(p.stats().kernels + p.stats().blas, 2u) << p.dot();
  auto fill = [](std::size_t n, double s) {
    std::vector<double> h(n);
    for (std::size_t i = 0; i < n; ++i) h[i] = std::cos(s * static_cast<double>(i));
    return h;
  };
  const auto hx = fill(a * b, 0.1), hy = fill(b * c, 0.2), hz = fill(c * d, 0.3);
  auto dx = upload(ctx, hx), dy = upload(ctx, hy), dz = upload(ctx, hz);
  DeviceBuffer<double> out(ctx, a * d);
  p.run(ctx, {{"X", dx}, {"Y", dy}, {"Z", dz}}, {out});
  const auto r = download(ctx, out);
  for (std::int64_t i = 0; i < a; ++i) {
    for (std::int64_t l = 0; l < d; ++l) {
      double e = 0;
      for (std::int64_t j = 0; j < b; ++j) {
        for (std::int64_t k = 0; k < c; ++k) {
          e += hx[static_cast<std::size_t>(i * b + j)] * hy[static_cast<std::size_t>(j * c + k)] *
               hz[static_cast<std::size_t>(k * d + l)];
        }
      }
      EXPECT_NEAR(r[static_cast<std::size_t>(i * d + l)], e, 1e-10);
    }
  }
}

TEST_P(Lazy, RebindingHitsTheCacheAndNewShapesInstantiateOnce) {
  Context ctx = make_context();
  auto x = L::placeholder<double>("x", {8});
  auto y = L::placeholder<double>("y", {8});
  auto r = L::sum(x * y + 1.0, 0, true) * x;
  auto o = opts();
  o.cache_capacity = 2;
  // The size rule's shapes: with tuning on, a new size may time (and so compile) other candidate
  // shapes of the reduction, which is the tuning tests' subject, not this one's.
  o.tune = L::Tune::off;
  L::Program p = L::compile({r}, o);
  EXPECT_EQ(p.stats().instantiations, 1u);  // built by compile
  auto run = [&](std::int64_t n, double a, double b) {
    std::vector<double> hx(static_cast<std::size_t>(n), a), hy(static_cast<std::size_t>(n), b);
    auto dx = upload(ctx, hx), dy = upload(ctx, hy);
    DeviceBuffer<double> out(ctx, static_cast<std::size_t>(n));
    p.run(ctx, {{"x", {dx, {n}}}, {"y", {dy, {n}}}}, {out});
    const auto h = download(ctx, out);
    const double e = (static_cast<double>(n) * (a * b + 1.0)) * a;
    for (double v : h) EXPECT_DOUBLE_EQ(v, e);
  };
  run(8, 1, 2);
  run(8, 3, 4);  // new buffers: a rebind, same instance
  auto s = p.stats();
  EXPECT_EQ(s.instantiations, 1u);
  EXPECT_EQ(s.instance_hits, 2u);
  EXPECT_EQ(s.rebinds, 1u);
  EXPECT_EQ(s.launches, 2u);
  const auto origin = s.build_origin;
  run(100, 0.5, 2);  // a new shape: one more instance, the same source (no compile)
  s = p.stats();
  EXPECT_EQ(s.instantiations, 2u);
  EXPECT_EQ(s.last_build_origin, "memory");
  run(100, 1, 1);
  run(7, 1, 1);  // a third shape evicts the least recently used (8)
  run(8, 1, 1);
  s = p.stats();
  EXPECT_EQ(s.instantiations, 4u);
  EXPECT_EQ(s.evictions, 2u);
  (void)origin;
  // The same buffers twice: no rebind.
  std::vector<double> h(5, 1.0);
  auto dx = upload(ctx, h), dy = upload(ctx, h);
  DeviceBuffer<double> out(ctx, 5);
  const auto before = p.stats().rebinds;
  p.run(ctx, {{"x", {dx, {5}}}, {"y", {dy, {5}}}}, {out});
  p.run(ctx, {{"x", {dx, {5}}}, {"y", {dy, {5}}}}, {out});
  ctx.synchronize();
  EXPECT_EQ(p.stats().rebinds, before);
}

TEST_P(Lazy, RunsAreOrderedAfterAnotherContextsWrites) {
  Context a = make_context(), b = make_context();
  const std::int64_t n = 4096;
  auto x = L::placeholder<double>("x", {n});
  L::Program p = L::compile({x * 2.0 + 1.0}, opts());
  DeviceBuffer<double> dx(a, n), out(b, n);
  memset(a, dx, 0);
  a.synchronize();
  for (int round = 0; round < 3; ++round) {
    Gate gate(device());
    gate.block(a);  // a's later work waits for the gate
    std::vector<double> h(static_cast<std::size_t>(n), 10.0 + round);
    copy(a, dx, h);                // a writes x (held back)
    p.run(b, {{"x", dx}}, {out});  // b reads x: the tracker orders it after a's write
    gate.open();
    a.synchronize();
    const auto r = download(b, out);
    for (double v : r) ASSERT_EQ(v, 2.0 * (10.0 + round) + 1.0);
  }
}

// Dropping a program whose run is still held back behind another context's work never waits
// for the device (the gate fails the test if the host waited it out: on cuda the unload of a
// dropped module ran cudaDeviceSynchronize on this thread), and the run still completes.
TEST_P(Lazy, DroppingAProgramWhileItsRunIsHeldBackNeverWaits) {
  Context a = make_context(), b = make_context();
  const std::int64_t n = 4096;
  DeviceBuffer<double> dx(a, n), out(b, n);
  memset(a, dx, 0);
  a.synchronize();
  auto x = L::placeholder<double>("x", {n});
  auto p = std::make_unique<L::Program>(L::compile({x * 2.0 + 1.0}, opts()));
  const std::vector<double> h(static_cast<std::size_t>(n), 3.0);  // read when the copy runs
  {
    Gate gate(device());
    gate.block(a);
    copy(a, dx, h);                 // held back
    p->run(b, {{"x", dx}}, {out});  // ordered after it
    p.reset();                      // its executable and its kernels go
    gate.open();
  }
  const auto r = download(b, out);
  for (double v : r) ASSERT_EQ(v, 7.0);
}

TEST_P(Lazy, DebugModeReportsIndicesOutOfRange) {
  Context ctx = make_context();
  auto x = L::placeholder<double>("x", {5});
  auto idx = L::placeholder<std::int64_t>("idx", {3});
  auto t = L::take(x, idx);
  auto o = opts();
  o.debug = true;
  L::Program p = L::compile({t}, o);
  auto dx = upload(ctx, std::vector<double>{0, 1, 2, 3, 4});
  auto good = upload(ctx, std::vector<std::int64_t>{4, -1, 0});
  auto bad = upload(ctx, std::vector<std::int64_t>{1, 7, 2});
  DeviceBuffer<double> out(ctx, 3);
  p.run(ctx, {{"x", dx}, {"idx", good}}, {out});
  EXPECT_EQ(download(ctx, out), (std::vector<double>{4, 4, 0}));
  p.run(ctx, {{"x", dx}, {"idx", bad}}, {out});
  try {
    ctx.synchronize();
    FAIL() << "expected a failure";
  } catch (const WorkFailed& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("index 7 is out of range [0, 5)"), std::string::npos) << what;
    EXPECT_NE(what.find("take"), std::string::npos) << what;
  }
  // Without debug the index is clamped into range.
  L::Program q = L::compile({t}, opts());
  q.run(ctx, {{"x", dx}, {"idx", bad}}, {out});
  EXPECT_EQ(download(ctx, out), (std::vector<double>{1, 4, 2}));
}

TEST_P(Lazy, ManagedValuesAndOneOffEvaluation) {
  Context ctx = make_context();
  Managed<double> s(2.5, ctx);
  auto scale = L::placeholder<double>("scale", {});
  auto v = L::placeholder<double>("v", {4});
  auto r = L::sum(v * scale);
  auto dv = upload(ctx, std::vector<double>{1, 2, 3, 4});
  Managed<double> out;
  L::Program p = L::compile({r}, opts());
  p.run(ctx, {{"scale", s}, {"v", dv}}, {out});
  EXPECT_DOUBLE_EQ(out.value(), 25.0);
  const auto hits = L::global_stats().eval_cache_hits;
  for (int k = 0; k < 3; ++k) {
    auto w = L::placeholder<double>("w", {4});
    auto e = L::eval(ctx, L::roll(w, 1) * 10.0, {{"w", dv}}, opts());
    EXPECT_EQ(download(ctx, e), (std::vector<double>{40, 10, 20, 30}));
  }
  EXPECT_EQ(L::global_stats().eval_cache_hits, hits + 2);  // built once, then found
}

TEST_P(Lazy, FusionModesChangeKernelCountsNotResults) {
  Context ctx = make_context();
  auto x = L::placeholder<double>("x", {64});
  auto y = L::exp(-(x * x)) + L::sin(x) * 2.0;
  auto z = L::sum(y * y);
  std::vector<std::size_t> kernels;
  std::vector<double> results;
  auto dx = upload(ctx, std::vector<double>(64, 0.25));
  for (auto f : {L::Fusion::none, L::Fusion::elementwise, L::Fusion::full}) {
    L::Program p = L::compile({z}, opts(f));
    kernels.push_back(p.stats().kernels);
    Managed<double> r;
    p.run(ctx, {{"x", dx}}, {r});
    results.push_back(r.value());
  }
  EXPECT_EQ(kernels[0], 8u);  // one per operation (the literals are not operations)
  EXPECT_EQ(kernels[1], 2u);  // the element-wise chain, then the reduction
  EXPECT_EQ(kernels[2], 1u);  // the reduction with its producers
  EXPECT_DOUBLE_EQ(results[0], results[1]);
  EXPECT_DOUBLE_EQ(results[0], results[2]);
}

TEST_P(Lazy, IndependentBranchesAreConcurrentInDataflow) {
  auto M = L::placeholder<double>("M", {16, 16});
  std::vector<L::Array<double>> parts;
  for (int i = 0; i < 6; ++i) {
    auto X = L::placeholder<double>("X" + std::to_string(i), {32, 16});
    parts.push_back(L::sum(L::tanh(L::einsum("ij,ej->ei", M, X)) * X + 1.0, 1));
  }
  auto total = parts[0];
  for (int i = 1; i < 6; ++i) total = total + parts[static_cast<std::size_t>(i)];
  auto o = opts();
  o.horizontal = false;  // each branch its own nodes (horizontal_test.cpp merges them)
  L::Program dataflow = L::compile({total}, o);
  o.schedule = L::Schedule::serial;
  L::Program serial = L::compile({total}, o);
  EXPECT_EQ(dataflow.stats().concurrency, 6u) << dataflow.dot();
  EXPECT_EQ(serial.stats().concurrency, 1u);
  EXPECT_LE(dataflow.stats().temporaries, 12u);
  EXPECT_LT(serial.stats().temporaries, dataflow.stats().temporaries);  // reuse along the chain
  EXPECT_NE(dataflow.dot().find("cluster_"), std::string::npos);
  for (const auto& k : dataflow.kernels()) {
    EXPECT_FALSE(k.ops.empty()) << k.name;
    if (k.kind != "blas") {
      EXPECT_NE(k.source.find(k.kind == "reduce" ? "acc" : "out["), std::string::npos);
    }
  }
}

SLUICE_INSTANTIATE_BACKENDS(Lazy);

}  // namespace
}  // namespace sluice::test
