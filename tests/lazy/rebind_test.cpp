// Rebinding: Program::run with other buffers than the previous run's updates only the graph
// nodes that use them. Randomized programs against the reference evaluator with alternating
// buffer sets and launches still in flight while the next run rebinds (each must keep the buffers
// it was launched with), the tracker ordering a rebound run against other contexts that write the
// old and the new buffers, and aliasing misuse.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend_param.hpp"
#include "lazy/generator.hpp"
#include "sluice/lazy.hpp"

namespace sluice::test {
namespace {

std::size_t at(std::int64_t v) {
  return static_cast<std::size_t>(v);
}

/// Both ways a run's buffers reach the kernels (Options::binding); the table first, so that it
/// also starts cold.
constexpr L::Binding kBindings[] = {L::Binding::table, L::Binding::arguments};

class LazyRebind : public BackendTest {
 protected:
  L::Options opts(L::Fusion f, L::Schedule s, L::Binding b = L::Binding::environment) const {
    L::Options o;
    o.fusion = f;
    o.schedule = s;
    o.binding = b;
    o.device = device();
    o.tune = L::Tune::off;
    return o;
  }
  std::vector<double> download(const Context& ctx, const DeviceBuffer<double>& d) const {
    std::vector<double> h(d.size());
    copy(ctx, h, d);
    ctx.synchronize();
    return h;
  }
};

/// The inputs of one random program's data set on the device.
struct DataSet {
  std::vector<DeviceBuffer<double>> reals;
  std::vector<DeviceBuffer<std::int64_t>> wide;
  std::vector<DeviceBuffer<std::int32_t>> narrow;
  std::vector<L::Input> inputs;
};

DataSet upload(const Context& ctx, const Generator& g) {
  DataSet d;
  for (const auto& [name, r] : g.inputs) {
    d.reals.emplace_back(ctx, r.v.size());
    copy(ctx, d.reals.back(), r.v);
  }
  for (const auto& ii : g.index_inputs) {
    if (ii.wide) {
      std::vector<std::int64_t> h(ii.r.v.begin(), ii.r.v.end());
      d.wide.emplace_back(ctx, h.size());
      copy(ctx, d.wide.back(), h);
      ctx.synchronize();  // h is pageable memory, gone at the end of the block
    } else {
      std::vector<std::int32_t> h(ii.r.v.begin(), ii.r.v.end());
      d.narrow.emplace_back(ctx, h.size());
      copy(ctx, d.narrow.back(), h);
      ctx.synchronize();
    }
  }
  ctx.synchronize();
  for (std::size_t i = 0; i < g.inputs.size(); ++i) {
    d.inputs.emplace_back(g.inputs[i].first, d.reals[i]);
  }
  std::size_t w = 0, n = 0;
  for (const auto& ii : g.index_inputs) {
    if (ii.wide) {
      d.inputs.emplace_back(ii.name, L::Bind(d.wide[w++]));
    } else {
      d.inputs.emplace_back(ii.name, L::Bind(d.narrow[n++]));
    }
  }
  return d;
}

void check_close(const std::vector<double>& got, const ref::Ref& expect, const std::string& what) {
  double scale = 1;
  for (double x : expect.v) scale = std::max(scale, std::abs(x));
  ASSERT_EQ(got.size(), expect.v.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], expect.v[i], 1e-12 * scale * 64) << what << " element " << i;
  }
}

