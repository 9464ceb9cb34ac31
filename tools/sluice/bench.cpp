// `sluice bench`: the reference's CG/TFQMR benchmark (000 §4.1): Laplace problems of several
// stencils and sizes, 20 Jacobi-preconditioned iterations, one warm-up and then the minimum and
// median of the timed solves, in sync, async and graph modes. Writes JSON (the schema bench/plot.py
// and bench/peers/jax_cupy_cg.py share) and prints a table.

#include <fmt/core.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "bench_scaling.hpp"
#include "commands.hpp"
#include "la_problem.hpp"
#include "options.hpp"
#include "sluice/context.hpp"
#include "sluice/error.hpp"
#include "sluice/la.hpp"
#include "sluice/memory.hpp"
#include "sluice/platform.hpp"

#ifndef SLUICE_PLOT_SCRIPT
#define SLUICE_PLOT_SCRIPT "bench/plot.py"
#endif

namespace sluice::cli {
using namespace sluice::la;  // NOLINT: the la layer is what these commands drive
namespace {

struct BenchOptions {
  std::string backend;
  std::string device;
  std::string stencils = "2d5,2d9,3d7,3d27";
  std::string ksps = "cg,tfqmr";
  std::string cg_variants = "classic";  // --scaling only
  std::string modes = "sync,async,graph";
  std::string op = "matrix-free";
  double min_nnz = 1e3;
  double max_nnz = 0;  // 0: 1e8 on an accelerator, 1e7 on the host
  int per_decade = 2;
  std::string grids;  // points per dimension, comma-separated: these sizes instead of the nnz rule
  int iterations = 20;
  int repeat = 10;
  int check_every = 0;
  std::string json = "bench_la.json";
  bool check_sweep = false;
  bool quiet = false;
  std::string plot;  // a directory: run bench/plot.py on the JSON into it
  bool baseline = true;
  ScalingOptions scaling;  // --scaling: time against ranks instead (bench_scaling.cpp)
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string w; std::getline(ss, w, ',');) {
    if (!w.empty()) out.push_back(w);
  }
  return out;
}

/// A progress line on stderr: redrawn in place on a terminal, one line per step otherwise.
class Progress {
 public:
  Progress(std::size_t total, bool quiet) : total_(total), quiet_(quiet), tty_(isatty(2) != 0) {}
  void step(const std::string& what) {
    ++done_;
    if (quiet_) return;
    constexpr int width = 30;
    const int filled = static_cast<int>(width * done_ / std::max<std::size_t>(total_, 1));
    const std::string bar = std::string(static_cast<std::size_t>(filled), '#') +
                            std::string(static_cast<std::size_t>(width - filled), ' ');
    fmt::print(stderr, "{}[{}] {:>4}/{} {:<60}{}", tty_ ? "\r" : "", bar, done_, total_, what,
               tty_ ? "" : "\n");
    std::fflush(stderr);
  }
  void finish() {
    if (!quiet_ && tty_) fmt::print(stderr, "\n");
  }

