// Matrix products through the backend's BLAS (host: OpenBLAS kernel nodes; cuda: recorded
// cuBLAS calls as captured nodes) against plain loops on every backend: GEMM and strided
// batched GEMM forms, transposes and reshapes read as strides, float and double; rebinding new
// buffers between runs (cuda records the call again); BLAS nodes in independent branches;
// the Gemm option and SLUICE_LAZY_GEMM.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend_param.hpp"
#include "sluice/lazy.hpp"

namespace sluice::test {
namespace {

namespace L = sluice::lazy;

class LazyBlas : public BackendTest {
 public:
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
  void independent_branches(bool horizontal);
  /// Arguments unless asked: the counts below are of that plan (a binding table adds its own
  /// kernel; under `automatic` cuda takes one for a product of inputs).
  L::Options opts(L::Gemm gemm, L::Binding binding = L::Binding::arguments) const {
    L::Options o;
    o.device = device();
    o.gemm = gemm;
    o.tune = L::Tune::off;
    o.binding = binding;
    return o;
  }
};

template <class T>
std::vector<T> values(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> h(n);
  for (auto& v : h) v = static_cast<T>(u(rng));
  return h;
}

std::size_t at(std::int64_t v) {
  return static_cast<std::size_t>(v);
}

/// One einsum of two operands, given as row-major data with its letters, against loops.
struct Case {
  std::string spec;          // "ik,kj->ij"
  bool transpose_a = false;  // operand 0 is a placeholder with its last two axes swapped (a view)
};

template <class T>
void check_case(LazyBlas& t, const Context& ctx, const Case& c, L::Gemm gemm, std::mt19937& rng,
                double tol, L::Binding binding = L::Binding::arguments) {
  const auto arrow = c.spec.find("->");
  const auto comma = c.spec.find(',');
  const std::string la = c.spec.substr(0, comma), lb = c.spec.substr(comma + 1, arrow - comma - 1),
                    lo = c.spec.substr(arrow + 2);
  std::uniform_int_distribution<int> size(2, 23);
  std::int64_t ext[26];
  for (auto& e : ext) e = size(rng);
  auto shape_of = [&](const std::string& letters) {
    L::Shape s;
    for (char ch : letters) s.push_back(ext[ch - 'a']);
    return s;
  };
  auto count = [](const L::Shape& s) {
    std::size_t n = 1;
    for (auto e : s) n *= static_cast<std::size_t>(e);
    return n;
  };
  // Operand 0 as given, or a view of a placeholder whose last two axes are swapped.
  std::string la_stored = la;
  std::vector<int> perm;
  for (std::size_t q = 0; q < la.size(); ++q) perm.push_back(static_cast<int>(q));
  if (c.transpose_a) {
    std::swap(la_stored[la.size() - 1], la_stored[la.size() - 2]);
    std::swap(perm[la.size() - 1], perm[la.size() - 2]);
  }
  auto A = L::placeholder<T>("A", shape_of(la_stored));
  auto B = L::placeholder<T>("B", shape_of(lb));
  auto r = L::einsum(c.spec, c.transpose_a ? L::transpose(A, perm) : A, B);
  L::Program p = L::compile({r}, t.opts(gemm, binding));
  const bool blas = gemm == L::Gemm::blas, table = binding == L::Binding::table;
  EXPECT_EQ(p.stats().blas, blas ? 1u : 0u) << c.spec << "\n" << p.dot();
  EXPECT_EQ(p.stats().table, table);
  EXPECT_EQ(p.stats().kernels, (blas ? 0u : 1u) + (table ? 1u : 0u)) << c.spec;
  const auto ha = values<T>(count(shape_of(la_stored)), rng);
  const auto hb = values<T>(count(shape_of(lb)), rng);
  auto da = t.upload(ctx, ha), db = t.upload(ctx, hb);
  DeviceBuffer<T> out(ctx, count(shape_of(lo)));
  p.run(ctx, {{"A", da}, {"B", db}}, {out});
  const auto got = t.download(ctx, out);
  // Loops over every letter: the index of each letter, row-major offsets.
  std::string letters;
  for (char ch : la + lb) {
    if (letters.find(ch) == std::string::npos) letters += ch;
  }
  auto offset = [&](const std::string& l, const std::vector<std::int64_t>& idx) {
    std::int64_t o = 0;
    for (char ch : l) o = o * ext[ch - 'a'] + idx[at(ch - 'a')];
    return at(o);
  };
  std::vector<double> expect(got.size(), 0.0);
  std::vector<std::int64_t> idx(26, 0);
  for (bool done = false; !done;) {
    expect[offset(lo, idx)] +=
        static_cast<double>(ha[offset(la_stored, idx)]) * static_cast<double>(hb[offset(lb, idx)]);
    done = true;
    for (std::size_t q = letters.size(); q-- > 0;) {
      auto& v = idx[at(letters[q] - 'a')];
      if (++v < ext[letters[q] - 'a']) {
        done = false;
        break;
      }
      v = 0;
    }
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(static_cast<double>(got[i]), expect[i], tol) << c.spec << " element " << i;
  }
}

const Case kCases[] = {
    {"ik,kj->ij"},       {"ik,jk->ij"},          {"ki,kj->ij"},
    {"ki,jk->ji"},       {"ij,ej->ei"},          {"ij,ej->ie"},
    {"bik,bkj->bij"},    {"bki,bjk->bji"},       {"ikb,kjb->bij", false},
    {"ik,kj->ij", true}, {"bik,bkj->bij", true}, {"ik,k->i"},
    {"k,kj->j"},
};

TEST_P(LazyBlas, EinsumsThroughBlasMatchLoops) {
  Context ctx = make_context();
  std::mt19937 rng(7);
  for (const auto& c : kCases) {
    // "ikb,kjb->bij" has no unit-stride layout for BLAS: it stays a generated kernel.
    if (c.spec == "ikb,kjb->bij") continue;
    check_case<double>(*this, ctx, c, L::Gemm::blas, rng, 1e-12);
    check_case<float>(*this, ctx, c, L::Gemm::blas, rng, 1e-4);
    check_case<double>(*this, ctx, c, L::Gemm::generated, rng, 1e-12);
    // Through a binding table: a product of one is a batched call over operand lists there.
    check_case<double>(*this, ctx, c, L::Gemm::blas, rng, 1e-12, L::Binding::table);
    check_case<float>(*this, ctx, c, L::Gemm::blas, rng, 1e-4, L::Binding::table);
  }
}

TEST_P(LazyBlas, ProductsWithoutABlasLayoutStayGenerated) {
  Context ctx = make_context();
  auto A = L::placeholder<double>("A", {5, 6, 3});
  auto B = L::placeholder<double>("B", {6, 7, 3});
  L::Program p = L::compile({L::einsum("ikb,kjb->bij", A, B)}, opts(L::Gemm::blas));
  EXPECT_EQ(p.stats().blas, 0u) << p.dot();
  EXPECT_EQ(p.stats().kernels, 1u);
}

TEST_P(LazyBlas, RebindingNewBuffersGivesTheirProducts) {
  Context ctx = make_context();
  const std::int64_t m = 40, k = 24, n = 33;
  auto A = L::placeholder<double>("A", {m, k});
  auto B = L::placeholder<double>("B", {k, n});
  L::Program p = L::compile({L::einsum("ik,kj->ij", A, B) * 2.0}, opts(L::Gemm::blas));
  ASSERT_EQ(p.stats().blas, 1u) << p.dot();
  std::mt19937 rng(11);
  struct Set {
    std::vector<double> a, b;
    DeviceBuffer<double> da, db, out;
  };
  std::vector<Set> sets;
  for (int s = 0; s < 2; ++s) {
    Set x;
    x.a = values<double>(at(m * k), rng);
    x.b = values<double>(at(k * n), rng);
    x.da = upload(ctx, x.a);
    x.db = upload(ctx, x.b);
    x.out = DeviceBuffer<double>(ctx, at(m * n));
    sets.push_back(std::move(x));
  }
  // Alternating sets, and a mixed one: each run's product is that of the buffers it was given.
  const int order[][2] = {{0, 0}, {1, 1}, {0, 0}, {1, 0}, {1, 1}};
  int runs = 0;
  for (const auto& o : order) {
    const Set& ab = sets[at(o[0])];
    Set& dst = sets[at(o[1])];
    p.run(ctx, {{"A", ab.da}, {"B", ab.db}}, {dst.out});
    ++runs;
    const auto got = download(ctx, dst.out);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double e = 0;
        for (std::int64_t q = 0; q < k; ++q) e += ab.a[at(i * k + q)] * ab.b[at(q * n + j)];
        ASSERT_NEAR(got[at(i * n + j)], 2 * e, 1e-12) << "run " << runs;
      }
    }
  }
  EXPECT_EQ(p.stats().instantiations, 1u);
  EXPECT_EQ(p.stats().rebinds, 4u);
  EXPECT_EQ(p.stats().launches, 5u);
}