TEST_P(LazyRebind, RandomProgramsWithAlternatingBuffersMatchTheReference) {
  Context ctx = make_context();
  struct Mode {
    L::Fusion fusion;
    L::Schedule schedule;
    const char* name;
    L::Binding binding = L::Binding::environment;
  };
  const Mode modes[] = {
      {L::Fusion::full, L::Schedule::dataflow, "fused dataflow"},
      {L::Fusion::elementwise, L::Schedule::serial, "elementwise serial"},
      {L::Fusion::none, L::Schedule::dataflow, "unfused dataflow"},
      {L::Fusion::full, L::Schedule::dataflow, "fused dataflow, binding table", L::Binding::table},
      {L::Fusion::none, L::Schedule::serial, "unfused serial, binding table", L::Binding::table}};
  constexpr int kSets = 3, kRuns = 6;
  std::mt19937 pick(7);
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    // One program, three data sets of its inputs (the same names and shapes, other values).
    std::vector<Generator> gens;
    gens.reserve(kSets);
    std::vector<std::vector<Val>> outs;
    for (int k = 0; k < kSets; ++k) {
      gens.emplace_back(seed, "", 100 * seed + static_cast<std::uint64_t>(k));
      outs.push_back(gens.back().program(10, 2));
    }
    std::vector<L::Array<double>> arrays;
    for (const auto& o : outs[0]) arrays.push_back(o.a);
    std::vector<DataSet> data;
    for (const auto& g : gens) data.push_back(upload(ctx, g));
    for (const auto& mode : modes) {
      SCOPED_TRACE(mode.name);
      L::Program p = L::compile(arrays, opts(mode.fusion, mode.schedule, mode.binding));
      // The inputs the program reads (an output may not depend on every placeholder).
      std::vector<std::vector<L::Input>> inputs(kSets);
      for (int k = 0; k < kSets; ++k) {
        for (const auto& ph : p.placeholders()) {
          for (const auto& in : data[at(k)].inputs) {
            if (in.name == ph.name) inputs[at(k)].push_back(in);
          }
        }
      }
      // An output set per run of a round: every run's result can be checked.
      std::vector<std::vector<DeviceBuffer<double>>> obufs(kRuns);
      std::vector<std::vector<L::Bind>> binds(kRuns);
      for (int r = 0; r < kRuns; ++r) {
        for (const auto& a : arrays) {
          std::size_t n = 1;
          for (auto e : a.shape()) n *= at(e);
          obufs[at(r)].emplace_back(ctx, n);
        }
        binds[at(r)].assign(obufs[at(r)].begin(), obufs[at(r)].end());
      }
      // A first run ungated: on cuda, loading a kernel at its first launch waits for the
      // device's running kernels, the gate's among them.
      p.run(ctx, inputs[0], binds[0]);
      ctx.synchronize();
      // Round 0: the context held back by a gate, so that every launch is still in flight when
      // the next run rebinds; round 1: as fast as they come.
      for (int round = 0; round < 2; ++round) {
        std::vector<int> used(kRuns);
        {
          Gate gate(device());
          if (round == 0) gate.block(ctx);
          for (int r = 0; r < kRuns; ++r) {
            // Mostly another set than the last run's, sometimes the same inputs (only the
            // outputs change).
            used[at(r)] = static_cast<int>(pick() % kSets);
            p.run(ctx, inputs[at(used[at(r)])], binds[at(r)]);
          }
          gate.open();
        }
        for (int r = 0; r < kRuns; ++r) {
          const auto& expect = outs[at(used[at(r)])];
          for (std::size_t o = 0; o < expect.size(); ++o) {
            check_close(download(ctx, obufs[at(r)][o]), expect[o].r,
                        "round " + std::to_string(round) + " run " + std::to_string(r) +
                            " (data set " + std::to_string(used[at(r)]) + ") output " +
                            std::to_string(o) + "\n" + p.dot());
            if (HasFatalFailure()) return;
          }
        }
      }
      // Every run after the first binds other output buffers (but empty ones: no object).
      EXPECT_GT(p.stats().rebinds, 0u);
      EXPECT_LE(p.stats().rebinds, 2u * kRuns);
      EXPECT_EQ(p.stats().instantiations, 1u);
    }
  }
}

/// Figure 1 of reference 001 on the host: where(x > y, 2x, sin y) + 1.
std::vector<double> figure1(const std::vector<double>& x, const std::vector<double>& y) {
  std::vector<double> r(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    r[i] = (x[i] > y[i] ? 2 * x[i] : std::sin(y[i])) + 1;
  }
  return r;
}

