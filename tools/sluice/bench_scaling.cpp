// `sluice bench --scaling weak|strong`: the same solve on 1, 2, ... ranks, each run a fresh
// `sluice solve --json` (under `mpirun -np R`, or with --local-ranks R for one process driving R
// devices), and the efficiency against one rank: weak (the grid per rank fixed, stacked along
// the split dimension) t(1) / t(R), strong (the grid fixed) t(1) / (R t(R)).

#include <fmt/core.h>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "bench_scaling.hpp"
#include "sluice/error.hpp"
#include "sluice/la.hpp"

#ifndef SLUICE_PLOT_SCALING_SCRIPT
#define SLUICE_PLOT_SCALING_SCRIPT "bench/plot_scaling.py"
#endif
#ifndef SLUICE_MPIEXEC
#define SLUICE_MPIEXEC "mpirun"
#endif

namespace sluice::cli {
namespace {

std::string self_path() {
  return std::filesystem::read_symlink("/proc/self/exe").string();
}

/// Runs `command` and returns its standard output; throws with its status if it failed.
std::string capture(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) throw Error(Errc::backend_failure, "sluice bench: cannot run: " + command);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe.get())) > 0;) out.append(buf, n);
  const int status = pclose(pipe.release());
  if (status != 0) {
    throw Error(Errc::backend_failure, "sluice bench: '" + command + "' failed (status " +
                                           std::to_string(status) + "):\n" + out);
  }
  return out;
}

}  // namespace

