#pragma once
// What the dist tests share: communicators with one or several ranks per process, and
// deterministic data every process can compute for every rank.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/dist.hpp"
#include "sluice/la.hpp"

namespace sluice::dist::test {

/// A communicator over every process with `local` ranks each, on the host backend.
inline Comm host_comm(int local, const char* name = "test") {
  std::vector<Context> ctxs;
  for (int i = 0; i < local; ++i) {
    ctxs.emplace_back(ContextOptions{.device = Device{"host", 0},
                                     .name = std::string(name) + " rank " + std::to_string(i)});
  }
  return Comm(CommOptions{.contexts = ctxs, .name = name});
}

/// Values 1..n scattered: a deterministic vector with no two entries equal.
inline std::vector<double> pattern(std::size_t n, double seed) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = seed + 0.5 * static_cast<double>((i * 7919 + 13) % 1009) / 1009.0 +
           static_cast<double>(i % 3);
  }
  return v;
}

/// The process's numbers of local ranks the tests run with: 1 and 2 (and 3 when alone).
inline std::vector<int> local_counts() {
  if (Environment::process_count() == 1) return {1, 2, 3};
  return {1, 2};
}

/// For the solver tests, whose many small reductions make them slow on an oversubscribed
/// machine: one rank per process under mpirun (several ranks per process run when alone).
inline std::vector<int> solve_local_counts() {
  if (Environment::process_count() == 1) return {1, 2, 3};
  return {1};
}

/// Every process simulates every rank's buffers on the host, issues the same random sequence
/// (from `seed`) of local operations, each on a random one of three contexts of its rank, and of
/// collectives and halo exchanges, and checks its ranks' buffers against the simulation at the
/// end (comm_test.cpp). Issues every local rank's part from the calling thread: one local rank,
/// or an engine that meets them at run time (the host's).
void random_interleaving(const Comm& c, unsigned seed);

/// CUDA devices this process sees (0 without the cuda backend).
inline int cuda_devices() {
  for (const auto& b : backends()) {
    if (b.name == "cuda") return static_cast<int>(b.device_count);
  }
  return 0;
}

/// Empty if this node has a GPU for each of its ranks (`per_process` in every process of the
/// node) and at least `min_ranks` of them, else why the case skips. NCCL runs one rank per GPU.
inline std::string gpus_needed(int per_process, int min_ranks = 0) {
  const int have = cuda_devices();
  const int procs = Environment::node_process_count();
  const int want = std::max(min_ranks, per_process * procs);
  if (have >= want && per_process >= 1) return {};
  return "needs " + std::to_string(want) + " CUDA device(s) on this node (" +
         std::to_string(procs) + " process(es) x " + std::to_string(per_process) +
         " rank(s), a GPU per rank), found " + std::to_string(have) +
         ": run scripts/gpu-dist on a machine with 2 GPUs or more";
}

}  // namespace sluice::dist::test