TEST_P(LazyRebind, LaunchesInFlightKeepTheBuffersTheyWereLaunchedWith) {
  for (const auto binding : kBindings) {
    SCOPED_TRACE(binding == L::Binding::table ? "binding table" : "arguments");
    Context ctx = make_context();
    const std::int64_t n = 3000;
    auto x = L::placeholder<double>("x", {n});
    auto y = L::placeholder<double>("y", {n});
    L::Program p = L::compile({L::where(x > y, 2 * x, L::sin(y)) + 1},
                              opts(L::Fusion::none, L::Schedule::dataflow, binding));
    std::vector<std::vector<double>> hx(3), hy(3);
    std::vector<DeviceBuffer<double>> dx, dy, out;
    for (std::size_t k = 0; k < 3; ++k) {
      for (std::int64_t i = 0; i < n; ++i) {
        hx[k].push_back(std::cos(0.01 * static_cast<double>(i) + static_cast<double>(k)));
        hy[k].push_back(std::sin(0.013 * static_cast<double>(i) * static_cast<double>(k + 1)));
      }
      dx.emplace_back(ctx, at(n));
      dy.emplace_back(ctx, at(n));
      copy(ctx, dx.back(), hx[k]);
      copy(ctx, dy.back(), hy[k]);
      ctx.synchronize();
    }
    for (int r = 0; r < 5; ++r) out.emplace_back(ctx, at(n));
    // Five runs held back together: x and y from sets 0, 1, 0, 2, then x from 1 with y from 2,
    // after a first run ungated with the first run's buffers (a kernel's first launch on cuda
    // waits for the device's running kernels, the gate's among them).
    const int xs[] = {0, 1, 0, 2, 1}, ys[] = {0, 1, 0, 2, 2};
    p.run(ctx, {{"x", dx[0]}, {"y", dy[0]}}, {out[0]});
    ctx.synchronize();
    {
      Gate gate(device());
      gate.block(ctx);
      for (std::size_t r = 0; r < 5; ++r) {
        p.run(ctx, {{"x", dx[at(xs[r])]}, {"y", dy[at(ys[r])]}}, {out[r]});
      }
      gate.open();
    }
    for (std::size_t r = 0; r < 5; ++r) {
      const auto got = download(ctx, out[r]);
      const auto expect = figure1(hx[at(xs[r])], hy[at(ys[r])]);
      for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], expect[i], 1e-14) << "run " << r << " element " << i;
      }
    }
    EXPECT_EQ(p.stats().rebinds, 4u);
  }
}

TEST_P(LazyRebind, PingPongBetweenTwoBuffersIteratesTheMap) {
  for (const auto binding : kBindings) {
    SCOPED_TRACE(binding == L::Binding::table ? "binding table" : "arguments");
    // The input and the output swap at every run (as a time loop's stages do): the objects the
    // graph reads and writes are renamed into each other.
    Context ctx = make_context();
    const std::int64_t n = 1000;
    auto x = L::placeholder<double>("x", {n});
    auto c = L::placeholder<double>("c", {n});
    L::Program p = L::compile({x * 0.5 + c}, opts(L::Fusion::full, L::Schedule::dataflow, binding));
    std::vector<double> h(at(n)), hc(at(n));
    for (std::size_t i = 0; i < h.size(); ++i) {
      h[i] = static_cast<double>(i);
      hc[i] = 1.0 / static_cast<double>(i + 1);
    }
    DeviceBuffer<double> a(ctx, at(n)), b(ctx, at(n)), dc(ctx, at(n));
    copy(ctx, a, h);
    copy(ctx, dc, hc);
    ctx.synchronize();                       // h is pageable memory, changed below
    p.run(ctx, {{"x", a}, {"c", dc}}, {b});  // the first run's buffers, ungated (first loads)
    ctx.synchronize();
    {
      Gate gate(device());
      gate.block(ctx);
      for (int k = 0; k < 7; ++k) {
        p.run(ctx, {{"x", k % 2 ? b : a}, {"c", dc}}, {k % 2 ? a : b});
      }
      gate.open();
    }
    for (int k = 0; k < 7; ++k) {
      for (std::size_t i = 0; i < h.size(); ++i) h[i] = h[i] * 0.5 + hc[i];
    }
    EXPECT_EQ(download(ctx, b), h);  // 7 runs: the last wrote b
    EXPECT_EQ(p.stats().rebinds, 6u);
  }
}