// Without horizontal fusion each branch's product is a node of its own, all of them concurrent;
// with it, one batched call over the branches (its operands listed by a kernel of their own) and
// one kernel for every branch's row sum.
TEST_P(LazyBlas, BlasNodesInIndependentBranches) {
  for (const bool horizontal : {false, true}) {
    SCOPED_TRACE(horizontal ? "horizontal" : "one node per branch");
    independent_branches(horizontal);
    if (HasFatalFailure()) return;
  }
}

void LazyBlas::independent_branches(bool horizontal) {
  Context ctx = make_context();
  const std::int64_t rows = 300, cols = 16;
  const int branches = 4;
  auto M = L::placeholder<double>("M", {cols, cols});
  std::vector<L::Array<double>> xs;
  L::Array<double> total;
  std::vector<std::string> names;
  for (int w = 0; w < branches; ++w) names.push_back("X" + std::to_string(w));
  for (int w = 0; w < branches; ++w) {
    auto X = L::placeholder<double>(names[at(w)], {rows, cols});
    auto y = L::einsum("ij,ej->ei", M, X);
    auto r = L::sum(L::tanh(y) * X + 1.0, 1);
    total = w == 0 ? r : total + r;
    xs.push_back(X);
  }
  L::Options o = opts(L::Gemm::blas);
  o.horizontal = horizontal;
  L::Program p = L::compile({total}, o);
  const auto W = static_cast<std::size_t>(branches);
  std::size_t blas_kernels = 0, tables = 0;
  for (const auto& k : p.kernels()) {
    if (k.kind == "blas") {
      ++blas_kernels;
      EXPECT_TRUE(k.source.empty()) << k.name;
      EXPECT_EQ(k.ops.size(), horizontal ? W : 1u) << k.name;
      EXPECT_EQ(k.members, horizontal ? W : 1u) << k.name;
    }
    tables += k.kind == "table";
  }
  if (horizontal) {
    // The table, the row sums of every branch, the sum of the branches; one BLAS call.
    EXPECT_EQ(p.stats().blas, 1u) << p.dot();
    EXPECT_EQ(p.stats().kernels, 3u) << p.dot();
    EXPECT_EQ(p.stats().graph_nodes, 4u) << p.dot();
    EXPECT_EQ(p.stats().batched_products, W);
    EXPECT_EQ(p.stats().merged_kernels, W);
    EXPECT_EQ(tables, 1u);
    EXPECT_EQ(blas_kernels, 1u);
  } else {
    EXPECT_EQ(p.stats().blas, W) << p.dot();
    EXPECT_EQ(p.stats().kernels, W + 1) << p.dot();
    EXPECT_GE(p.stats().concurrency, W) << p.dot();
    EXPECT_EQ(p.stats().batched_products, 0u);
    EXPECT_EQ(p.stats().merged_kernels, 0u);
    EXPECT_EQ(tables, 0u);
    EXPECT_EQ(blas_kernels, W);
  }
  std::mt19937 rng(5);
  const auto hm = values<double>(at(cols * cols), rng);
  auto dm = upload(ctx, hm);
  std::vector<std::vector<double>> hx;
  std::vector<DeviceBuffer<double>> dx;
  for (int w = 0; w < branches; ++w) {
    hx.push_back(values<double>(at(rows * cols), rng));
    dx.push_back(upload(ctx, hx.back()));
  }
  auto expected = [&] {
    std::vector<double> e(at(rows), 0.0);
    for (int w = 0; w < branches; ++w) {
      const auto& x = hx[at(w)];
      for (std::int64_t r = 0; r < rows; ++r) {
        double s = 0;
        for (std::int64_t i = 0; i < cols; ++i) {
          double y = 0;
          for (std::int64_t j = 0; j < cols; ++j) y += hm[at(i * cols + j)] * x[at(r * cols + j)];
          s += std::tanh(y) * x[at(r * cols + i)] + 1.0;
        }
        e[at(r)] += s;
      }
    }
    return e;
  };
  DeviceBuffer<double> out(ctx, at(rows));
  for (int round = 0; round < 2; ++round) {
    std::vector<L::Input> in{{"M", dm}};
    for (int w = 0; w < branches; ++w) in.push_back({names[at(w)], dx[at(w)]});
    p.run(ctx, in, {out});
    const auto got = download(ctx, out);
    const auto e = expected();
    for (std::int64_t r = 0; r < rows; ++r) {
      ASSERT_NEAR(got[at(r)], e[at(r)], 1e-10) << "round " << round << " row " << r;
    }
    // New buffers for the branches (the products are recorded again on cuda).
    for (int w = 0; w < branches; ++w) {
      hx[at(w)] = values<double>(at(rows * cols), rng);
      dx[at(w)] = upload(ctx, hx[at(w)]);
    }
  }
}

