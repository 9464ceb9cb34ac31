// `sluice solve`: one Krylov solve of a Laplace problem (or a Matrix Market matrix), printing the
// iteration count, final residual norm, converged reason and time, PETSc's way.

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "la_problem.hpp"
#include "options.hpp"
#include "sluice/context.hpp"
#include "sluice/deps.hpp"
#include "sluice/dist.hpp"
#include "sluice/error.hpp"
#include "sluice/la.hpp"
#include "sluice/platform.hpp"
#include "solve.hpp"

namespace sluice::cli {
using namespace sluice::la;  // NOLINT: the la layer is what these commands drive
namespace {

int run(const SolveOptions& o) {
  // Across ranks when launched by mpirun, asked for several ranks in this process, or --dist.
  if (o.dist || o.local_ranks > 1 || dist::launched_by_mpirun()) return run_dist_solve(o);
  if (!o.grid.empty()) {
    throw sluice::Error(Errc::invalid_argument,
                        "sluice solve: --grid is for distributed solves (--dist)");
  }
  Device device = default_device();
  if (!o.device.empty()) {
    device = Device::parse(o.device);
  } else if (!o.backend.empty()) {
    device = Device{o.backend, 0};
  }
  Context ctx(ContextOptions{.device = device, .name = "solve"});

  Problem problem = o.matrix.empty() ? stencil_problem(ctx, parse_stencil(o.stencil), o.n, !o.csr)
                                     : file_problem(ctx, o.matrix);
  const auto rows = static_cast<std::size_t>(problem.A.rows());
  Vec b(ctx, rows), x(ctx, rows);
  const bool ones_rhs = o.rhs.empty();
  if (ones_rhs) {
    Vec one(ctx, rows);
    set(one, 1.0);
    mult(problem.A, one, b);  // b = A 1: the solution is known
  } else {
    b.assign(read_vector_file(o.rhs, rows));
  }

  std::vector<std::pair<int, Managed<double>>> monitored;
  KspOptions k;
  k.type = parse_ksp_type(o.ksp);
  k.pc = parse_pc_type(o.pc);
  k.cg_variant = parse_cg_variant(o.cg_variant);
  k.norm_type = parse_norm_type(o.norm_type);
  k.rtol = o.rtol;
  k.atol = o.atol;
  k.dtol = o.dtol;
  k.max_it = o.max_it;
  k.fixed_iterations = o.fixed;
  k.mode = parse_solve_mode(o.mode);
  k.check_every = o.check_every;
  k.history = o.monitor;
  Ksp ksp(problem.A, k);

  Timing timing;
  KspResult result;
  const int timed = std::max(1, o.repeat);
  if (timed > 1) (void)time_solve(ksp, b, x, ctx, result);  // warm-up, as the reference does
  const deps::Stats tracker_before = deps::stats();
  for (int r = 0; r < timed; ++r) {
    if (o.monitor && r + 1 == timed) {
      // The monitor keeps the device values and prints them after the solve: no forced wait.
      auto opts = ksp.options();
      opts.monitor = [&](int it, const Managed<double>& rnorm) {
        monitored.emplace_back(it, rnorm);
      };
      ksp.set_options(std::move(opts));
    }
    timing.seconds.push_back(time_solve(ksp, b, x, ctx, result));
  }
  const deps::Stats tracker_after = deps::stats();

  // The true residual and, for b = A 1, the error.
  Vec res(ctx, rows);
  mult(problem.A, x, res);
  aypx(res, -1.0, b);  // res = b - A x
  const double true_res = norm(res);
  const double bnorm = norm(b);
  double err = -1;
  if (ones_rhs) {
    Vec e(ctx, rows);
    set(e, -1.0);
    axpy(e, 1.0, x);
    err = norm(e, NormType::infinity);
  }

  // Async solves that stop on convergence read it every check_interval() iterations; graph
  // solves test it on the device after each block of that many.
  const bool reads_convergence = o.mode != "sync" && !o.fixed;
  if (o.json) {
    nlohmann::ordered_json j;
    j["problem"] = problem.description;
    j["device"] = ctx.device().to_string();
    j["device_name"] = device_info(ctx.device()).name;
    j["rows"] = problem.A.rows();
    j["nnz"] = problem.A.nnz();
    j["ksp"] = o.ksp;
    j["pc"] = o.pc;
    j["cg_variant"] = o.cg_variant;
    j["mode"] = o.mode;
    if (reads_convergence) j["check_every"] = ksp.check_interval();
    j["norm_type"] = o.norm_type;
    j["rtol"] = o.rtol;
    j["atol"] = o.atol;
    j["dtol"] = o.dtol;
    j["max_it"] = o.max_it;
    j["iterations"] = result.iterations;
    j["residual_norm"] = result.residual_norm;
    j["reason"] = std::string(to_string(result.reason));
    j["converged"] = result.converged();
    j["true_residual_norm"] = true_res;
    j["relative_true_residual"] = bnorm > 0 ? true_res / bnorm : 0.0;
    if (ones_rhs) j["error_inf"] = err;
    j["time_s"] = timing.min();
    j["times_s"] = timing.seconds;
    // The tracker's work per timed solve (what a solve from Python is compared with).
    const auto per_solve = [&](std::uint64_t deps::Stats::*m) {
      return static_cast<double>(tracker_after.*m - tracker_before.*m) / timed;
    };
    j["tracker_per_solve"] = {{"marks", per_solve(&deps::Stats::marks)},
                              {"waits_issued", per_solve(&deps::Stats::waits_issued)},
                              {"waits_elided", per_solve(&deps::Stats::waits_elided)},
                              {"events_recorded", per_solve(&deps::Stats::events_recorded)}};
    if (o.monitor) {
      auto h = nlohmann::ordered_json::array();
      for (auto& [it, v] : monitored) h.push_back({{"iteration", it}, {"rnorm", v.value()}});
      j["monitor"] = std::move(h);
    }
    fmt::print("{}\n", j.dump(2));
  } else {
    for (auto& [it, v] : monitored) {
      fmt::print("{:>4} KSP Residual norm {:.12e}\n", it, v.value());
    }
    fmt::print("problem:    {} ({} rows, {} nonzeros) on {}\n", problem.description,
               problem.A.rows(), problem.A.nnz(), ctx.device().to_string());
    fmt::print(
        "solver:     {}{} with {} preconditioner, {} norm, {} mode{}\n", o.ksp,
        o.ksp == "cg" && o.cg_variant != "classic" ? " (" + o.cg_variant + ")" : std::string(),
        o.pc, o.norm_type, o.mode,
        reads_convergence
            ? (o.mode == "graph"
                   ? fmt::format(" (convergence tested on the device, {} iterations a trip)",
                                 ksp.check_interval())
                   : fmt::format(" (convergence read every {} iterations)", ksp.check_interval()))
            : std::string());
    fmt::print("iterations: {}\n", result.iterations);
    fmt::print("residual:   {:.6e} ({} norm); true ||b - Ax|| = {:.6e} ({:.3e} relative)\n",
               result.residual_norm, o.norm_type, true_res, bnorm > 0 ? true_res / bnorm : 0.0);
    if (ones_rhs) fmt::print("error:      max |x - 1| = {:.3e}\n", err);
    fmt::print("reason:     {}\n", to_string(result.reason));
    if (timing.seconds.size() > 1) {
      fmt::print("time:       {:.3f} ms (min of {}), median {:.3f} ms\n", timing.min() * 1e3,
                 timing.seconds.size(), timing.median() * 1e3);
    } else {
      fmt::print("time:       {:.3f} ms\n", timing.min() * 1e3);
    }
  }
  return result.converged() ? 0 : 3;
}

}  // namespace

Command add_solve_command(CLI::App& parent) {
  auto o = std::make_shared<SolveOptions>();
  auto* app = parent.add_subcommand(
      "solve",
      "Solve A x = b with CG or TFQMR (b = A 1 unless --rhs); exit status 3 if it diverged");
  app->add_option("--stencil", o->stencil, "Laplacian stencil: 2d5, 2d9, 3d7 or 3d27")
      ->capture_default_str();
  app->add_option("--n", o->n, "Grid points per dimension (n^2 or n^3 unknowns)")
      ->capture_default_str()
      ->check(whole_number(2, 1 << 20));
  app->add_flag("--csr", o->csr, "Assemble the stencil as CSR instead of matrix-free");
  app->add_option("--matrix", o->matrix, "A Matrix Market file instead of a stencil")
      ->check(CLI::ExistingFile);
  app->add_option("--rhs", o->rhs, "Right-hand side file (numbers, or a Matrix Market array)")
      ->check(CLI::ExistingFile);
  app->add_option("--ksp", o->ksp, "cg or tfqmr")->capture_default_str();
  app->add_option("--pc", o->pc, "jacobi or none")->capture_default_str();
  app->add_option("--cg-variant", o->cg_variant,
                  "CG: classic (two reductions an iteration) or single-reduction "
                  "(Chronopoulos-Gear, one; also: one-reduction)")
      ->capture_default_str();
  app->add_option("--mode", o->mode,
                  "sync, async or graph (across ranks, a list such as sync,async,graph solves "
                  "in each mode in one run)")
      ->capture_default_str();
  app->add_option("--backend", o->backend, "host or cuda (default: the best device)");
  app->add_option("--device", o->device, "A device such as cuda:1 (overrides --backend)");
  app->add_option("--norm-type", o->norm_type,
                  "preconditioned, unpreconditioned, natural (cg) or none (with --fixed)")
      ->capture_default_str();
  app->add_option("--rtol", o->rtol, "Relative tolerance")
      ->capture_default_str()
      ->check(positive_real(true));
  app->add_option("--atol", o->atol, "Absolute tolerance")
      ->capture_default_str()
      ->check(positive_real(true));
  app->add_option("--divtol", o->dtol, "Divergence tolerance")
      ->capture_default_str()
      ->check(positive_real(true));
  app->add_option("--max-it", o->max_it, "Maximum iterations")
      ->capture_default_str()
      ->check(whole_number(1, 1 << 30));
  app->add_flag("--fixed", o->fixed, "Run exactly --max-it iterations (KSPConvergedSkip)");
  app->add_option("--check-every", o->check_every,
                  "Async: iterations per convergence check (0: the solver's choice)")
      ->capture_default_str()
      ->check(whole_number(0, 1 << 20));
  app->add_option("--repeat", o->repeat,
                  "Timed solves; above 1, after one warm-up solve (min and median)")
      ->capture_default_str()
      ->check(whole_number(1, 1000000));
  app->add_flag("--monitor", o->monitor, "Print the residual norm of every iteration");
  app->add_flag("--dist", o->dist,
                "Solve across ranks (sluice/dist.hpp) even alone; implied under mpirun");
  app->add_option("--local-ranks", o->local_ranks,
                  "Ranks in this process, one per device (host: per context); implies --dist")
      ->capture_default_str()
      ->check(whole_number(1, 256));
  app->add_option("--grid", o->grid,
                  "A stencil grid NX,NY[,NZ] instead of --n (distributed solves; split along the "
                  "last)")
      ->delimiter(',')
      ->expected(2, 3);
  app->add_flag("--json", o->json, "Print one JSON object");
  return {app, [o] { return run(*o); }};
}

}  // namespace sluice::cli
