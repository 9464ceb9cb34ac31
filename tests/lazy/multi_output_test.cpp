// Multi-output fusion (Options::multi_output): sibling element-wise kernels (same output shape,
// a shared input, not ordered) become one kernel writing several outputs. The DG face traces
// (gathers of the same arrays by the same index arrays) against loops, with multi-output fusion
// on and off and in debug mode; kernels ordered directly, through another kernel, or only once
// an earlier merge is made stay apart (a merge never forms a cycle); rebinding the inputs and
// one output of a merged kernel; copies of a merged kernel fused horizontally; random programs
// against the reference evaluator in several modes; the DG right-hand side against its loops.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <list>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backend_param.hpp"
#include "dg/dg_wave.hpp"
#include "lazy/generator.hpp"
#include "sluice/lazy.hpp"

namespace sluice::test {
namespace {

class LazyMultiOutput : public BackendTest {
 public:
  L::Options opts(bool multi, L::Fusion fusion = L::Fusion::full,
                  L::Schedule schedule = L::Schedule::dataflow, bool debug = false) const {
    L::Options o;
    o.fusion = fusion;
    o.schedule = schedule;
    o.debug = debug;
    o.device = device();
    o.tune = L::Tune::off;
    o.multi_output = multi;
    return o;
  }
};

std::size_t mo_at(std::int64_t v) {
  return static_cast<std::size_t>(v);
}

template <class T>
DeviceBuffer<T> mo_upload(const Context& ctx, const std::vector<T>& h) {
  DeviceBuffer<T> d(ctx, h.size());
  copy(ctx, d, h);
  ctx.synchronize();  // h may be pageable memory
  return d;
}

template <class T>
std::vector<T> mo_download(const Context& ctx, const DeviceBuffer<T>& d) {
  std::vector<T> h(d.size());
  copy(ctx, h, d);
  ctx.synchronize();
  return h;
}

/// The face traces of a DG mesh in miniature: E elements of Np nodes, F faces of K nodes, each
/// face reading its element's nodes (interior) and its neighbour's (exterior), boundary faces
/// mirrored.
struct Faces {
  static constexpr std::int64_t E = 7, Np = 5, F = 9, K = 3;
  std::vector<std::int32_t> elem, node, nbr_elem, nbr_node;
  std::vector<bool> boundary;
  explicit Faces(unsigned seed) {
    std::mt19937 rng(seed);
    auto pick = [&](std::int64_t n) {
      return static_cast<std::int32_t>(std::uniform_int_distribution<std::int64_t>(0, n - 1)(rng));
    };
    for (std::int64_t f = 0; f < F; ++f) {
      elem.push_back(pick(E));
      nbr_elem.push_back(pick(E));
      for (std::int64_t k = 0; k < K; ++k) {
        node.push_back(pick(Np));
        nbr_node.push_back(pick(Np));
        boundary.push_back(pick(3) == 0);
      }
    }
  }
};

/// u_in, u_ex = where(boundary, -u_in, u[nbr]) and u_in * u_ex + w[elem] over (F, K): three
/// element-wise kernels reading u and the index arrays (siblings).
struct TraceProgram {
  L::Array<double> u_in, u_ex, prod;
  explicit TraceProgram(const std::string& prefix = {}) {
    using L::index;
    auto u = L::placeholder<double>(prefix + "u", {Faces::E, Faces::Np});
    auto w = L::placeholder<double>(prefix + "w", {Faces::E});
    auto elem = L::placeholder<std::int32_t>(prefix + "elem", {Faces::F, 1});
    auto node = L::placeholder<std::int32_t>(prefix + "node", {Faces::F, Faces::K});
    auto nbr_elem = L::placeholder<std::int32_t>(prefix + "nbr_elem", {Faces::F, 1});
    auto nbr_node = L::placeholder<std::int32_t>(prefix + "nbr_node", {Faces::F, Faces::K});
    auto boundary = L::placeholder<bool>(prefix + "boundary", {Faces::F, Faces::K});
    u_in = index(u, {elem, node});
    u_ex = L::where(boundary, -u_in, index(u, {nbr_elem, nbr_node}));
    prod = u_in * u_ex + L::take(w, elem);
  }
};

struct TraceData {
  DeviceBuffer<double> u, w;
  DeviceBuffer<std::int32_t> elem, node, nbr_elem, nbr_node;
  DeviceBuffer<bool> boundary;
  std::vector<double> hu, hw;
  Faces faces;
  TraceData(const Context& ctx, unsigned seed)
      : u(ctx, 1),
        w(ctx, 1),
        elem(ctx, 1),
        node(ctx, 1),
        nbr_elem(ctx, 1),
        nbr_node(ctx, 1),
        boundary(ctx, 1),
        faces(seed) {
    std::mt19937 rng(seed + 100);
    std::uniform_real_distribution<double> d(-1, 1);
    hu.resize(mo_at(Faces::E * Faces::Np));
    hw.resize(mo_at(Faces::E));
    for (auto& x : hu) x = d(rng);
    for (auto& x : hw) x = d(rng);
    u = mo_upload(ctx, hu);
    w = mo_upload(ctx, hw);
    elem = mo_upload(ctx, faces.elem);
    node = mo_upload(ctx, faces.node);
    nbr_elem = mo_upload(ctx, faces.nbr_elem);
    nbr_node = mo_upload(ctx, faces.nbr_node);
    const std::size_t nb = faces.boundary.size();
    auto hb = std::make_unique<bool[]>(nb);
    for (std::size_t i = 0; i < nb; ++i) hb[i] = faces.boundary[i];
    DeviceBuffer<bool> db(ctx, nb);
    copy(ctx, db, std::span<bool>(hb.get(), nb));
    ctx.synchronize();
    boundary = std::move(db);
  }
  /// Binds the placeholders named `prefix` + name (Input holds a view: the names live in
  /// `names`).
  void bind(const std::string& prefix, std::vector<L::Input>& in,
            std::list<std::string>& names) const {
    auto name = [&](const char* n) -> const std::string& { return names.emplace_back(prefix + n); };
    in.emplace_back(name("u"), u);
    in.emplace_back(name("w"), w);
    in.emplace_back(name("elem"), elem);
    in.emplace_back(name("node"), node);
    in.emplace_back(name("nbr_elem"), nbr_elem);
    in.emplace_back(name("nbr_node"), nbr_node);
    in.emplace_back(name("boundary"), boundary);
  }
  /// The three outputs by loops.
  [[nodiscard]] std::vector<std::vector<double>> expected() const {
    const auto n = mo_at(Faces::F * Faces::K);
    std::vector<std::vector<double>> e(3, std::vector<double>(n));
    for (std::int64_t f = 0; f < Faces::F; ++f) {
      for (std::int64_t k = 0; k < Faces::K; ++k) {
        const auto i = mo_at(f * Faces::K + k);
        const double in = hu[mo_at(faces.elem[mo_at(f)] * Faces::Np + faces.node[i])];
        const double ex = faces.boundary[i]
                              ? -in
                              : hu[mo_at(faces.nbr_elem[mo_at(f)] * Faces::Np + faces.nbr_node[i])];
        e[0][i] = in;
        e[1][i] = ex;
        e[2][i] = in * ex + hw[mo_at(faces.elem[mo_at(f)])];
      }
    }
    return e;
  }
};

void expect_outputs(const Context& ctx, const std::vector<DeviceBuffer<double>*>& outs,
                    const std::vector<std::vector<double>>& expect, const std::string& what) {
  for (std::size_t o = 0; o < outs.size(); ++o) {
    const auto got = mo_download(ctx, *outs[o]);
    ASSERT_EQ(got.size(), expect[o].size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], expect[o][i], 1e-14) << what << ": output " << o << " element " << i;
    }
  }
}