TEST_P(LazyBlas, AutomaticUsesTheBackendsSizeRule) {
  auto A = L::placeholder<double>("A", {8, 8});
  auto B = L::placeholder<double>("B", {8, 8});
  auto small = L::einsum("ik,kj->ij", A, B);  // 512 multiply-adds
  auto C = L::placeholder<double>("C", {256, 128});
  auto D = L::placeholder<double>("D", {128, 64});
  auto large = L::einsum("ik,kj->ij", C, D);  // 2^21 multiply-adds
  auto E = L::placeholder<double>("E", {8192, 16});
  auto F = L::placeholder<double>("F", {16, 16});
  auto thin = L::einsum("ik,kj->ij", E, F);  // 2^21 multiply-adds, k = 16
  L::Program p = L::compile({small, large, thin}, opts(L::Gemm::automatic));
  // Host: every product through OpenBLAS; cuda: cuBLAS only from 2^20 multiply-adds with m, n
  // and k at least 48 (a thin product of as many stays generated).
  EXPECT_EQ(p.stats().blas, is_host() ? 3u : 1u) << p.dot();
  EXPECT_EQ(p.stats().gemm_mode, "auto");
  L::Program g = L::compile({small, large, thin}, opts(L::Gemm::generated));
  EXPECT_EQ(g.stats().blas, 0u);
  EXPECT_EQ(g.stats().kernels, 3u);
  EXPECT_EQ(g.stats().gemm_mode, "generated");
}