TEST_P(LazyRebind, RunsAreOrderedAgainstOtherContextsWritingTheOldAndNewBuffers) {
  for (const auto binding : kBindings) {
    SCOPED_TRACE(binding == L::Binding::table ? "binding table" : "arguments");
    // Each writer is held back by a gate of its own while the other side is free to run, so that
    // a run not ordered after a write (or a write not after a run) would happen meanwhile.
    Context a = make_context(), w1 = make_context(), w2 = make_context();
    const std::int64_t n = 4096;
    auto x = L::placeholder<double>("x", {n});
    L::Program p =
        L::compile({x * 2.0 + 1.0}, opts(L::Fusion::full, L::Schedule::dataflow, binding));
    DeviceBuffer<double> x_old(a, at(n)), x_new(a, at(n)), out_old(a, at(n)), out_new(a, at(n));
    double old_value = 1;
    std::vector<double> h(at(n), old_value);
    copy(a, x_old, h);
    a.synchronize();
    const auto pause = std::chrono::milliseconds(20);
    p.run(a, {{"x", x_old}}, {out_old});  // ungated: a kernel's first load waits for the gates
    a.synchronize();
    for (int round = 0; round < 3; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      const double fresh = 10 + round, later = 100 + round;
      std::vector<double> h_new(at(n), fresh), h_later(at(n), later);
      {
        // Rebound to a buffer another context writes: the run waits for the write.
        Gate gate(device());
        gate.block(w1);
        copy(w1, x_new, h_new);
        p.run(a, {{"x", x_new}}, {out_new});
        std::this_thread::sleep_for(pause);
        gate.open();
        a.synchronize();
        w1.synchronize();
      }
      {
        // Rebound back to the old buffer, which another context then writes: the write waits for
        // the run (held back by its own gate) that reads it.
        Gate gate(device());
        gate.block(a);
        p.run(a, {{"x", x_old}}, {out_old});
        copy(w2, x_old, h_later);
        std::this_thread::sleep_for(pause);
        gate.open();
        w2.synchronize();
        a.synchronize();
      }
      for (double v : download(a, out_new)) ASSERT_EQ(v, 2 * fresh + 1);
      for (double v : download(a, out_old)) ASSERT_EQ(v, 2 * old_value + 1);
      old_value = later;  // w2's write, after the run
    }
    EXPECT_EQ(p.stats().rebinds, 6u);
  }
}

TEST_P(LazyRebind, AnOutputBoundAsAnInputIsAnErrorAndChangesNothing) {
  Context ctx = make_context();
  const std::int64_t n = 64;
  auto x = L::placeholder<double>("x", {n});
  auto y = L::placeholder<double>("y", {n});
  L::Program p = L::compile({x + y, x * y}, opts(L::Fusion::full, L::Schedule::dataflow));
  std::vector<double> hx(at(n), 3), hy(at(n), 4);
  DeviceBuffer<double> dx(ctx, at(n)), dy(ctx, at(n)), s(ctx, at(n)), q(ctx, at(n)), s2(ctx, at(n)),
      q2(ctx, at(n));
  copy(ctx, dx, hx);
  copy(ctx, dy, hy);
  p.run(ctx, {{"x", dx}, {"y", dy}}, {s, q});
  ctx.synchronize();
  const auto before = p.stats();
  auto expect_error = [&](auto&& call, const std::string& says) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one saying: " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  // A rebinding that writes an input (a run reads its inputs while it writes its outputs).
  expect_error(
      [&] {
        p.run(ctx, {{"x", dx}, {"y", dy}}, {dy, q2});
      },
      "output 0 is the buffer bound to input 'y'; bind a distinct buffer");
  expect_error(
      [&] {
        p.run(ctx, {{"x", s2}, {"y", dy}}, {q2, s2});
      },
      "output 1 is the buffer bound to input 'x'");
  expect_error(
      [&] {
        p.run(ctx, {{"x", dx}, {"y", dy}}, {s2, s2});
      },
      "outputs 0 and 1 are the same buffer");
  EXPECT_EQ(p.stats().rebinds, before.rebinds);
  EXPECT_EQ(p.stats().launches, before.launches);
  // Nothing half-done: the inputs are intact and the next rebinding runs as it should.
  p.run(ctx, {{"x", dx}, {"y", dy}}, {s2, q2});
  EXPECT_EQ(download(ctx, dy), hy);
  EXPECT_EQ(download(ctx, s2), std::vector<double>(at(n), 7));
  EXPECT_EQ(download(ctx, q2), std::vector<double>(at(n), 12));
  EXPECT_EQ(p.stats().rebinds, before.rebinds + 1);
}

}  // namespace