TEST_P(LazyMultiOutput, FaceTracesAreOneKernel) {
  Context ctx = make_context();
  const TraceProgram t;
  const TraceData data(ctx, 1);
  const auto expect = data.expected();
  const auto n = mo_at(Faces::F * Faces::K);
  for (const bool debug : {false, true}) {
    for (const auto fusion : {L::Fusion::full, L::Fusion::elementwise, L::Fusion::none}) {
      for (const bool multi : {true, false}) {
        const std::string what = std::string(multi ? "multi-output" : "apart") +
                                 (debug ? ", debug" : "") + ", fusion " +
                                 std::to_string(static_cast<int>(fusion));
        SCOPED_TRACE(what);
        L::Program p =
            L::compile({t.u_in, t.u_ex, t.prod}, opts(multi, fusion, L::Schedule::dataflow, debug));
        DeviceBuffer<double> o0(ctx, n), o1(ctx, n), o2(ctx, n);
        std::vector<L::Input> in;
        std::list<std::string> names;
        data.bind("", in, names);
        p.run(ctx, in, {o0, o1, o2});
        expect_outputs(ctx, {&o0, &o1, &o2}, expect, what + "\n" + p.source());
        if (HasFatalFailure()) return;
        const auto s = p.stats();
        if (fusion == L::Fusion::none) {
          EXPECT_EQ(s.multi_output_kernels, 0u) << "one kernel per operation";
          continue;
        }
        if (multi) {
          EXPECT_EQ(s.kernels, 1u) << p.dot();
          EXPECT_EQ(s.multi_output_kernels, 3u);
          const auto ks = p.kernels();
          ASSERT_EQ(ks.size(), 1u);
          EXPECT_EQ(ks[0].outputs, 3u);
          EXPECT_EQ(ks[0].kind, "map");
          EXPECT_GE(ks[0].ops.size(), 5u);  // two gathers, where, negate, take, multiply, add
        } else {
          EXPECT_EQ(s.kernels, 3u) << p.dot();
          EXPECT_EQ(s.multi_output_kernels, 0u);
          for (const auto& k : p.kernels()) EXPECT_EQ(k.outputs, 1u);
        }
      }
    }
  }
}

