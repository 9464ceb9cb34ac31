// 14-dist: work across ranks (sluice/dist.hpp). Run it alone, or as `mpirun -np 2 example_14_dist`:
// every process runs the same code, each rank on the device it picks.
//
// A device value reduced across ranks without a host round trip, then a distributed CG solve of
// a 3D Laplacian split in planes over the ranks, whose dot products are allreduces on the device.

#include <cstdio>

#include "sluice/dist.hpp"
#include "sluice/platform.hpp"

int main(int argc, char** argv) {
  namespace dist = sluice::dist;
  dist::Environment env(argc, argv);  // MPI, when this build has it
  // One rank per process, on the GPU numbered by the process's place on its node
  // (pick_device); alone, two ranks of this process. NCCL runs one rank per GPU: where the node
  // has fewer GPUs than ranks, the ranks run on the host (two host contexts may share a device).
  const bool alone = dist::Environment::process_count() == 1;
  const int ranks_here = alone ? 2 : dist::Environment::node_process_count();
  const sluice::Device preferred = dist::pick_device();
  std::size_t gpus = 0;
  for (const auto& b : sluice::backends())
    if (b.name == preferred.backend) gpus = b.device_count;
  const bool on_host = preferred.backend == "host" || gpus < static_cast<std::size_t>(ranks_here);
  if (on_host && preferred.backend != "host" && dist::Environment::process_rank() == 0)
    std::printf("%d rank(s) on this node, %zu GPU(s): the ranks run on the host\n", ranks_here,
                gpus);
  dist::Comm world(dist::CommOptions{.local_ranks = alone ? 2 : 1,
                                     .backend = on_host ? "host" : preferred.backend});

  // Each rank's value, reduced where it lies: the allreduce is ordered after the write on its
  // context, and the host waits only when it reads the result.
  std::vector<sluice::Managed<double>> v;
  for (int i = 0; i < world.local_size(); ++i)
    v.emplace_back(1.0 + world.rank(i), world.context(i));
  world.for_each_local(
      [&](const dist::Rank& r) { r.allreduce(v[r.local_index()], dist::ReduceOp::sum); });
  const double n = world.size();
  if (v.front().value() != n * (n + 1) / 2) return 1;

  // A 3D 7-point Laplacian split along z; b = A 1, so the solution is 1.
  auto A = dist::Mat::stencil(world, sluice::la::Stencil::d3p7, 32, 32, 8 * world.size());
  dist::Vec one = A.create_vec(), b = A.create_vec(), x = A.create_vec();
  dist::set(one, 1.0);
  dist::mult(A, one, b);
  dist::Ksp ksp(A, {.type = sluice::la::KspType::cg, .rtol = 1e-8});  // async mode by default
  const auto r = ksp.solve(b, x);

  dist::axpy(x, -1.0, one);  // the error, x - 1
  const double err = dist::norm(x, sluice::la::NormType::infinity);
  if (dist::Environment::process_rank() == 0) {
    std::printf("%d ranks (%s): %d iterations, %s, max error %.2e\n", world.size(),
                std::string(world.engine()).c_str(), r.iterations,
                std::string(sluice::la::to_string(r.reason)).c_str(), err);
  }
  return r.converged() && err < 1e-6 ? 0 : 1;
}
