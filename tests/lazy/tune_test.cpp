// Choosing cuda kernel shapes by measurement (src/lazy/tune.hpp): the logic with a fake timer
// (no GPU needed: the cuda dialect is planned and tuned without building), the option and its
// environment variable, the caches (memory, disk, another process), and on every backend the
// DG einsums computed in each candidate shape against plain loops.

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "backend_param.hpp"
#include "lazy/source.hpp"
#include "lazy/tune.hpp"
#include "sluice/kernel.hpp"
#include "sluice/lazy.hpp"

namespace sluice::test {
namespace {

namespace L = sluice::lazy;
namespace D = sluice::lazy::detail;

/// A kernel cache directory of the test's own (the tuning cache lives in it), no choices in
/// memory, no timer; all restored after.
class TuneScope {
 public:
  explicit TuneScope(std::string dir = {})
      : old_(kernel_cache::directory()),
        dir_(dir.empty() ? std::filesystem::temp_directory_path() /
                               ("sluice-tune-test-" + std::to_string(::getpid()))
                         : std::filesystem::path(dir)),
        owned_(dir.empty()) {
    if (owned_) std::filesystem::remove_all(dir_);
    kernel_cache::set_directory(dir_);
    D::forget_tune_memory();
    old_timer_ = D::set_tune_timer({});
  }
  ~TuneScope() {
    D::set_tune_timer(old_timer_);
    D::forget_tune_memory();
    kernel_cache::set_directory(old_);
    if (owned_) std::filesystem::remove_all(dir_);
  }
  TuneScope(const TuneScope&) = delete;
  TuneScope& operator=(const TuneScope&) = delete;
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path old_, dir_;
  bool owned_;
  D::TuneTimer old_timer_;
};

/// The DG right-hand side's einsums at Np nodes (p = 1: 4, p = 4: 35) on E elements.
std::vector<L::Array<double>> dg_einsums(std::int64_t np, std::int64_t e) {
  const std::int64_t nfp = np == 4 ? 3 : np == 10 ? 6 : np == 20 ? 10 : 15;
  auto ijm = L::placeholder<double>("ijm", {3, 3, e, 1});
  auto S = L::placeholder<double>("S", {3, np, np});
  auto u = L::placeholder<double>("u", {e, np});
  auto Lf = L::placeholder<double>("L", {np, 4, nfp});
  auto sJ = L::placeholder<double>("sJ", {4, e, nfp});
  auto F = L::placeholder<double>("F", {4, e, nfp});
  auto Mi = L::placeholder<double>("Mi", {np, np});
  auto Ji = L::placeholder<double>("Ji", {e, np});
  auto grad = L::einsum("xrej,rij,ej->xei", ijm, S, u);
  auto lift = L::einsum("ifj,fej,fej->ei", Lf, sJ, F);
  return {grad, L::einsum("ei,ij,ej->ei", Ji, Mi, lift) - L::sum(grad, 0)};
}

std::vector<D::NodePtr> nodes_of(const std::vector<L::Array<double>>& a) {
  std::vector<D::NodePtr> n;
  for (const auto& x : a) n.push_back(x.node());
  return n;
}

/// A fake timer: a candidate's time is a fixed function of its shape (the one preferred first),
/// and every call is counted.
struct FakeTimer {
  std::string prefer;  // the shape that is fastest where it is a candidate
  int calls = 0;
  std::size_t timed = 0;
  D::TuneTimer timer() {
    return [this](const D::TuneRequest& r) {
      ++calls;
      std::vector<std::vector<std::vector<double>>> out;
      for (const auto& g : r.groups) {
        std::vector<std::vector<double>> t;
        for (std::size_t i = 0; i < g.codes.size(); ++i) {
          // Fastest: the preferred shape; then candidates in reverse order (never the rule's).
          const double base = g.codes[i].shape == prefer ? 1.0 : 10.0 + double(g.codes.size() - i);
          t.push_back({base * 1.01, base, base * 1.02, base * 0.99 + 0.011, base});
          ++timed;
        }
        out.push_back(std::move(t));
      }
      return out;
    };
  }
};

/// The shape chosen for the first kernel with alternatives.
std::size_t first_group(const D::TunedSource& t) {
  for (std::size_t i = 0; i < t.candidates.size(); ++i) {
    if (t.candidates[i].size() > 1) return i;
  }
  return t.candidates.size();
}

TEST(LazyTune, CandidatesAreDistinctAndTheRuleComesFirst) {
  TuneScope scope;
  for (std::int64_t np : {4, 35}) {
    const auto t = D::tune_source(nodes_of(dg_einsums(np, 3000)), {.tune = L::Tune::cached}, "X");
    const auto rule = D::generate_source(nodes_of(dg_einsums(np, 3000)), {}, LazyDialect::cuda);
    EXPECT_EQ(t.source, rule.source);  // nothing cached: the size rule
    EXPECT_GT(t.groups, 0u);
    for (std::size_t i = 0; i < t.candidates.size(); ++i) {
      if (t.candidates[i].empty()) continue;
      EXPECT_EQ(t.candidates[i].front(), t.shapes[i]) << "the rule's shape first";
      for (std::size_t a = 0; a < t.candidates[i].size(); ++a) {
        for (std::size_t b = a + 1; b < t.candidates[i].size(); ++b) {
          EXPECT_NE(t.candidates[i][a], t.candidates[i][b]);
        }
      }
      EXPECT_EQ(t.choices[i], "rule");
    }
  }
}

TEST(LazyTune, FakeTimerPicksTheFastestDeterministically) {
  TuneScope scope;
  FakeTimer fake{"thread"};
  D::set_tune_timer(fake.timer());
  // p = 4: the rule stages the operators; "thread" (nothing staged, a thread per output) is the
  // fake's fastest.
  const auto t = D::tune_source(nodes_of(dg_einsums(35, 3000)), {.tune = L::Tune::on}, "Fake GPU");
  EXPECT_EQ(fake.calls, 1);  // every group in one request (one module)
  EXPECT_EQ(t.timed, t.groups);
  EXPECT_EQ(t.candidates_timed, fake.timed);
  const std::size_t g = first_group(t);
  ASSERT_LT(g, t.candidates.size());
  for (std::size_t i = 0; i < t.candidates.size(); ++i) {
    if (t.candidates[i].size() < 2) continue;
    EXPECT_EQ(t.choices[i], "timed");
    const bool offered = std::find(t.candidates[i].begin(), t.candidates[i].end(), "thread") !=
                         t.candidates[i].end();
    // Not offered: the fake's next best is the last candidate.
    EXPECT_EQ(t.shapes[i], offered ? "thread" : t.candidates[i].back()) << i;
  }
  // The choice is in the source.
  EXPECT_NE(t.source.find("// shape: thread\n"), std::string::npos);
  // Same timings, same choice (another device name: timed again, no cache shared).
  const auto again =
      D::tune_source(nodes_of(dg_einsums(35, 3000)), {.tune = L::Tune::on}, "Other GPU");
  EXPECT_EQ(fake.calls, 2);
  EXPECT_EQ(again.source, t.source);
  EXPECT_EQ(again.shapes, t.shapes);
}

TEST(LazyTune, TheRuleStaysUnlessAnotherIsClearlyFaster) {
  TuneScope scope;
  // Every candidate equal, or 1 % faster: the rule stays (timing noise does not flip it).
  for (double f : {1.0, 0.99}) {
    D::set_tune_timer([f](const D::TuneRequest& r) {
      std::vector<std::vector<std::vector<double>>> out;
      for (const auto& g : r.groups) {
        std::vector<std::vector<double>> t(g.codes.size(), std::vector<double>{1.0});
        for (std::size_t i = 1; i < t.size(); ++i) t[i] = {f};
        out.push_back(std::move(t));
      }
      return out;
    });
    D::forget_tune_memory();
    std::filesystem::remove_all(scope.dir());
    const auto t = D::tune_source(nodes_of(dg_einsums(20, 3000)), {.tune = L::Tune::on}, "G");
    const auto rule = D::generate_source(nodes_of(dg_einsums(20, 3000)), {}, LazyDialect::cuda);
    EXPECT_EQ(t.source, rule.source) << f;
  }
}

TEST(LazyTune, SecondProgramAndNewProcessUseTheCache) {
  TuneScope scope;
  FakeTimer fake{"thread"};
  D::set_tune_timer(fake.timer());
  const auto first = D::tune_source(nodes_of(dg_einsums(35, 3000)), {.tune = L::Tune::on}, "GPU");
  ASSERT_EQ(fake.calls, 1);
  // Another program with the same kernels and sizes: from memory, not timed.
  const auto second = D::tune_source(nodes_of(dg_einsums(35, 3000)), {.tune = L::Tune::on}, "GPU");
  EXPECT_EQ(fake.calls, 1);
  EXPECT_EQ(second.source, first.source);
  EXPECT_EQ(second.hits, second.groups);
  for (std::size_t i = 0; i < second.choices.size(); ++i) {
    if (second.candidates[i].size() > 1) {
      EXPECT_EQ(second.choices[i], "memory");
    }
  }
  // Other sizes are other keys: timed.
  (void)D::tune_source(nodes_of(dg_einsums(35, 2000)), {.tune = L::Tune::on}, "GPU");
  EXPECT_EQ(fake.calls, 2);
  // As a new process: memory forgotten, the disk has it ("cached" never times).
  D::forget_tune_memory();
  const auto disk =
      D::tune_source(nodes_of(dg_einsums(35, 3000)), {.tune = L::Tune::cached}, "GPU");
  EXPECT_EQ(fake.calls, 2);
  EXPECT_EQ(disk.source, first.source);
  for (std::size_t i = 0; i < disk.choices.size(); ++i) {
    if (disk.candidates[i].size() > 1) {
      EXPECT_EQ(disk.choices[i], "disk");
    }
  }
  // A real second process (this program, running the child test below with the same cache
  // directory): it finds every choice on disk and times nothing.
  const std::string cmd = "SLUICE_KERNEL_CACHE_DIR='" + scope.dir().string() +
                          "' SLUICE_TUNE_CHILD=1 '" +
                          std::filesystem::read_symlink("/proc/self/exe").string() +
                          "' --gtest_also_run_disabled_tests "
                          "--gtest_filter=LazyTune.DISABLED_ChildFindsChoicesOnDisk >/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// Run by the test above in a process of its own.
TEST(LazyTune, DISABLED_ChildFindsChoicesOnDisk) {
  if (std::getenv("SLUICE_TUNE_CHILD") == nullptr) GTEST_SKIP() << "run by the test above";
  TuneScope scope(std::getenv("SLUICE_KERNEL_CACHE_DIR"));
  FakeTimer fake{"staged(b2)"};  // would choose otherwise: a timing would show
  D::set_tune_timer(fake.timer());
  const auto t = D::tune_source(nodes_of(dg_einsums(35, 3000)), {.tune = L::Tune::on}, "GPU");
  EXPECT_EQ(fake.calls, 0);
  EXPECT_GT(t.groups, 0u);
  EXPECT_EQ(t.hits, t.groups);
  EXPECT_NE(t.source.find("// shape: thread\n"), std::string::npos);
}

TEST(LazyTune, OffIsTheSizeRuleAndTimesNothing) {
  TuneScope scope;
  FakeTimer fake{"thread"};
  D::set_tune_timer(fake.timer());
  (void)D::tune_source(nodes_of(dg_einsums(35, 3000)), {.tune = L::Tune::on}, "GPU");
  ASSERT_EQ(fake.calls, 1);
  // Off ignores the remembered choice too.
  const auto off = D::tune_source(nodes_of(dg_einsums(35, 3000)), {.tune = L::Tune::off}, "GPU");
  const auto rule = D::generate_source(nodes_of(dg_einsums(35, 3000)), {}, LazyDialect::cuda);
  EXPECT_EQ(off.source, rule.source);
  EXPECT_EQ(off.hits, 0u);
  EXPECT_EQ(off.timed, 0u);
  EXPECT_EQ(fake.calls, 1);
  // "cached" with nothing remembered: the rule, nothing timed.
  const auto cached =
      D::tune_source(nodes_of(dg_einsums(35, 3000)), {.tune = L::Tune::cached}, "New GPU");
  EXPECT_EQ(cached.source, rule.source);
  EXPECT_EQ(fake.calls, 1);
}

TEST(LazyTune, EnvironmentVariableSetsTheMode) {
  TuneScope scope;
  struct Env {
    std::string saved;
    bool had;
    Env() : had(std::getenv("SLUICE_LAZY_TUNE") != nullptr) {
      if (had) saved = std::getenv("SLUICE_LAZY_TUNE");
    }
    ~Env() {
      if (had) {
        ::setenv("SLUICE_LAZY_TUNE", saved.c_str(), 1);
      } else {
        ::unsetenv("SLUICE_LAZY_TUNE");
      }
    }
  } env;
  auto x = L::placeholder<double>("x", {8});
  ::setenv("SLUICE_LAZY_TUNE", "off", 1);
  EXPECT_EQ(L::compile({x + 1.0}).stats().tune_mode, "off");
  ::setenv("SLUICE_LAZY_TUNE", "cached", 1);
  EXPECT_EQ(L::compile({x + 1.0}).stats().tune_mode, "cached");
  // The option wins over the environment.
  EXPECT_EQ(L::compile({x + 1.0}, {.tune = L::Tune::on}).stats().tune_mode, "on");
  ::setenv("SLUICE_LAZY_TUNE", "fast", 1);
  try {
    (void)L::compile({x + 1.0});
    FAIL() << "an unknown mode was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SLUICE_LAZY_TUNE is 'fast'; set it to off, on or cached"),
              std::string::npos)
        << e.what();
  }
  ::unsetenv("SLUICE_LAZY_TUNE");
  EXPECT_EQ(L::compile({x + 1.0}).stats().tune_mode, "on");
}

class LazyTuned : public BackendTest {
 protected:
  static std::vector<double> fill(std::size_t n, double s) {
    std::vector<double> h(n);
    for (std::size_t i = 0; i < n; ++i) h[i] = std::sin(s * static_cast<double>(i + 1));
    return h;
  }
  DeviceBuffer<double> upload(const Context& ctx, const std::vector<double>& h) {
    DeviceBuffer<double> d(ctx, h.size());
    copy(ctx, d, h);
    ctx.synchronize();  // h may be a temporary
    return d;
  }
};

// Every candidate shape of the DG einsums at p = 1 and p = 3 (each chosen in turn by a fake
// timer that makes it the fastest), run, against plain loops. On the host: one shape per kernel,
// nothing to tune, the mode accepted and reported.
TEST_P(LazyTuned, EveryCandidateOfTheDgEinsumsMatchesPlainLoops) {
  TuneScope scope;
  Context ctx = make_context();
  for (const std::int64_t np : {4, 20}) {
    const std::int64_t e = 1200, nfp = np == 4 ? 3 : 10;
    const auto hijm = fill(static_cast<std::size_t>(9 * e), 0.21),
               hS = fill(static_cast<std::size_t>(3 * np * np), 0.3),
               hu = fill(static_cast<std::size_t>(e * np), 0.7),
               hL = fill(static_cast<std::size_t>(np * 4 * nfp), 1.1),
               hsJ = fill(static_cast<std::size_t>(4 * e * nfp), 0.13),
               hF = fill(static_cast<std::size_t>(4 * e * nfp), 0.29),
               hM = fill(static_cast<std::size_t>(np * np), 0.5),
               hJ = fill(static_cast<std::size_t>(e * np), 0.9);
    auto at = [](const std::vector<double>& v, std::int64_t i) {
      return v[static_cast<std::size_t>(i)];
    };
    // Plain loops: grad[x,e,i] = sum_r,j ijm[x,r,e] S[r,i,j] u[e,j];
    // rhs[e,i] = Ji[e,i] sum_j Mi[i,j] lift[e,j] - sum_x grad[x,e,i].
    std::vector<double> grad(static_cast<std::size_t>(3 * e * np)),
        rhs(static_cast<std::size_t>(e * np));
    for (std::int64_t q = 0; q < e; ++q) {
      std::vector<double> lift(static_cast<std::size_t>(np));
      for (std::int64_t i = 0; i < np; ++i) {
        double gs = 0;
        for (std::int64_t x = 0; x < 3; ++x) {
          double s = 0;
          for (std::int64_t r = 0; r < 3; ++r) {
            for (std::int64_t j = 0; j < np; ++j) {
              s += at(hijm, (x * 3 + r) * e + q) * at(hS, (r * np + i) * np + j) *
                   at(hu, q * np + j);
            }
          }
          grad[static_cast<std::size_t>((x * e + q) * np + i)] = s;
          gs += s;
        }
        double l = 0;
        for (std::int64_t f = 0; f < 4; ++f) {
          for (std::int64_t j = 0; j < nfp; ++j) {
            l += at(hL, (i * 4 + f) * nfp + j) * at(hsJ, (f * e + q) * nfp + j) *
                 at(hF, (f * e + q) * nfp + j);
          }
        }
        lift[static_cast<std::size_t>(i)] = l;
        rhs[static_cast<std::size_t>(q * np + i)] = -gs;
      }
      for (std::int64_t i = 0; i < np; ++i) {
        double s = 0;
        for (std::int64_t j = 0; j < np; ++j)
          s += at(hM, i * np + j) * lift[static_cast<std::size_t>(j)];
        rhs[static_cast<std::size_t>(q * np + i)] += at(hJ, q * np + i) * s;
      }
    }
    auto dijm = upload(ctx, hijm), dS = upload(ctx, hS), du = upload(ctx, hu), dL = upload(ctx, hL),
         dsJ = upload(ctx, hsJ), dF = upload(ctx, hF), dM = upload(ctx, hM), dJ = upload(ctx, hJ);
    // Candidate c of every group is the fastest (the last one where a group has fewer).
    for (std::size_t c = 0;; ++c) {
      std::size_t most = 1;
      D::set_tune_timer([c, &most](const D::TuneRequest& r) {
        std::vector<std::vector<std::vector<double>>> out;
        for (const auto& g : r.groups) {
          most = std::max(most, g.codes.size());
          std::vector<std::vector<double>> t;
          for (std::size_t i = 0; i < g.codes.size(); ++i) {
            t.push_back({i == std::min(c, g.codes.size() - 1) ? 1.0 : 2.0});
          }
          out.push_back(std::move(t));
        }
        return out;
      });
      D::forget_tune_memory();
      std::filesystem::remove_all(scope.dir());
      L::Program p = L::compile(dg_einsums(np, e), {.device = device(), .tune = L::Tune::on});
      const auto st = p.stats();
      EXPECT_EQ(st.tune_mode, "on");
      if (is_host()) {
        EXPECT_EQ(st.tune_groups, 0u);
        EXPECT_EQ(st.tune_candidates, 0u);
      } else {
        EXPECT_GT(st.tune_groups, 0u);
        EXPECT_EQ(st.tuned_groups, st.tune_groups);
        for (const auto& k : p.kernels()) {
          if (k.candidates.size() < 2) continue;
          EXPECT_EQ(k.shape, k.candidates[std::min(c, k.candidates.size() - 1)]) << k.name;
          EXPECT_NE(k.source.find("// shape: " + k.shape + "\n"), std::string::npos);
        }
      }
      DeviceBuffer<double> og(ctx, static_cast<std::size_t>(3 * e * np)),
          orhs(ctx, static_cast<std::size_t>(e * np));
      p.run(ctx,
            {{"ijm", dijm},
             {"S", dS},
             {"u", du},
             {"L", dL},
             {"sJ", dsJ},
             {"F", dF},
             {"Mi", dM},
             {"Ji", dJ}},
            {og, orhs});
      std::vector<double> g(grad.size()), r(rhs.size());
      copy(ctx, g, og);
      copy(ctx, r, orhs);
      ctx.synchronize();
      for (std::size_t i = 0; i < g.size(); ++i) {
        ASSERT_NEAR(g[i], grad[i], 1e-11) << "Np " << np << " candidate " << c << " grad " << i;
      }
      for (std::size_t i = 0; i < r.size(); ++i) {
        ASSERT_NEAR(r[i], rhs[i], 1e-10) << "Np " << np << " candidate " << c << " rhs " << i;
      }
      if (c + 1 >= most) break;
    }
  }
}

// The backend's own timer: on cuda every candidate is built and timed on the device (each median
// above 0), the fastest kept, and a second program finds the choices without timing; the
// result is right whichever shape won. On the host: nothing to time, the mode reported.
TEST_P(LazyTuned, TheBackendsTimerChoosesAndRemembers) {
  TuneScope scope;
  Context ctx = make_context();
  const std::int64_t e = 3000, np = 20;
  auto make = [&] {
    return L::compile(dg_einsums(np, e), {.device = device(), .tune = L::Tune::on});
  };
  L::Program p = make();
  const auto st = p.stats();
  EXPECT_EQ(st.tune_mode, "on");
  if (is_host()) {
    EXPECT_EQ(st.tune_groups, 0u);
    for (const auto& k : p.kernels()) EXPECT_TRUE(k.candidates.empty()) << k.name;
  } else {
    ASSERT_GT(st.tune_groups, 0u);
    EXPECT_EQ(st.tuned_groups, st.tune_groups);
    EXPECT_GT(st.tune_candidates, st.tune_groups);
    EXPECT_GT(st.tune_ms, 0);
    for (const auto& k : p.kernels()) {
      if (k.candidates.size() < 2) continue;
      EXPECT_EQ(k.choice, "timed");
      ASSERT_EQ(k.candidate_us.size(), k.candidates.size()) << k.name;
      for (double us : k.candidate_us) EXPECT_GT(us, 0) << k.name;
      const auto best = std::min_element(k.candidate_us.begin(), k.candidate_us.end());
      const auto chosen = std::find(k.candidates.begin(), k.candidates.end(), k.shape);
      ASSERT_NE(chosen, k.candidates.end());
      // The fastest, or the rule's within 3 %.
      const auto i = static_cast<std::size_t>(chosen - k.candidates.begin());
      EXPECT_TRUE(k.candidate_us[i] == *best || (i == 0 && *best >= 0.97 * k.candidate_us[0]))
          << k.name;
    }
    L::Program again = make();
    EXPECT_EQ(again.stats().tuned_groups, 0u);
    EXPECT_EQ(again.stats().tune_hits, st.tune_groups);
    EXPECT_EQ(again.source(), p.source());
  }
  // Right results in the chosen shapes (the grad output against a sum written out).
  const auto hijm = fill(static_cast<std::size_t>(9 * e), 0.21),
             hS = fill(static_cast<std::size_t>(3 * np * np), 0.3),
             hu = fill(static_cast<std::size_t>(e * np), 0.7);
  auto dijm = upload(ctx, hijm), dS = upload(ctx, hS), du = upload(ctx, hu),
       dL = upload(ctx, fill(static_cast<std::size_t>(np * 40), 1.1)),
       dsJ = upload(ctx, fill(static_cast<std::size_t>(40 * e), 0.13)),
       dF = upload(ctx, fill(static_cast<std::size_t>(40 * e), 0.29)),
       dM = upload(ctx, fill(static_cast<std::size_t>(np * np), 0.5)),
       dJ = upload(ctx, fill(static_cast<std::size_t>(e * np), 0.9));
  DeviceBuffer<double> og(ctx, static_cast<std::size_t>(3 * e * np)),
      orhs(ctx, static_cast<std::size_t>(e * np));
  p.run(ctx,
        {{"ijm", dijm},
         {"S", dS},
         {"u", du},
         {"L", dL},
         {"sJ", dsJ},
         {"F", dF},
         {"Mi", dM},
         {"Ji", dJ}},
        {og, orhs});
  std::vector<double> g(og.size());
  copy(ctx, g, og);
  ctx.synchronize();
  for (std::int64_t x = 0; x < 3; ++x) {
    for (std::int64_t q = 0; q < e; q += 7) {
      for (std::int64_t i = 0; i < np; ++i) {
        double s = 0;
        for (std::int64_t r = 0; r < 3; ++r) {
          for (std::int64_t j = 0; j < np; ++j) {
            s += hijm[static_cast<std::size_t>((x * 3 + r) * e + q)] *
                 hS[static_cast<std::size_t>((r * np + i) * np + j)] *
                 hu[static_cast<std::size_t>(q * np + j)];
          }
        }
        ASSERT_NEAR(g[static_cast<std::size_t>((x * e + q) * np + i)], s, 1e-11);
      }
    }
  }
}

SLUICE_INSTANTIATE_BACKENDS(LazyTuned);

}  // namespace
}  // namespace sluice::test