// From a cold start, a merged kernel's input written on one context (held back by a gate), the
// program run on a second, and its second output read and its third overwritten on a third: the
// tracker orders each against the one kernel that writes all three, as it would three kernels.
TEST_P(LazyMultiOutput, MergedKernelIsOrderedAgainstOtherContexts) {
  Context a = make_context(), b = make_context(), c = make_context();
  const TraceProgram t;
  TraceData data(a, 2);
  L::Program p = L::compile({t.u_in, t.u_ex, t.prod}, opts(true));
  const auto n = mo_at(Faces::F * Faces::K);
  DeviceBuffer<double> o0(b, n), o1(b, n), o2(b, n), seen(c, n);
  std::vector<L::Input> in;
  std::list<std::string> names;
  data.bind("", in, names);
  const auto base = data.hu;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const double scale = 2.0 + round;
    for (std::size_t i = 0; i < base.size(); ++i) data.hu[i] = scale * base[i];
    Gate gate(device());
    gate.block(a);
    copy(a, data.u, data.hu);    // a writes u (held back)
    p.run(b, in, {o0, o1, o2});  // after a's write
    copy(c, seen, o1);           // c reads the second output: after the run
    memset(c, o2, 0);            // c overwrites the third: after the run
    gate.open();
    c.synchronize();
    b.synchronize();
    a.synchronize();
    auto expect = data.expected();
    expect[2].assign(expect[2].size(), 0.0);
    ASSERT_EQ(p.stats().kernels, 1u) << p.dot();
    expect_outputs(b, {&o0, &seen, &o2}, expect, "three contexts\n" + p.source());
    if (HasFatalFailure()) return;
  }
}

