// `sluice solve` across ranks (sluice/dist.hpp): `mpirun -np N sluice solve ...`, each process
// on the device it picks (or --local-ranks devices of its own), the problem split over all
// ranks, the same report as a one-context solve printed by process 0 (JSON: with the ranks).

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "la_problem.hpp"
#include "sluice/dist.hpp"
#include "sluice/error.hpp"
#include "solve.hpp"

namespace sluice::cli {
namespace {

struct DistProblem {
  dist::Mat A;
  std::string description;
};

DistProblem make_problem(const dist::Comm& comm, const SolveOptions& o) {
  DistProblem p;
  if (!o.matrix.empty()) {
    p.A = dist::Mat::read_matrix_market(comm, o.matrix);
    p.description = std::filesystem::path(o.matrix).filename().string() + " csr";
    return p;
  }
  const la::Stencil kind = la::parse_stencil(o.stencil);
  const bool three = la::stencil_is_3d(kind);
  std::int64_t nx = o.n, ny = o.n, nz = three ? o.n : 1;
  if (!o.grid.empty()) {
    if (o.grid.size() != (three ? 3u : 2u)) {
      throw Error(Errc::invalid_argument, "sluice solve: --grid takes " +
                                              std::string(three ? "3" : "2") + " sizes for " +
                                              std::string(la::to_string(kind)));
    }
    nx = o.grid[0];
    ny = o.grid[1];
    nz = three ? o.grid[2] : 1;
  }
  p.A = o.csr ? dist::Mat::stencil_csr(comm, kind, nx, ny, nz)
              : dist::Mat::stencil(comm, kind, nx, ny, nz);
  p.description = std::string(la::to_string(kind)) + " " + std::to_string(nx) + "x" +
                  std::to_string(ny) + (three ? "x" + std::to_string(nz) : "") +
                  (o.csr ? " csr" : " matrix-free");
  return p;
}

/// Every local rank's contexts idle, and the slowest process's clock: a solve is as long as its
/// last rank takes.
void synchronize_all(const dist::Vec& v) {
  for (int l = 0; l < v.local_count(); ++l) v.local(l).context().synchronize();
}

double slowest(const dist::Comm& comm, double seconds) {
  std::vector<Managed<double>> t;
  for (int l = 0; l < comm.local_size(); ++l) t.emplace_back(seconds, comm.context(l));
  comm.for_each_local([&](const dist::Rank& r) {
    r.allreduce(t[static_cast<std::size_t>(r.local_index())], dist::ReduceOp::max);
  });
  return t.front().value();
}

}  // namespace

/// Under mpirun, each process's share of this node's cores for the host backend's pool (unless
/// SLUICE_HOST_THREADS says otherwise): with more threads than cores, a rank's parallel loop
/// waits for chunks whose threads the other ranks keep from running.
void share_cores() {
  if (std::getenv("SLUICE_HOST_THREADS") != nullptr) return;
  int per_node = 0;
  for (const char* var :
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
    if (const char* v = std::getenv(var); v != nullptr) {
      per_node = std::atoi(v);
      break;
    }
  }
  if (per_node <= 1) return;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const auto share = std::max(1u, cores / static_cast<unsigned>(per_node));
  setenv("SLUICE_HOST_THREADS", std::to_string(share).c_str(), 0);
}

int run_dist_solve(const SolveOptions& o) {
  share_cores();  // before any host work creates the pool
  dist::Environment env;
  dist::CommOptions co;
  co.local_ranks = o.local_ranks;
  if (!o.device.empty()) co.backend = Device::parse(o.device).backend;
  if (!o.backend.empty()) co.backend = o.backend;
  co.name = "solve";
  dist::Comm comm(co);
  const bool root = dist::Environment::process_rank() == 0;

  DistProblem problem = make_problem(comm, o);
  const dist::Mat& A = problem.A;
  dist::Vec b = A.create_vec(), x = A.create_vec();
  const bool ones_rhs = o.rhs.empty();
  if (ones_rhs) {
    dist::Vec one = A.create_vec();
    dist::set(one, 1.0);
    dist::mult(A, one, b);
  } else {
    b.assign(read_vector_file(o.rhs, static_cast<std::size_t>(A.rows())));
  }

  la::KspOptions k;
  k.type = la::parse_ksp_type(o.ksp);
  k.pc = la::parse_pc_type(o.pc);
  k.cg_variant = la::parse_cg_variant(o.cg_variant);
  k.norm_type = la::parse_norm_type(o.norm_type);
  k.rtol = o.rtol;
  k.atol = o.atol;
  k.dtol = o.dtol;
  k.max_it = o.max_it;
  k.fixed_iterations = o.fixed;
  k.check_every = o.check_every;
  k.history = o.monitor;
  // Several modes (--mode sync,async,graph) solve one after the other in this process: one
  // start-up (MPI, NCCL, the problem) for all of them.
  std::vector<std::string> modes;
  for (std::size_t at = 0; at <= o.mode.size();) {
    const std::size_t comma = std::min(o.mode.find(',', at), o.mode.size());
    modes.push_back(o.mode.substr(at, comma - at));
    at = comma + 1;
  }
  std::vector<la::SolveMode> parsed;
  for (const auto& m : modes) parsed.push_back(la::parse_solve_mode(m));

  bool all_converged = true;
  auto reports = nlohmann::ordered_json::array();
  for (std::size_t mi = 0; mi < modes.size(); ++mi) {
    k.mode = parsed[mi];
    const std::string& mode = modes[mi];
    dist::set(x, 0.0);
    dist::Ksp ksp(A, k);

    std::vector<double> seconds;
    la::KspResult result;
    const int timed = std::max(1, o.repeat);
    for (int r = (timed > 1 ? -1 : 0); r < timed; ++r) {  // one warm-up solve when repeating
      synchronize_all(x);
      (void)slowest(comm, 0.0);  // every process starts together
      const auto t0 = std::chrono::steady_clock::now();
      result = ksp.solve(b, x);
      synchronize_all(x);
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double slow = slowest(comm, t);
      if (r >= 0) seconds.push_back(slow);
    }
    all_converged = all_converged && result.converged();
    std::vector<double> sorted = seconds;
    std::sort(sorted.begin(), sorted.end());
    const double tmin = sorted.front(), tmed = sorted[sorted.size() / 2];

    dist::Vec res = A.create_vec();
    dist::mult(A, x, res);
    dist::aypx(res, -1.0, b);
    const double true_res = dist::norm(res);
    const double bnorm = dist::norm(b);
    double err = -1;
    if (ones_rhs) {
      dist::Vec e = A.create_vec();
      dist::set(e, -1.0);
      dist::axpy(e, 1.0, x);
      err = dist::norm(e, la::NormType::infinity);
    }
    if (!root) continue;

    std::vector<std::string> devices;
    for (int l = 0; l < comm.local_size(); ++l)
      devices.push_back(comm.context(l).device().to_string());
    if (o.json) {
      nlohmann::ordered_json j;
      j["problem"] = problem.description;
      j["ranks"] = comm.size();
      j["processes"] = comm.processes();
      j["local_ranks"] = comm.local_size();
      j["engine"] = std::string(comm.engine());
      j["reductions"] = std::string(comm.reductions());
      j["exchanges"] = std::string(comm.exchanges());
      j["devices_of_process_0"] = devices;
      j["device_name"] = device_info(comm.context().device()).name;
      j["rows"] = A.rows();
      j["nnz"] = A.nnz();
      j["ksp"] = o.ksp;
      j["pc"] = o.pc;
      j["cg_variant"] = o.cg_variant;
      j["mode"] = mode;
      j["norm_type"] = o.norm_type;
      j["rtol"] = o.rtol;
      j["max_it"] = o.max_it;
      j["fixed"] = o.fixed;
      j["iterations"] = result.iterations;
      j["residual_norm"] = result.residual_norm;
      j["reason"] = std::string(la::to_string(result.reason));
      j["converged"] = result.converged();
      j["true_residual_norm"] = true_res;
      j["relative_true_residual"] = bnorm > 0 ? true_res / bnorm : 0.0;
      if (ones_rhs) j["error_inf"] = err;
      j["time_s"] = tmin;
      j["median_s"] = tmed;
      j["times_s"] = seconds;
      if (o.monitor) j["history"] = result.history;
      reports.push_back(std::move(j));
      continue;
    }
    if (mi > 0) fmt::print("\n");
    if (o.monitor) {
      for (std::size_t i = 0; i < result.history.size(); ++i) {
        fmt::print("{:>4} KSP Residual norm {:.12e}\n", i, result.history[i]);
      }
    }
    fmt::print(
        "problem:    {} ({} rows, {} nonzeros) on {} ranks ({} processes, engine {}, {} "
        "reductions, {} exchanges; process 0 on {})\n",
        problem.description, A.rows(), A.nnz(), comm.size(), comm.processes(), comm.engine(),
        comm.reductions(), comm.exchanges(), fmt::join(devices, ", "));
    fmt::print(
        "solver:     {}{} with {} preconditioner, {} norm, {} mode\n", o.ksp,
        o.ksp == "cg" && o.cg_variant != "classic" ? " (" + o.cg_variant + ")" : std::string(),
        o.pc, o.norm_type, mode);
    fmt::print("iterations: {}\n", result.iterations);
    fmt::print("residual:   {:.6e} ({} norm); true ||b - Ax|| = {:.6e} ({:.3e} relative)\n",
               result.residual_norm, o.norm_type, true_res, bnorm > 0 ? true_res / bnorm : 0.0);
    if (ones_rhs) fmt::print("error:      max |x - 1| = {:.3e}\n", err);
    fmt::print("reason:     {}\n", la::to_string(result.reason));
    if (seconds.size() > 1) {
      fmt::print("time:       {:.3f} ms (min of {}, slowest rank), median {:.3f} ms\n", tmin * 1e3,
                 seconds.size(), tmed * 1e3);
    } else {
      fmt::print("time:       {:.3f} ms (slowest rank)\n", tmin * 1e3);
    }
  }
  // One mode: its report; several: an array of them, in the order given.
  if (root && o.json) fmt::print("{}\n", (reports.size() == 1 ? reports[0] : reports).dump(2));
  return all_converged ? 0 : 3;
}

}  // namespace sluice::cli