 private:
  std::size_t total_, done_ = 0;
  bool quiet_, tty_;
};

/// Device-to-device copy bandwidth (bytes read plus written per second): the "memory-bandwidth
/// floor" divides a solve's bytes by it.
double copy_bandwidth(const Context& ctx) {
  const bool host = ctx.device().backend == "host";
  const std::size_t n = (host ? std::size_t{64} : std::size_t{512}) << 20;  // bytes
  DeviceBuffer<std::byte> a(ctx, n), b(ctx, n);
  memset(ctx, a, 1);
  memset(ctx, b, 2);
  copy(ctx, b, a);
  ctx.synchronize();
  double best = 1e300;
  for (int r = 0; r < 5; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int k = 0; k < 4; ++k) copy(ctx, b, a);
    ctx.synchronize();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return 2.0 * 4.0 * static_cast<double>(n) / best;
}

/// Problems from this many nonzeros get triads of their own (bench's loop); the floor's goal
/// starts at 1e6, and below it the vectors fit in the caches.
constexpr double kLocalTriadNnz = 5e5;

/// The host's bandwidth as STREAM's triad a = b + s c measures it, on every hardware thread over
/// arrays far larger than the caches, each thread on its own slice (which it touched first, so its
/// pages are near it): bytes read and written per second, 24 per element as STREAM counts them.
/// Measured twice, interleaved: with regular stores (STREAM as compiled by default, whose
/// write-allocate reads of `a` are not counted) and with streaming stores (no such reads, as
/// STREAM built with them). The floor divides by the better of the two, as the la kernels also
/// stream the vectors they only write when these exceed the caches.
struct TriadBandwidth {
  double regular = 0;
  double streaming = 0;
  [[nodiscard]] double best() const { return std::max(regular, streaming); }
};

/// The triad's arrays, allocated and first touched once per run (each thread its own slice),
/// then measured as often as the bench asks.
class Triad {
 public:
  Triad() : threads_(std::max(1u, std::thread::hardware_concurrency())) {
    for (auto* p : {&a_, &b_, &c_}) {
      p->reset(static_cast<double*>(std::aligned_alloc(64, kN * sizeof(double))));
      if (!*p) throw std::bad_alloc();
    }
    (void)sweep(Sweep::init);
  }

  /// Ten sweeps with each kind of store, interleaved; the best of each.
  TriadBandwidth measure() {
    double regular = 1e300, streaming = 1e300;
    for (int r = 0; r < 10; ++r) {
      regular = std::min(regular, sweep(Sweep::regular));
      streaming = std::min(streaming, sweep(Sweep::streaming));
    }
    const auto bytes = 24.0 * static_cast<double>(kN / threads_ / 8 * 8 * threads_);
#if defined(__x86_64__)
    return {bytes / regular, bytes / streaming};
#else
    return {bytes / regular, 0.0};
#endif
  }

 private:
  static constexpr std::size_t kN = std::size_t{1} << 24;  // 128 MiB per array
  enum class Sweep { init, regular, streaming };
  struct Free {
    void operator()(double* p) const { std::free(p); }
  };

  double sweep(Sweep kind) {
    std::vector<std::thread> team;
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t t = 0; t < threads_; ++t) {
      team.emplace_back([&, t] {
        // Slices of whole cache lines, so every streamed pair of elements is aligned.
        const std::size_t lo = kN * t / threads_ / 8 * 8, hi = kN * (t + 1) / threads_ / 8 * 8;
        double* __restrict x = a_.get();
        double* __restrict y = b_.get();
        double* __restrict z = c_.get();
        if (kind == Sweep::init) {
          for (std::size_t i = lo; i < hi; ++i) {
            x[i] = 0;
            y[i] = 1;
            z[i] = 2;
          }
          return;
        }
#if defined(__x86_64__)
        if (kind == Sweep::streaming) {
          const __m128d s = _mm_set1_pd(3.0);
          for (std::size_t i = lo; i < hi; i += 2) {
            _mm_stream_pd(x + i, _mm_add_pd(_mm_load_pd(y + i), _mm_mul_pd(s, _mm_load_pd(z + i))));
          }
          _mm_sfence();
          return;
        }
#endif
        for (std::size_t i = lo; i < hi; ++i) x[i] = y[i] + 3.0 * z[i];
      });
    }
    for (auto& th : team) th.join();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  std::size_t threads_;
  std::unique_ptr<double[], Free> a_, b_, c_;
};

/// The reference's baseline (000 §4, main_gpu): PETSc's KSPSolve_CG written with sluice's
/// synchronous, unfused Vec and Mat calls, as a PETSc user's solver runs: per iteration eight
/// operations and three reductions whose values the host waits for. Fixed iterations, Jacobi,
/// preconditioned norm (computed, as PETSc does, though nothing tests it).
class PetscStyleCg {
 public:
  PetscStyleCg(const Mat& A, const Context& ctx)
      : A_(A),
        r_(ctx, size(A)),
        z_(ctx, size(A)),
        p_(ctx, size(A)),
        w_(ctx, size(A)),
        inv_(ctx, size(A)) {
    Vec one(ctx, size(A));
    set(one, 1.0);
    diagonal(A, inv_);
    pointwise_divide(inv_, one, inv_);
  }