// Kernels of one shape sharing an input are not merged when one reads the other's output,
// directly or through a reduction, or when an earlier merge orders them: {A, B} merged makes
// C -> sum(C) -> B ~ A -> sum(A) -> D a path, so C and D (unordered before) stay apart.
TEST_P(LazyMultiOutput, OrderedKernelsStayApart) {
  Context ctx = make_context();
  const std::int64_t nx = 6, ny = 4;
  auto x = L::placeholder<double>("x", {nx});
  auto y = L::placeholder<double>("y", {ny});
  auto idx = L::placeholder<std::int64_t>("idx", {nx});
  auto c = L::exp(y);
  auto a = x * 3.0;
  auto b = x + L::sum(c);
  auto d = y + L::sum(a);
  auto direct = L::take(a, idx) + x;  // reads a: after it
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> hx(mo_at(nx)), hy(mo_at(ny));
  for (auto& v : hx) v = u(rng);
  for (auto& v : hy) v = u(rng);
  const std::vector<std::int64_t> hidx{5, 0, 3, 3, 1, 2};
  auto dx = mo_upload(ctx, hx);
  auto dy = mo_upload(ctx, hy);
  auto didx = mo_upload(ctx, hidx);
  double sc = 0, sa = 0;
  for (double v : hy) sc += std::exp(v);
  for (double v : hx) sa += 3 * v;
  std::vector<std::vector<double>> expect(5);
  for (double v : hy) expect[0].push_back(std::exp(v));
  for (double v : hx) expect[1].push_back(3 * v);
  for (double v : hx) expect[2].push_back(v + sc);
  for (double v : hy) expect[3].push_back(v + sa);
  for (std::int64_t i = 0; i < nx; ++i)
    expect[4].push_back(3 * hx[mo_at(hidx[mo_at(i)])] + hx[mo_at(i)]);
  for (const auto schedule : {L::Schedule::dataflow, L::Schedule::serial}) {
    std::size_t kernels[2] = {0, 0};
    for (const bool multi : {false, true}) {
      SCOPED_TRACE(multi ? "multi-output" : "apart");
      L::Program p = L::compile({c, a, b, d, direct}, opts(multi, L::Fusion::full, schedule));
      DeviceBuffer<double> o0(ctx, mo_at(ny)), o1(ctx, mo_at(nx)), o2(ctx, mo_at(nx)),
          o3(ctx, mo_at(ny)), o4(ctx, mo_at(nx));
      p.run(ctx, {{"x", dx}, {"y", dy}, {"idx", didx}}, {o0, o1, o2, o3, o4});
      expect_outputs(ctx, {&o0, &o1, &o2, &o3, &o4}, expect, p.source());
      if (HasFatalFailure()) return;
      kernels[multi] = p.stats().kernels;
      if (multi) {
        // a and b are siblings (x, unordered); c and d, and a and `direct`, are not.
        EXPECT_EQ(p.stats().multi_output_kernels, 2u) << p.dot();
        for (const auto& k : p.kernels()) {
          EXPECT_LE(k.outputs, 2u) << k.name;
        }
      }
    }
    EXPECT_EQ(kernels[1] + 1, kernels[0]);
  }
}

// Short reductions over the same extents merge (an accumulator each, one loop nest) with the
// element-wise kernels beside them; a longer one, and one over other extents, stay apart.
TEST_P(LazyMultiOutput, ShortReductionsMergeWithTheirSiblings) {
  Context ctx = make_context();
  const std::int64_t n = 11, r = 3, lr = 9;
  auto x = L::placeholder<double>("x", {r, n});
  auto a = L::placeholder<double>("a", {r, 1});
  auto y = L::placeholder<double>("y", {lr, n});
  auto s1 = L::sum(x * a, 0);                             // (n), 3 terms
  auto s2 = L::max(L::sin(x), 0);                         // (n), 3 terms, another operation
  auto m = L::index(x, {1, L::Slice{}}) * 2;              // (n), element-wise
  auto s3 = L::sum(y * L::index(x, {0, L::Slice{}}), 0);  // (n), 9 terms: apart
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> hx(mo_at(r * n)), ha(mo_at(r)), hy(mo_at(lr * n));
  for (auto* h : {&hx, &ha, &hy}) {
    for (auto& v : *h) v = u(rng);
  }
  auto dx = mo_upload(ctx, hx), da = mo_upload(ctx, ha), dy = mo_upload(ctx, hy);
  std::vector<std::vector<double>> expect(4, std::vector<double>(mo_at(n)));
  for (std::int64_t j = 0; j < n; ++j) {
    double e1 = 0, e2 = -std::numeric_limits<double>::infinity(), e3 = 0;
    for (std::int64_t i = 0; i < r; ++i) {
      e1 += hx[mo_at(i * n + j)] * ha[mo_at(i)];
      e2 = std::max(e2, std::sin(hx[mo_at(i * n + j)]));
    }
    for (std::int64_t i = 0; i < lr; ++i) e3 += hy[mo_at(i * n + j)] * hx[mo_at(j)];
    expect[0][mo_at(j)] = e1;
    expect[1][mo_at(j)] = e2;
    expect[2][mo_at(j)] = 2 * hx[mo_at(n + j)];
    expect[3][mo_at(j)] = e3;
  }
  std::size_t kernels[2] = {0, 0};
  for (const bool multi : {false, true}) {
    SCOPED_TRACE(multi ? "multi-output" : "apart");
    auto o = opts(multi);
    o.gemm = L::Gemm::generated;  // s1 and s3 are products: generated kernels, not BLAS
    L::Program p = L::compile({s1, s2, m, s3}, o);
    DeviceBuffer<double> o0(ctx, mo_at(n)), o1(ctx, mo_at(n)), o2(ctx, mo_at(n)), o3(ctx, mo_at(n));
    p.run(ctx, {{"x", dx}, {"a", da}, {"y", dy}}, {o0, o1, o2, o3});
    expect_outputs(ctx, {&o0, &o1, &o2, &o3}, expect, p.source());
    if (HasFatalFailure()) return;
    kernels[multi] = p.stats().kernels;
    if (multi) {
      EXPECT_EQ(p.stats().multi_output_kernels, 3u) << p.dot();
      std::size_t three = 0;
      for (const auto& k : p.kernels()) three += k.outputs == 3 && k.kind == "reduce";
      EXPECT_EQ(three, 1u) << p.dot();
    }
  }
  EXPECT_EQ(kernels[1] + 2, kernels[0]);
}