int run_scaling(const ScalingOptions& o) {
  if (o.kind != "weak" && o.kind != "strong") {
    throw Error(Errc::invalid_argument,
                "sluice bench: --scaling is weak or strong, not '" + o.kind + "'");
  }
  if (o.launch != "mpirun" && o.launch != "local") {
    throw Error(Errc::invalid_argument,
                "sluice bench: --launch is mpirun or local, not '" + o.launch + "'");
  }
  const std::string self = self_path();
  nlohmann::ordered_json out;
  out["scaling"] = o.kind;
  out["launch"] = o.launch;
  out["stencil"] = o.stencil;
  out["grid"] = o.grid;
  out["iterations"] = o.iterations;
  out["repeat"] = o.repeat;
  out["stepwise"] = o.stepwise;
  auto runs = nlohmann::ordered_json::array();
  // One launch per rank count solves in every mode (sluice solve --mode a,b,c): the start-up
  // (MPI, NCCL, the problem's set-up) is paid once per count.
  std::string modes;
  for (const auto& m : o.modes) modes += (modes.empty() ? "" : ",") + m;
  int failures = 0;
  // The solvers: each CG variant is one (labelled cg, cg1), TFQMR one.
  std::vector<std::pair<std::string, std::string>> solvers;  // (label, sluice solve arguments)
  for (const auto& ksp : o.ksps) {
    if (ksp != "cg") {
      solvers.emplace_back(ksp, "--ksp " + ksp);
      continue;
    }
    for (const auto& v : o.cg_variants) {
      const bool classic = la::parse_cg_variant(v) == la::CgVariant::classic;
      solvers.emplace_back(classic ? "cg" : "cg1", "--ksp cg --cg-variant " + v);
    }
  }
  // Each reduction path (SLUICE_DIST_REDUCE) and exchange path (SLUICE_DIST_EXCHANGE_PATH) a
  // solver of its own, labelled cg/peer (reductions) and cg/xpeer (exchanges) where several are
  // asked for. One rank has no reductions or exchanges across ranks: its run is made once and
  // its rows serve every path.
  std::vector<std::string> paths = o.reduce_paths, xpaths = o.exchange_paths;
  if (paths.empty()) paths.emplace_back();
  if (xpaths.empty()) xpaths.emplace_back();
  for (const auto& p : paths) {
    if (!p.empty() && p != "peer" && p != "nccl" && p != "auto") {
      throw Error(Errc::invalid_argument,
                  "sluice bench: --dist-reduce takes peer, nccl or auto, not '" + p + "'");
    }
  }
  for (const auto& p : xpaths) {
    if (!p.empty() && p != "peer" && p != "nccl" && p != "auto") {
      throw Error(Errc::invalid_argument,
                  "sluice bench: --dist-exchange takes peer, nccl or auto, not '" + p + "'");
    }
  }
  struct Run {
    std::string label, args, reduce, exchange;
  };
  std::vector<Run> runs_of;
  for (const auto& [ksp, solver_args] : solvers) {
    for (const auto& p : paths) {
      for (const auto& x : xpaths) {
        std::string label = ksp;
        if (paths.size() > 1) label += "/" + p;
        if (xpaths.size() > 1) label += "/x" + x;
        runs_of.push_back({label, solver_args, p, x});
      }
    }
  }
  std::map<std::string, nlohmann::ordered_json> one_rank;  // solver args -> the 1-rank rows
  for (const auto& [ksp, solver_args, path, xpath] : runs_of) {
    std::map<std::string, double> base;  // per mode: the first count's time (x ranks: strong)
    for (int r : o.ranks) {
      if (r == 1 && one_rank.contains(solver_args)) {
        for (auto row : one_rank[solver_args]) {
          row["ksp"] = ksp;
          const std::string mode = row["mode"].get<std::string>();
          if (!base.contains(mode)) base[mode] = row["time_s"].get<double>();
          runs.push_back(std::move(row));
        }
        continue;
      }
      std::vector<long long> grid = o.grid;
      if (o.kind == "weak") grid.back() *= r;  // the split dimension grows with the ranks
      std::string g;
      for (auto v : grid) g += (g.empty() ? "" : ",") + std::to_string(v);
      std::string cmd = o.stepwise ? "SLUICE_DIST_STEPWISE=1 " : "";
      if (!path.empty()) cmd += "SLUICE_DIST_REDUCE=" + path + " ";
      if (!xpath.empty()) cmd += "SLUICE_DIST_EXCHANGE_PATH=" + xpath + " ";
      if (o.launch == "mpirun") {
        cmd += std::string(SLUICE_MPIEXEC) + " -np " + std::to_string(r) +
               (geteuid() == 0 ? " --allow-run-as-root" : "") +
               " --oversubscribe --bind-to none '" + self + "' solve";
      } else {
        cmd += "'" + self + "' solve --local-ranks " + std::to_string(r);
      }
      cmd += " --dist --stencil " + o.stencil + " --grid " + g + " " + solver_args + " --mode " +
             modes + " --fixed --max-it " + std::to_string(o.iterations) + " --repeat " +
             std::to_string(o.repeat) + " --json";
      if (!o.backend.empty()) cmd += " --backend " + o.backend;
      if (!o.quiet)
        fmt::print(stderr, "sluice bench: {} {} on {} ranks ({}) ...\n", ksp, modes, r, o.launch);
      // A rank count that fails is recorded and the sweep goes on: the others still measure.
      nlohmann::ordered_json reports;
      try {
        const std::string text = capture(cmd);
        const auto start = text.find_first_of("[{");
        if (start == std::string::npos)
          throw Error(Errc::backend_failure, "sluice bench: no JSON from: " + cmd);
        reports = nlohmann::ordered_json::parse(text.substr(start));
      } catch (const std::exception& e) {
        fmt::print(stderr, "sluice bench: {} ranks failed: {}\n", r, e.what());
        nlohmann::ordered_json row;
        row["ksp"] = ksp;
        row["ranks"] = r;
        row["grid"] = grid;
        row["error"] = e.what();
        runs.push_back(std::move(row));
        ++failures;
        continue;
      }
      if (!reports.is_array()) reports = nlohmann::ordered_json::array({reports});
      for (const auto& j : reports) {
        const std::string mode = j["mode"].get<std::string>();
        const double t = j["time_s"].get<double>();
        // Against the first count that ran (one rank, normally), in rank-seconds for strong.
        if (!base.contains(mode)) base[mode] = o.kind == "weak" ? t : t * r;
        const double b = base[mode];
        nlohmann::ordered_json row;
        row["ksp"] = ksp;
        row["mode"] = mode;
        row["ranks"] = r;
        row["grid"] = grid;
        row["rows"] = j["rows"];
        row["time_s"] = t;
        row["median_s"] = j["median_s"];
        row["efficiency"] = o.kind == "weak" ? b / t : b / (r * t);
        row["speedup"] = o.kind == "weak" ? r * b / t : b / t;
        row["engine"] = j["engine"];
        row["reductions"] = j.value("reductions", std::string());
        row["exchanges"] = j.value("exchanges", std::string());
        row["processes"] = j["processes"];
        row["device_name"] = j["device_name"];
        row["iterations"] = j["iterations"];
        row["stepwise"] = o.stepwise;
        if (!o.quiet) {
          fmt::print(stderr, "  {}: {:.3f} ms, efficiency {:.3f}, {} reductions, {} exchanges\n",
                     mode, t * 1e3, row["efficiency"].get<double>(),
                     row["reductions"].get<std::string>(), row["exchanges"].get<std::string>());
        }
        if (r == 1) one_rank[solver_args].push_back(row);
        runs.push_back(std::move(row));
      }
    }
  }
  out["runs"] = std::move(runs);
  std::ofstream(o.json) << out.dump(2) << "\n";
  fmt::print("sluice bench: wrote {}\n", o.json);
  if (!o.plot.empty()) {
    const std::string command = "python3 '" + std::string(SLUICE_PLOT_SCALING_SCRIPT) + "' '" +
                                o.json + "' --out '" + o.plot + "'";
    if (std::system(command.c_str()) != 0) {
      fmt::print(stderr, "sluice bench: plotting failed; run: {}\n", command);
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace sluice::cli
