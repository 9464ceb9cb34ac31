#pragma once
// `sluice solve`'s options, shared by the one-context solve (solve.cpp) and the distributed one
// (solve_dist.cpp).

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::cli {

struct SolveOptions {
  std::string stencil = "2d5";
  std::int64_t n = 256;
  std::vector<std::int64_t> grid;  // NX,NY[,NZ]: distributed solves only
  bool csr = false;
  std::string matrix;
  std::string rhs;
  std::string ksp = "cg";
  std::string pc = "jacobi";
  std::string cg_variant = "classic";
  std::string mode = "async";
  std::string backend;
  std::string device;
  std::string norm_type = "preconditioned";
  double rtol = 1e-5, atol = 1e-50, dtol = 1e4;
  int max_it = 10000;
  bool fixed = false;
  int check_every = 0;
  int repeat = 1;
  bool monitor = false;
  bool json = false;
  bool dist = false;
  int local_ranks = 1;
};

/// The solve across the ranks of MPI_COMM_WORLD (each process `local_ranks` of them, each rank
/// on the device it picks): printed by process 0. Returns the exit status.
int run_dist_solve(const SolveOptions& o);

}  // namespace sluice::cli