TEST_P(LazyRebind, ThroughABindingTableARebindingSetsOneNode) {
  // Four kernels that read the inputs and write the outputs (no fusion), two matrix products
  // of the same sizes (one batched call) and a strided batch of them (its addresses stay in its
  // arguments): under a binding table a rebinding of every input and output sets the table's
  // node and the strided batch's only, and each run gives its own buffers' results.
  Context ctx = make_context();
  const std::int64_t n = 48, b = 2;
  auto x = L::placeholder<double>("x", {n, n});
  auto y = L::placeholder<double>("y", {n, n});
  auto z = L::placeholder<double>("z", {b, n, n});
  auto outs = std::vector<L::Array<double>>{
      L::einsum("ik,kj->ij", x, y), L::einsum("ik,kj->ij", y, x), L::sin(x) + L::cos(y) * 2.0,
      L::einsum("bik,bkj->bij", z, L::cos(z))};
  std::vector<std::size_t> updated;
  for (const auto binding : kBindings) {
    SCOPED_TRACE(binding == L::Binding::table ? "binding table" : "arguments");
    auto o = opts(L::Fusion::none, L::Schedule::dataflow, binding);
    o.gemm = L::Gemm::blas;
    L::Program p = L::compile(outs, o);
    EXPECT_EQ(p.stats().table, binding == L::Binding::table);
    EXPECT_EQ(p.stats().binding_mode, binding == L::Binding::table ? "table" : "arguments");
    // Two data sets, each with its own outputs.
    std::vector<std::vector<double>> hx(2), hy(2), hz(2);
    std::vector<DeviceBuffer<double>> dx, dy, dz;
    std::vector<std::vector<DeviceBuffer<double>>> out(2);
    for (std::size_t k = 0; k < 2; ++k) {
      for (std::int64_t i = 0; i < n * n; ++i) {
        hx[k].push_back(std::cos(0.37 * static_cast<double>(i) + static_cast<double>(k)));
        hy[k].push_back(std::sin(0.11 * static_cast<double>(i) * static_cast<double>(k + 1)));
      }
      for (std::int64_t i = 0; i < b * n * n; ++i) {
        hz[k].push_back(std::cos(0.07 * static_cast<double>(i) - static_cast<double>(k)));
      }
      dx.emplace_back(ctx, at(n * n));
      dy.emplace_back(ctx, at(n * n));
      dz.emplace_back(ctx, at(b * n * n));
      copy(ctx, dx.back(), hx[k]);
      copy(ctx, dy.back(), hy[k]);
      copy(ctx, dz.back(), hz[k]);
      for (std::int64_t e : {n * n, n * n, n * n, b * n * n}) out[k].emplace_back(ctx, at(e));
      ctx.synchronize();
    }
    auto run = [&](std::size_t k) {
      const std::vector<L::Bind> binds(out[k].begin(), out[k].end());
      const std::vector<L::Input> inputs{{"x", dx[k]}, {"y", dy[k]}, {"z", dz[k]}};
      p.run(ctx, inputs, binds);
    };
    for (int r = 0; r < 5; ++r) run(static_cast<std::size_t>(r % 2));
    for (std::size_t k = 0; k < 2; ++k) {
      const auto got0 = download(ctx, out[k][0]), got1 = download(ctx, out[k][1]),
                 got2 = download(ctx, out[k][2]), got3 = download(ctx, out[k][3]);
      for (std::int64_t i = 0; i < n; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
          double xy = 0, yx = 0;
          for (std::int64_t q = 0; q < n; ++q) {
            xy += hx[k][at(i * n + q)] * hy[k][at(q * n + j)];
            yx += hy[k][at(i * n + q)] * hx[k][at(q * n + j)];
          }
          ASSERT_NEAR(got0[at(i * n + j)], xy, 1e-12) << "set " << k;
          ASSERT_NEAR(got1[at(i * n + j)], yx, 1e-12) << "set " << k;
          ASSERT_NEAR(got2[at(i * n + j)],
                      std::sin(hx[k][at(i * n + j)]) + std::cos(hy[k][at(i * n + j)]) * 2.0, 1e-14)
              << "set " << k;
          for (std::int64_t c = 0; c < b; ++c) {
            double zz = 0;
            for (std::int64_t q = 0; q < n; ++q) {
              zz += hz[k][at((c * n + i) * n + q)] * std::cos(hz[k][at((c * n + q) * n + j)]);
            }
            ASSERT_NEAR(got3[at((c * n + i) * n + j)], zz, 1e-12) << "set " << k;
          }
        }
      }
    }
    EXPECT_EQ(p.stats().blas, 2u) << p.dot();  // the batched pair, the strided batch
    EXPECT_EQ(p.stats().rebinds, 4u);
    updated.push_back(p.stats().rebound_nodes / 4);
  }
  // The table's node and the strided batch (kBindings: the table first); with arguments, every
  // kernel and product node (the batched products' list kernel among them).
  EXPECT_EQ(updated[0], 2u);
  EXPECT_GE(updated[1], 5u);
}