// Rebinding: new input buffers, and only one of a merged kernel's outputs replaced, then the
// first buffers again; every output holds the new results.
TEST_P(LazyMultiOutput, RebindingInputsAndOneOutputOfAMergedKernel) {
  Context ctx = make_context();
  const TraceProgram t;
  const TraceData first(ctx, 2), second(ctx, 3);
  const auto n = mo_at(Faces::F * Faces::K);
  for (const auto schedule : {L::Schedule::dataflow, L::Schedule::serial}) {
    L::Program p = L::compile({t.u_in, t.u_ex, t.prod}, opts(true, L::Fusion::full, schedule));
    ASSERT_EQ(p.stats().kernels, 1u);
    DeviceBuffer<double> o0(ctx, n), o1(ctx, n), o2(ctx, n), o1b(ctx, n);
    std::vector<L::Input> in1, in2;
    std::list<std::string> names;
    first.bind("", in1, names);
    second.bind("", in2, names);
    p.run(ctx, in1, {o0, o1, o2});
    expect_outputs(ctx, {&o0, &o1, &o2}, first.expected(), "first");
    if (HasFatalFailure()) return;
    p.run(ctx, in2, {o0, o1b, o2});
    expect_outputs(ctx, {&o0, &o1b, &o2}, second.expected(), "second, output 1 replaced");
    if (HasFatalFailure()) return;
    // Output 1 back, output 2 moved to the buffer output 1 had in the second run.
    p.run(ctx, in1, {o0, o1, o1b});
    expect_outputs(ctx, {&o0, &o1, &o1b}, first.expected(), "first again");
    if (HasFatalFailure()) return;
    EXPECT_EQ(p.stats().rebinds, 2u);
  }
}

