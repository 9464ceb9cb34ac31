#pragma once
// `sluice bench --scaling`: time against ranks (bench_scaling.cpp).

#include <string>
#include <vector>

namespace sluice::cli {

struct ScalingOptions {
  std::string kind;  // "weak" (grid per rank, stacked along the split dimension) or "strong"
  std::vector<int> ranks{1, 2};
  std::string launch = "mpirun";  // processes (mpirun -np R) or "local" (R ranks in one process)
  std::vector<long long> grid{64, 64, 64};
  std::string stencil = "3d7";
  std::vector<std::string> ksps{"cg"};
  /// CG's variants (sluice solve --cg-variant), each a solver of its own in the rows: "cg" for
  /// classic, "cg1" for single-reduction.
  std::vector<std::string> cg_variants{"classic"};
  std::vector<std::string> modes{"sync", "async", "graph"};
  std::string backend;
  int iterations = 100;
  int repeat = 5;
  std::string json = "bench_scaling.json";
  std::string plot;
  bool quiet = false;
  /// SLUICE_DIST_STEPWISE=1 for the solves: one rank runs the distributed loop too.
  bool stepwise = false;
  /// Where the solvers' small reductions run (SLUICE_DIST_REDUCE: peer, nccl, auto), each a
  /// solver of its own labelled "<ksp>/<path>" where several are given; empty: the default.
  std::vector<std::string> reduce_paths;
  /// Where the exchanges run (SLUICE_DIST_EXCHANGE_PATH: peer, nccl, auto), each a solver of
  /// its own; empty: the environment's.
  std::vector<std::string> exchange_paths;
};

/// Runs `sluice solve --json` for every rank count, solver and mode (through mpirun, or with
/// --local-ranks), writes the times and the efficiency against one rank as JSON, and plots them
/// (bench/plot_scaling.py) if asked. Returns the exit status.
int run_scaling(const ScalingOptions& o);

}  // namespace sluice::cli