  void solve(const Vec& b, Vec& x, int iterations) {
    set(x, 0.0);
    copy(b, r_);
    pointwise_mult(z_, r_, inv_);
    volatile double dp = norm(z_);
    double beta = dot(z_, r_), betaold = 1.0;
    for (int i = 0; i < iterations; ++i) {
      if (i == 0) {
        copy(z_, p_);
      } else {
        aypx(p_, beta / betaold, z_);
      }
      mult(A_, p_, w_);
      const double dpi = dot(p_, w_);
      betaold = beta;
      const double a = beta / dpi;
      axpy(x, a, p_);
      axpy(r_, -a, w_);
      pointwise_mult(z_, r_, inv_);
      dp = norm(z_);
      beta = dot(z_, r_);
    }
    (void)dp;
  }

 private:
  static std::size_t size(const Mat& A) { return static_cast<std::size_t>(A.rows()); }
  Mat A_;
  Vec r_, z_, p_, w_, inv_;
};

int run(const BenchOptions& o) {
  Device device = default_device();
  if (!o.device.empty()) {
    device = Device::parse(o.device);
  } else if (!o.backend.empty()) {
    device = Device{o.backend, 0};
  }
  Context ctx(ContextOptions{.device = device, .name = "bench"});
  const bool host = device.backend == "host";
  const double max_nnz = o.max_nnz > 0 ? o.max_nnz : (host ? 1e7 : 1e8);
  if (max_nnz < o.min_nnz) {
    throw Error(Errc::invalid_argument,
                fmt::format("--max-nnz ({:g}) is below --min-nnz ({:g}); raise --max-nnz", max_nnz,
                            o.min_nnz));
  }

  std::vector<Stencil> stencils;
  for (const auto& s : split(o.stencils)) stencils.push_back(parse_stencil(s));
  std::vector<KspType> ksps;
  for (const auto& s : split(o.ksps)) ksps.push_back(parse_ksp_type(s));
  std::vector<SolveMode> modes;
  for (const auto& s : split(o.modes)) modes.push_back(parse_solve_mode(s));
  std::vector<bool> matrix_free;
  if (o.op == "matrix-free" || o.op == "both") matrix_free.push_back(true);
  if (o.op == "csr" || o.op == "both") matrix_free.push_back(false);
  if (matrix_free.empty()) {
    throw Error(Errc::invalid_argument, "--operator must be matrix-free, csr or both");
  }

  // Sizes: per_decade grid sizes per decade of NNZ, distinct per stencil.
  struct Size {
    Stencil kind;
    std::int64_t n;
  };
  std::vector<Size> sizes;
  for (auto kind : stencils) {
    std::set<std::int64_t> ns;
    if (!o.grids.empty()) {
      for (const auto& g : split(o.grids)) {
        const long long n = std::atoll(g.c_str());
        if (n < 2) {
          throw Error(Errc::invalid_argument,
                      fmt::format("--grids: '{}' is not a grid size (points per dimension, at "
                                  "least 2)",
                                  g));
        }
        ns.insert(n);
      }
    } else {
      const int steps =
          static_cast<int>(std::ceil(std::log10(max_nnz / o.min_nnz) * o.per_decade - 1e-9));
      for (int i = 0; i <= steps; ++i) {
        const double target = o.min_nnz * std::pow(10.0, static_cast<double>(i) / o.per_decade);
        ns.insert(grid_for_nnz(kind, std::min(target, max_nnz)));
      }
    }
    for (auto n : ns) sizes.push_back({kind, n});
  }

  nlohmann::ordered_json out;
  out["schema"] = "sluice-bench-la/1";
  out["tool"] = "sluice";
  out["device"] = ctx.device().to_string();
  out["device_name"] = device_info(ctx.device()).name;
  out["iterations"] = o.iterations;
  out["pc"] = "jacobi";
  out["repeat"] = o.repeat;
  out["check_every"] = o.check_every;
  const double copy_bw = copy_bandwidth(ctx);
  out["copy_bandwidth_gbps"] = copy_bw / 1e9;
  // The floor's bandwidth: on a GPU its copy bandwidth; on the host STREAM's triad on every core
  // (the host's copy is one thread's memmove, which one core cannot saturate).
  std::optional<Triad> triads;
  if (host) triads.emplace();
  const TriadBandwidth triad = host ? triads->measure() : TriadBandwidth{};
  const double bandwidth = host ? triad.best() : copy_bw;
  if (host) {
    out["triad_bandwidth_gbps"] = bandwidth / 1e9;
    out["triad_regular_gbps"] = triad.regular / 1e9;
    out["triad_streaming_gbps"] = triad.streaming / 1e9;
  }
  out["floor_bandwidth"] = host ? "triad" : "copy";
  out["results"] = nlohmann::ordered_json::array();

  const std::size_t baselines =
      o.baseline ? static_cast<std::size_t>(std::count(ksps.begin(), ksps.end(), KspType::cg)) : 0;
  Progress progress(sizes.size() * matrix_free.size() * (ksps.size() * modes.size() + baselines) +
                        (o.check_sweep ? 1 : 0),
                    o.quiet);
  struct Row {
    std::string label;
    double nnz;
    std::vector<double> min_s;
    double baseline_s = 0;
  };
  std::vector<Row> table;

  for (const auto& size : sizes) {
    for (bool free : matrix_free) {
      Problem p;
      try {
        p = stencil_problem(ctx, size.kind, size.n, free);
      } catch (const Error& e) {
        progress.step(fmt::format("skipped {} n={}: {}", to_string(size.kind), size.n, e.what()));
        continue;
      }
      const auto rows = static_cast<std::size_t>(p.A.rows());
      Vec one(ctx, rows), b(ctx, rows), x(ctx, rows);
      set(one, 1.0);
      mult(p.A, one, b);
      // On the host the floor of a problem whose vectors exceed the caches divides by triads
      // measured just before and just after its solves (the better of the two), not by the
      // run's first: on the development VM the triad moved from 45 to 70 GB/s between minutes.
      const bool local_triad = host && static_cast<double>(p.A.nnz()) >= kLocalTriadNnz;
      const std::size_t first_result = out["results"].size();
      const TriadBandwidth before = local_triad ? triads->measure() : TriadBandwidth{};
      for (auto type : ksps) {
        Row row{fmt::format("{:<5} {:<4} {:<11} n={}", to_string(type), to_string(size.kind),
                            free ? "matrix-free" : "csr", size.n),
                static_cast<double>(p.A.nnz()),
                {}};
        for (auto mode : modes) {
          progress.step(fmt::format("{} {}", row.label, to_string(mode)));
          Ksp ksp(p.A, {.type = type,
                        .pc = PcType::jacobi,
                        .max_it = o.iterations,
                        .fixed_iterations = true,
                        .mode = mode,
                        .check_every = o.check_every});
          KspResult result;
          (void)time_solve(ksp, b, x, ctx, result);  // warm-up
          Timing t;
          for (int r = 0; r < o.repeat; ++r)
            t.seconds.push_back(time_solve(ksp, b, x, ctx, result));
          const double per_iteration = bytes_per_iteration(p.A, type, PcType::jacobi);
          const double setup = setup_bytes(p.A, type, PcType::jacobi);
          const double bytes = per_iteration * o.iterations + setup;
          const double floor = bytes / bandwidth;
          nlohmann::ordered_json j;
          j["impl"] = "sluice-" + std::string(to_string(mode));
          j["mode"] = std::string(to_string(mode));
          j["ksp"] = std::string(to_string(type));
          j["stencil"] = std::string(to_string(size.kind));
          j["operator"] = free ? "matrix-free" : "csr";
          j["grid"] = p.grid;
          j["rows"] = p.A.rows();
          j["nnz"] = p.A.nnz();
          j["iterations_done"] = result.iterations;
          j["reason"] = std::string(to_string(result.reason));
          j["times_s"] = t.seconds;
          j["min_s"] = t.min();
          j["median_s"] = t.median();
          j["bytes_per_iteration"] = per_iteration;
          j["setup_bytes"] = setup;
          j["gbps"] = bytes / t.min() / 1e9;
          j["floor_s"] = floor;
          j["floor_ratio"] = t.min() / floor;
          out["results"].push_back(std::move(j));
          row.min_s.push_back(t.min());
        }
        if (o.baseline && type == KspType::cg) {
          progress.step(fmt::format("{} petsc-style sync", row.label));
          PetscStyleCg cg(p.A, ctx);
          auto once = [&] {
            ctx.synchronize();
            const auto start = std::chrono::steady_clock::now();
            cg.solve(b, x, o.iterations);
            ctx.synchronize();
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          };
          (void)once();
          Timing t;
          for (int r = 0; r < o.repeat; ++r) t.seconds.push_back(once());
          nlohmann::ordered_json j;
          j["impl"] = "petsc-style-sync";
          j["mode"] = "sync-unfused";
          j["ksp"] = "cg";
          j["stencil"] = std::string(to_string(size.kind));
          j["operator"] = free ? "matrix-free" : "csr";
          j["grid"] = p.grid;
          j["rows"] = p.A.rows();
          j["nnz"] = p.A.nnz();
          j["iterations_done"] = o.iterations;
          j["times_s"] = t.seconds;
          j["min_s"] = t.min();
          j["median_s"] = t.median();
          out["results"].push_back(std::move(j));
          row.baseline_s = t.min();
        }
        table.push_back(std::move(row));
      }
      if (local_triad) {
        const TriadBandwidth after = triads->measure();
        const double best = std::max(before.best(), after.best());
        for (std::size_t i = first_result; i < out["results"].size(); ++i) {
          auto& j = out["results"][i];
          if (!j.contains("floor_s")) continue;  // the PETSc-style baseline has none
          const double bytes = j["bytes_per_iteration"].get<double>() * o.iterations +
                               j["setup_bytes"].get<double>();
          j["triad_gbps"] = {{"before", before.best() / 1e9}, {"after", after.best() / 1e9}};
          j["floor_s"] = bytes / best;
          j["floor_ratio"] = j["min_s"].get<double>() / (bytes / best);
        }
      }
    }
  }

  if (o.check_sweep) {
    // Iterations per convergence check in async mode, on converging solves (rtol 1e-6): the
    // default of KspOptions::check_every comes from this table.
    progress.step("check interval sweep");
    out["check_sweep"] = nlohmann::ordered_json::array();
    for (std::int64_t n :
         host ? std::vector<std::int64_t>{32, 128} : std::vector<std::int64_t>{32, 128, 512}) {
      auto p = stencil_problem(ctx, Stencil::d2p5, n, true);
      const auto rows = static_cast<std::size_t>(p.A.rows());
      Vec one(ctx, rows), b(ctx, rows), x(ctx, rows);
      set(one, 1.0);
      mult(p.A, one, b);
      for (int k : {0, 1, 2, 4, 8, 16, 32, 64}) {
        Ksp ksp(p.A, {.type = KspType::cg,
                      .rtol = 1e-6,
                      .mode = k == 0 ? SolveMode::sync : SolveMode::async,
                      .check_every = std::max(1, k)});
        KspResult result;
        (void)time_solve(ksp, b, x, ctx, result);
        Timing t;
        for (int r = 0; r < std::max(3, o.repeat / 2); ++r) {
          t.seconds.push_back(time_solve(ksp, b, x, ctx, result));
        }
        out["check_sweep"].push_back({{"stencil", "2d5"},
                                      {"n", n},
                                      {"ksp", "cg"},
                                      {"mode", k == 0 ? "sync" : "async"},
                                      {"check_every", k},
                                      {"iterations", result.iterations},
                                      {"min_s", t.min()},
                                      {"median_s", t.median()}});
      }
    }
  }
  progress.finish();

  std::ofstream(o.json) << out.dump(1) << "\n";

  fmt::print(
      "device {} ({}), {} Jacobi iterations, min of {} solves after a warm-up; {} "
      "bandwidth {:.1f} GB/s{}\n",
      out["device"].get<std::string>(), out["device_name"].get<std::string>(), o.iterations,
      o.repeat, host ? "triad" : "copy", bandwidth / 1e9,
      host ? fmt::format(" (regular stores {:.1f}, streaming stores {:.1f})", triad.regular / 1e9,
                         triad.streaming / 1e9)
           : std::string());
  fmt::print("{:<40} {:>10}", "problem", "nnz");
  for (auto m : modes) fmt::print(" {:>12}", std::string(to_string(m)) + " ms");
  for (std::size_t i = 1; i < modes.size(); ++i) {
    fmt::print(" {:>11}", fmt::format("{}/{}", to_string(modes[0]), to_string(modes[i])));
  }
  if (o.baseline) fmt::print(" {:>14} {:>9}", "unfused ms", "ratio");
  fmt::print("\n");
  for (const auto& r : table) {
    fmt::print("{:<40} {:>10.3g}", r.label, r.nnz);
    for (double s : r.min_s) fmt::print(" {:>12.4f}", s * 1e3);
    for (std::size_t i = 1; i < r.min_s.size(); ++i) {
      fmt::print(" {:>11.2f}", r.min_s[0] / r.min_s[i]);
    }
    if (r.baseline_s > 0) {
      fmt::print(" {:>14.4f} {:>9.2f}", r.baseline_s * 1e3, r.baseline_s / r.min_s.back());
    }
    fmt::print("\n");
  }
  if (o.baseline) {
    fmt::print(
        "(unfused: PETSc's CG sequence through sluice's synchronous Vec/Mat calls, the "
        "reference's main_gpu baseline; its ratio is to the last mode)\n");
  }
  if (o.check_sweep) {
    fmt::print("\ncheck interval sweep (cg, 2d5, rtol 1e-6; k = 0 is sync):\n");
    for (const auto& c : out["check_sweep"]) {
      fmt::print("  n={:<5} k={:<3} {:>6} its  {:>9.3f} ms\n", c["n"].get<std::int64_t>(),
                 c["check_every"].get<int>(), c["iterations"].get<int>(),
                 c["min_s"].get<double>() * 1e3);
    }
  }
  fmt::print("wrote {}\n", o.json);
  if (!o.plot.empty()) {
    // The plots are matplotlib's (bench/plot.py); peers' files can be added there by hand.
    const std::string command =
        "python3 '" + std::string(SLUICE_PLOT_SCRIPT) + "' '" + o.json + "' --out '" + o.plot + "'";
    std::fflush(stdout);
    if (std::system(command.c_str()) != 0) {
      fmt::print(stderr, "sluice bench: plotting failed; run: {}\n", command);
    }
  }
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& parent) {
  auto o = std::make_shared<BenchOptions>();
  auto* app = parent.add_subcommand(
      "bench", "Time CG and TFQMR on Laplace problems over sizes (reference 000, section 4)");
  app->add_option("--backend", o->backend, "host or cuda (default: the best device)");
  app->add_option("--device", o->device, "A device such as cuda:1 (overrides --backend)");
  app->add_option("--stencils", o->stencils, "Comma-separated stencils")->capture_default_str();
  app->add_option("--ksp", o->ksps, "Comma-separated solvers")->capture_default_str();
  app->add_option("--modes", o->modes, "Comma-separated modes")->capture_default_str();
  app->add_option("--operator", o->op, "matrix-free, csr or both")->capture_default_str();
  app->add_option("--min-nnz", o->min_nnz, "Smallest problem (nonzeros)")
      ->capture_default_str()
      ->check(positive_real());
  app->add_option("--max-nnz", o->max_nnz, "Largest problem (default 1e8 on a GPU, 1e7 on host)")
      ->check(positive_real());
  app->add_option("--per-decade", o->per_decade, "Sizes per decade of nonzeros")
      ->capture_default_str()
      ->check(whole_number(1, 100));
  app->add_option("--grids", o->grids,
                  "Comma-separated grid sizes (points per dimension, e.g. 64,1024) instead of the "
                  "sizes from --min-nnz, --max-nnz and --per-decade");
  app->add_option("--iterations", o->iterations, "Iterations per solve")
      ->capture_default_str()
      ->check(whole_number(1, 1000000));
  app->add_option("--repeat", o->repeat, "Timed solves per configuration")
      ->capture_default_str()
      ->check(whole_number(1, 1000000));
  app->add_option("--check-every", o->check_every,
                  "Async convergence check interval (0: the solver's choice)")
      ->capture_default_str()
      ->check(whole_number(0, 1 << 20));
  app->add_option("--json", o->json, "Output file")->capture_default_str();
  app->add_flag("--check-sweep", o->check_sweep,
                "Also time converging async solves for several check intervals");
  app->add_flag("--quiet", o->quiet, "No progress output");
  app->add_flag("!--no-baseline", o->baseline,
                "Skip the PETSc-style unfused synchronous CG (the reference's baseline)");
  app->add_option("--plot", o->plot,
                  "Also draw PNG plots into this directory (python3, matplotlib)");
  auto& sc = o->scaling;
  app->add_option("--scaling", sc.kind,
                  "weak or strong: time one stencil against ranks (sluice solve --dist runs) "
                  "instead of sizes");
  app->add_option("--ranks", sc.ranks, "Scaling: rank counts")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--launch", sc.launch,
                  "Scaling: mpirun (a process per rank) or local (one process, --local-ranks)")
      ->capture_default_str();
  app->add_option("--grid", sc.grid, "Scaling: the grid (weak: per rank) NX,NY[,NZ]")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--cg-variant", o->cg_variants,
                  "Scaling: CG variants, comma-separated (classic, single-reduction): each a "
                  "solver of its own (cg, cg1)")
      ->capture_default_str();
  app->add_option("--dist-reduce", sc.reduce_paths,
                  "Scaling: where the solvers' small reductions run, comma-separated (peer, nccl, "
                  "auto; SLUICE_DIST_REDUCE): each a solver of its own (cg/peer, cg/nccl)")
      ->delimiter(',');
  app->add_option("--dist-exchange", sc.exchange_paths,
                  "Scaling: how the exchanges run, comma-separated (peer, nccl, auto; "
                  "SLUICE_DIST_EXCHANGE_PATH): each a solver of its own (cg/xpeer, cg/xnccl)")
      ->delimiter(',');
  app->add_flag("--stepwise", sc.stepwise,
                "Scaling: one rank solves through the distributed loop too (SLUICE_DIST_STEPWISE=1;"
                " tells the loop's cost from communication's)");
  return {app, [o] {
            if (o->scaling.kind.empty()) {
              if (o->cg_variants != "classic") {
                throw Error(Errc::invalid_argument,
                            "sluice bench: --cg-variant applies to --scaling runs; time a "
                            "variant on one device with --scaling strong --ranks 1");
              }
              return run(*o);
            }
            ScalingOptions s = o->scaling;
            // The size sweep's default list means "not given": 3d7, the benchmark.
            s.stencil = o->stencils == BenchOptions{}.stencils ? "3d7" : split(o->stencils).front();
            s.ksps = split(o->ksps);
            s.cg_variants = split(o->cg_variants);
            for (const auto& v : s.cg_variants) (void)parse_cg_variant(v);  // a clear error
            s.modes = split(o->modes);
            s.backend = o->device.empty() ? o->backend : o->device;
            s.iterations = o->iterations;
            s.repeat = o->repeat;
            s.json = o->json == "bench_la.json" ? "bench_scaling.json" : o->json;
            s.plot = o->plot;
            s.quiet = o->quiet;
            return run_scaling(s);
          }};
}

}  // namespace sluice::cli