// Copies of the face traces with data of their own: each copy's multi-output kernel, then one
// horizontal kernel over the copies (each member writing its three outputs), rebound with each
// copy reading the next copy's data.
TEST_P(LazyMultiOutput, MergedKernelsFuseHorizontally) {
  Context ctx = make_context();
  const int copies = 3;
  std::vector<TraceProgram> ts;
  std::vector<TraceData> data;
  std::vector<L::Array<double>> arrays;
  data.reserve(copies);
  for (int c = 0; c < copies; ++c) {
    ts.emplace_back("c" + std::to_string(c) + "_");
    data.emplace_back(ctx, 10 + static_cast<unsigned>(c));
    arrays.insert(arrays.end(), {ts.back().u_in, ts.back().u_ex, ts.back().prod});
  }
  auto o = opts(true);
  o.horizontal = true;
  L::Program p = L::compile(arrays, o);
  const auto s = p.stats();
  EXPECT_EQ(s.kernels, 1u) << p.dot();
  EXPECT_EQ(s.merged_kernels, static_cast<std::size_t>(copies));
  EXPECT_EQ(s.multi_output_kernels, 3u * copies);
  const auto n = mo_at(Faces::F * Faces::K);
  std::vector<DeviceBuffer<double>> outs;
  outs.reserve(3 * copies);
  for (int i = 0; i < 3 * copies; ++i) outs.emplace_back(ctx, n);
  std::vector<L::Bind> binds(outs.begin(), outs.end());
  for (int shift = 0; shift < 2; ++shift) {
    std::vector<L::Input> in;
    std::list<std::string> names;
    for (int c = 0; c < copies; ++c) {
      data[mo_at((c + shift) % copies)].bind("c" + std::to_string(c) + "_", in, names);
    }
    p.run(ctx, in, binds);
    for (int c = 0; c < copies; ++c) {
      const auto expect = data[mo_at((c + shift) % copies)].expected();
      expect_outputs(ctx, {&outs[mo_at(3 * c)], &outs[mo_at(3 * c + 1)], &outs[mo_at(3 * c + 2)]},
                     expect, "copy " + std::to_string(c) + " shift " + std::to_string(shift));
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_EQ(p.stats().rebinds, 1u);
}

/// A random program's inputs on the device, bound by name.
struct RandomData {
  std::vector<DeviceBuffer<double>> reals;
  std::vector<DeviceBuffer<std::int64_t>> wide;
  std::vector<DeviceBuffer<std::int32_t>> narrow;
  std::vector<L::Input> inputs;
  RandomData(const Context& ctx, const Generator& g) {
    reals.reserve(g.inputs.size());
    for (const auto& [name, r] : g.inputs) reals.push_back(mo_upload(ctx, r.v));
    for (const auto& ii : g.index_inputs) {
      if (ii.wide) {
        wide.push_back(mo_upload(ctx, std::vector<std::int64_t>(ii.r.v.begin(), ii.r.v.end())));
      } else {
        narrow.push_back(mo_upload(ctx, std::vector<std::int32_t>(ii.r.v.begin(), ii.r.v.end())));
      }
    }
    for (std::size_t i = 0; i < g.inputs.size(); ++i)
      inputs.emplace_back(g.inputs[i].first, reals[i]);
    std::size_t w = 0, n = 0;
    for (const auto& ii : g.index_inputs) {
      inputs.emplace_back(ii.name, ii.wide ? L::Bind(wide[w++]) : L::Bind(narrow[n++]));
    }
  }
};

// Random programs with several outputs against the reference evaluator, multi-output fusion on
// and off, in the fused modes and both schedules; a second run into other output buffers.
TEST_P(LazyMultiOutput, RandomProgramsMatchTheReference) {
  Context ctx = make_context();
  std::size_t merged = 0;
  const std::uint64_t seeds = is_host() ? 16 : 24;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    Generator g(7000 + seed);
    const auto outs = g.program(12, 4);
    std::vector<L::Array<double>> arrays;
    for (const auto& o : outs) arrays.push_back(o.a);
    const RandomData data(ctx, g);
    struct Mode {
      L::Fusion fusion;
      L::Schedule schedule;
      bool multi;
    };
    for (const Mode m : {Mode{L::Fusion::full, L::Schedule::dataflow, true},
                         Mode{L::Fusion::full, L::Schedule::serial, true},
                         Mode{L::Fusion::elementwise, L::Schedule::dataflow, true},
                         Mode{L::Fusion::full, L::Schedule::dataflow, false}}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + (m.multi ? " multi-output" : " apart") +
                   " fusion " + std::to_string(static_cast<int>(m.fusion)) + " schedule " +
                   std::to_string(static_cast<int>(m.schedule)));
      L::Program p = L::compile(arrays, opts(m.multi, m.fusion, m.schedule));
      if (m.multi) {
        merged += p.stats().multi_output_kernels;
      } else {
        EXPECT_EQ(p.stats().multi_output_kernels, 0u);
      }
      std::vector<L::Input> used;
      for (const auto& ph : p.placeholders()) {
        for (const auto& in : data.inputs) {
          if (in.name == ph.name) used.push_back(in);
        }
      }
      for (int round = 0; round < 2; ++round) {
        std::vector<DeviceBuffer<double>> obufs;
        obufs.reserve(outs.size());
        for (const auto& o : outs) obufs.emplace_back(ctx, o.r.v.size());
        std::vector<L::Bind> binds(obufs.begin(), obufs.end());
        p.run(ctx, used, binds);
        for (std::size_t o = 0; o < outs.size(); ++o) {
          const auto got = mo_download(ctx, obufs[o]);
          const auto& e = outs[o].r.v;
          ASSERT_EQ(got.size(), e.size());
          double scale = 1;
          for (double v : e) scale = std::max(scale, std::abs(v));
          for (std::size_t i = 0; i < got.size(); ++i) {
            if (std::isnan(e[i])) {
              ASSERT_TRUE(std::isnan(got[i])) << "output " << o << " element " << i;
              continue;
            }
            ASSERT_NEAR(got[i], e[i], 1e-10 * scale)
                << "round " << round << " output " << o << " element " << i << "\n"
                << p.dot() << "\n"
                << p.source();
          }
        }
      }
    }
  }
  EXPECT_GT(merged, 0u) << "no random program had siblings to merge";
}

