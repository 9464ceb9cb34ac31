// 14-dist: work across ranks (sluice/dist.hpp). Run it alone, or as `mpirun -np 2 example_14_dist`:
// every process runs the same code, each rank on the device it picks.
//
// A device value reduced across ranks without a host round trip, then a distributed CG solve of
// a 3D Laplacian split in planes over the ranks, whose dot products are allreduces on the device.

#include <cstdio>

#include "sluice/dist.hpp"

int main(int argc, char** argv) {
  namespace dist = sluice::dist;
  dist::Environment env(argc, argv);  // MPI, when this build has it
  // One rank per process; alone, two ranks of this process on the host (two contexts; on cuda,
  // NCCL wants a GPU per rank: run it under mpirun there, one process per GPU).
  const bool alone = dist::Environment::process_count() == 1;
  dist::Comm world(dist::CommOptions{.local_ranks = alone ? 2 : 1,
                                     .backend = alone ? "host" : ""});

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