TEST_P(LazyBlas, GemmModeFromTheEnvironment) {
  auto A = L::placeholder<double>("A", {8, 8});
  auto B = L::placeholder<double>("B", {8, 8});
  auto r = L::einsum("ik,kj->ij", A, B);
  L::Options o = opts(L::Gemm::environment);
  const char* old = std::getenv("SLUICE_LAZY_GEMM");
  const std::string saved = old ? old : "";
  ::setenv("SLUICE_LAZY_GEMM", "generated", 1);
  EXPECT_EQ(L::compile({r}, o).stats().blas, 0u);
  ::setenv("SLUICE_LAZY_GEMM", "blas", 1);
  EXPECT_EQ(L::compile({r}, o).stats().blas, 1u);
  ::setenv("SLUICE_LAZY_GEMM", "cublas", 1);
  try {
    (void)L::compile({r}, o);
    ADD_FAILURE() << "an unknown SLUICE_LAZY_GEMM was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("auto, blas or generated"), std::string::npos) << e.what();
  }
  if (old != nullptr) {
    ::setenv("SLUICE_LAZY_GEMM", saved.c_str(), 1);
  } else {
    ::unsetenv("SLUICE_LAZY_GEMM");
  }
}

TEST_P(LazyBlas, OneOffEvaluationsKeepEachGemmModeApart) {
  Context ctx = make_context();
  const std::int64_t n = 40;
  auto A = L::placeholder<double>("A", {n, n});
  auto B = L::placeholder<double>("B", {n, n});
  auto r = L::einsum("ik,kj->ij", A, B);
  std::mt19937 rng(3);
  const auto ha = values<double>(at(n * n), rng), hb = values<double>(at(n * n), rng);
  auto da = upload(ctx, ha), db = upload(ctx, hb);
  const auto hits = L::global_stats().eval_cache_hits;
  const auto generated =
      download(ctx, L::eval(ctx, r, {{"A", da}, {"B", db}}, opts(L::Gemm::generated)));
  const auto blas = download(ctx, L::eval(ctx, r, {{"A", da}, {"B", db}}, opts(L::Gemm::blas)));
  EXPECT_EQ(L::global_stats().eval_cache_hits, hits);  // two programs, not one found twice
  for (std::size_t i = 0; i < blas.size(); ++i) ASSERT_NEAR(generated[i], blas[i], 1e-12) << i;
}

SLUICE_INSTANTIATE_BACKENDS(LazyBlas);

}  // namespace
}  // namespace sluice::test