TEST_P(LazyRebind, TheBindingModeComesFromTheEnvironment) {
  struct Env {
    Env() { setenv("SLUICE_LAZY_BINDING", "table", 1); }
    ~Env() { unsetenv("SLUICE_LAZY_BINDING"); }
  };
  auto x = L::placeholder<double>("x", {8});
  {
    Env env;
    EXPECT_EQ(
        L::compile({x + 1.0}, opts(L::Fusion::full, L::Schedule::dataflow)).stats().binding_mode,
        "table");
    setenv("SLUICE_LAZY_BINDING", "tables", 1);
    try {
      (void)L::compile({x + 1.0}, opts(L::Fusion::full, L::Schedule::dataflow));
      FAIL() << "a bad SLUICE_LAZY_BINDING was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("SLUICE_LAZY_BINDING is 'tables'"), std::string::npos)
          << e.what();
    }
  }
  // Unset: automatic. A product through BLAS of the inputs into the output (recorded again at
  // every rebinding with arguments on cuda): a table on cuda, arguments on the host.
  {
    auto a = L::placeholder<double>("a", {8, 8});
    auto b = L::placeholder<double>("b", {8, 8});
    auto o = opts(L::Fusion::full, L::Schedule::dataflow);
    o.gemm = L::Gemm::blas;
    L::Program product = L::compile({L::einsum("ik,kj->ij", a, b)}, o);
    Context ctx = make_context();
    DeviceBuffer<double> da(ctx, 64), db(ctx, 64), out(ctx, 64);
    const std::vector<double> twos(64, 2.0);
    copy(ctx, da, twos);
    copy(ctx, db, twos);
    product.run(ctx, {{"a", da}, {"b", db}}, {out});
    EXPECT_EQ(product.stats().blas, 1u);
    EXPECT_EQ(product.stats().table, !is_host());
    EXPECT_EQ(download(ctx, out), std::vector<double>(64, 32.0));
  }
  // A kernel alone: arguments on every backend.
  L::Program p = L::compile({x + 1.0}, opts(L::Fusion::full, L::Schedule::dataflow));
  EXPECT_EQ(p.stats().binding_mode, "auto");
  Context ctx = make_context();
  DeviceBuffer<double> dx(ctx, 8), out(ctx, 8);
  memset(ctx, dx, 0);
  p.run(ctx, {{"x", dx}}, {out});
  EXPECT_FALSE(p.stats().table);
  EXPECT_EQ(download(ctx, out), std::vector<double>(8, 1.0));
}