// The DG right-hand side (upwind) against its loops with multi-output fusion on and off: the
// face traces u_in and u_ex become one kernel.
TEST_P(LazyMultiOutput, DgRightHandSideMatchesPlainLoops) {
  Context ctx = make_context();
  const int p = 1;
  const auto R = dg::make_reference(p);
  const auto m = dg::make_mesh(R, 2);
  const auto ops = dg::operators(ctx, R, m);
  const auto n = static_cast<std::size_t>(m.E * R.Np);
  std::vector<double> hu(n), hv(3 * n);
  for (std::size_t i = 0; i < n; ++i) hu[i] = std::sin(0.37 * static_cast<double>(i + 1));
  for (std::size_t i = 0; i < 3 * n; ++i) hv[i] = std::sin(0.61 * static_cast<double>(i + 1));
  std::vector<double> eu(n), ev(3 * n);
  dg::rhs_loops(R, m, hu.data(), hv.data(), eu.data(), ev.data(), dg::Flux::upwind);
  auto du = mo_upload(ctx, hu), dv = mo_upload(ctx, hv);
  auto u = L::placeholder<double>("u", {m.E, R.Np});
  auto v = L::placeholder<double>("v", {3, m.E, R.Np});
  const auto r = dg::rhs(ops, u, v, dg::Flux::upwind);
  // Tile::on: the fusion cuda does (the flux fused into the lifting), the four face arrays
  // u_in, u_ex, vn_in and vn_ex left to merge.
  for (const auto tile : {L::Tile::automatic, L::Tile::on}) {
    SCOPED_TRACE(tile == L::Tile::on ? "tiles on" : "tiles auto");
    std::size_t kernels[2] = {0, 0};
    for (const bool multi : {false, true}) {
      SCOPED_TRACE(multi ? "multi-output" : "apart");
      auto o = opts(multi);
      o.tile = tile;
      L::Program prog = L::compile(std::make_tuple(r.du, r.dv), o);
      DeviceBuffer<double> ou(ctx, n), ov(ctx, 3 * n);
      prog.run(ctx, {{"u", du}, {"v", dv}}, {ou, ov});
      const auto gu = mo_download(ctx, ou), gv = mo_download(ctx, ov);
      double scale = 1;
      for (double x : eu) scale = std::max(scale, std::abs(x));
      for (double x : ev) scale = std::max(scale, std::abs(x));
      for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(gu[i], eu[i], 1e-12 * scale) << i;
      for (std::size_t i = 0; i < 3 * n; ++i) ASSERT_NEAR(gv[i], ev[i], 1e-12 * scale) << i;
      kernels[multi] = prog.stats().kernels;
      if (multi) {
        std::size_t four = 0;
        for (const auto& k : prog.kernels()) four += k.outputs == 4;
        EXPECT_EQ(four, 1u) << "the face arrays in one kernel\n" << prog.dot();
        EXPECT_EQ(prog.stats().multi_output_kernels, 4u) << prog.dot();
      }
    }
    EXPECT_EQ(kernels[1] + 3, kernels[0]);
  }
}

SLUICE_INSTANTIATE_BACKENDS(LazyMultiOutput);

}  // namespace
}  // namespace sluice::test