TEST_P(LazyRebind, TwoContextsRunningOneProgramThroughItsTableAreOrdered) {
  // One table per instance: a run on context b with other buffers rewrites it, so it must wait
  // for context a's run (held back by a gate) to have read it. Both in both bindings, each
  // program used first here.
  for (const auto binding : kBindings) {
    SCOPED_TRACE(binding == L::Binding::table ? "binding table" : "arguments");
    Context a = make_context(), b = make_context();
    const std::int64_t n = 2048;
    auto x = L::placeholder<double>("x", {n});
    auto y = L::placeholder<double>("y", {n});
    L::Program p = L::compile({L::sin(x) * 2.0 + y, x - y},
                              opts(L::Fusion::none, L::Schedule::dataflow, binding));
    std::vector<DeviceBuffer<double>> xs, ys, sums, diffs;
    for (int k = 0; k < 3; ++k) {
      const std::vector<double> hx(at(n), 1.0 + k), hy(at(n), 10.0 * (k + 1));
      xs.emplace_back(a, at(n));
      ys.emplace_back(a, at(n));
      sums.emplace_back(a, at(n));
      diffs.emplace_back(a, at(n));
      copy(a, xs.back(), hx);
      copy(a, ys.back(), hy);
      a.synchronize();
    }
    p.run(a, {{"x", xs[0]}, {"y", ys[0]}}, {sums[0], diffs[0]});  // ungated: first loads
    a.synchronize();
    {
      Gate gate(device());
      gate.block(a);
      p.run(a, {{"x", xs[1]}, {"y", ys[1]}}, {sums[1], diffs[1]});
      p.run(b, {{"x", xs[2]}, {"y", ys[2]}}, {sums[2], diffs[2]});
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // b's run, were it free
      gate.open();
      b.synchronize();
    }
    EXPECT_EQ(p.stats().table, binding == L::Binding::table);
    for (int k = 0; k < 3; ++k) {
      const double vx = 1.0 + k, vy = 10.0 * (k + 1);
      EXPECT_EQ(download(a, sums[at(k)]), std::vector<double>(at(n), std::sin(vx) * 2.0 + vy))
          << "run " << k;
      EXPECT_EQ(download(a, diffs[at(k)]), std::vector<double>(at(n), vx - vy)) << "run " << k;
    }
  }
}

TEST_P(LazyRebind, ABindingTableOfManyBuffersIsWrittenByOneNodePer256) {
  // 260 inputs in one fused kernel: 261 buffers, two nodes write the table (the output and the
  // first 255 inputs, then the rest); a rebinding of the last input sets only the second.
  Context ctx = make_context();
  constexpr int kInputs = 260;
  const std::int64_t n = 32;
  std::vector<std::string> names;  // Input names a string it does not own
  std::vector<L::Array<double>> xs;
  for (int i = 0; i < kInputs; ++i) {
    names.push_back("x" + std::to_string(i));
    xs.push_back(L::placeholder<double>(names.back(), {n}));
  }
  auto total = xs[0];
  for (int i = 1; i < kInputs; ++i) total = total * 0.5 + xs[at(i)];
  std::vector<DeviceBuffer<double>> dx;
  std::vector<L::Input> inputs;
  dx.reserve(kInputs + 1);
  for (int i = 0; i <= kInputs; ++i) {
    dx.emplace_back(ctx, at(n));
    memset(ctx, dx.back(), 0);
  }
  for (int i = 0; i < kInputs; ++i) inputs.emplace_back(names[at(i)], dx[at(i)]);
  const std::vector<double> ones(at(n), 1.0);
  copy(ctx, dx[kInputs], ones);  // the spare input: all ones
  ctx.synchronize();
  DeviceBuffer<double> out(ctx, at(n));
  L::Program p =
      L::compile({total}, opts(L::Fusion::full, L::Schedule::dataflow, L::Binding::table));
  p.run(ctx, inputs, {out});
  EXPECT_EQ(download(ctx, out), std::vector<double>(at(n), 0.0));
  ASSERT_TRUE(p.stats().table);
  std::size_t tables = 0;
  for (const auto& k : p.kernels()) tables += k.kind == "table";
  EXPECT_EQ(tables, 2u);
  // The last input bound to the ones: the sum is 1 everywhere; then back.
  auto rebound = inputs;
  rebound.back() = L::Input(names.back(), dx[kInputs]);
  p.run(ctx, rebound, {out});
  EXPECT_EQ(download(ctx, out), std::vector<double>(at(n), 1.0));
  p.run(ctx, inputs, {out});
  EXPECT_EQ(download(ctx, out), std::vector<double>(at(n), 0.0));
  EXPECT_EQ(p.stats().rebinds, 2u);
  EXPECT_EQ(p.stats().rebound_nodes, 2u) << "the second table node, each time";
}

SLUICE_INSTANTIATE_BACKENDS(LazyRebind);

}  // namespace sluice::test
