// A program whose processes disagree, for tests/dist/fail_test.sh: every process must fail with a
// clear message naming what went wrong, and none may hang.
//
//   dist_fail throw      process 1 throws before its allreduce; the others wait in theirs
//   dist_fail count      process 1 allreduces one element more than the others
//   dist_fail vector     process 1 makes a vector of another size
//   dist_fail exchange   process 1 receives fewer elements than process 0 sends it
//   dist_fail local      one process, two ranks: rank 1 allreduces one element more
//
// A second argument names the backend of the processes' ranks (default host; cuda on a GPU
// machine: scripts/gpu-dist).

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "sluice/dist.hpp"
#include "sluice/error.hpp"

namespace dist = sluice::dist;

/// Two ranks in this process whose allreduces differ: both fail, at their own synchronize.
int run_local() {
  const std::vector<sluice::Context> ctxs{sluice::Context(sluice::Device{"host", 0}),
                                          sluice::Context(sluice::Device{"host", 0})};
  dist::Comm comm(dist::CommOptions{.contexts = ctxs});
  std::vector<sluice::DeviceBuffer<double>> b;
  for (int i = 0; i < 2; ++i) {
    b.emplace_back(ctxs[static_cast<std::size_t>(i)], static_cast<std::size_t>(4 + i));
    sluice::memset(ctxs[static_cast<std::size_t>(i)], b.back(), 0);
  }
  for (int i = 0; i < 2; ++i)
    comm.local(i).allreduce(b[static_cast<std::size_t>(i)], dist::ReduceOp::sum);
  int failed = 0;
  for (int i = 0; i < 2; ++i) {
    try {
      ctxs[static_cast<std::size_t>(i)].synchronize();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d failed: %s\n", i, e.what());
      ++failed;
    }
  }
  return failed == 2 ? 1 : 0;
}

int run(const std::string& mode, const std::string& backend) {
  if (mode == "local") return run_local();
  dist::Comm world(dist::CommOptions{.backend = backend});
  const sluice::Context& ctx = world.context();
  const int me = world.rank();
  if (mode == "vector") {
    dist::Vec v(world, 100 + (me == 1 ? 1 : 0));
    return 0;
  }
  if (mode == "exchange") {
    sluice::DeviceBuffer<double> buf(ctx, 8);
    sluice::memset(ctx, buf, 0);
    const int peer = me == 0 ? 1 : 0;
    const std::size_t count = me == 1 ? 3 : 4;
    const sluice::DistSegment s{peer, 0, 4}, r{peer, 4, count};
    world.local().exchange(buf, {&s, 1}, buf, {&r, 1}, ctx);
    ctx.synchronize();
    // The rank whose exchange went through learns of the other's failure at its next one.
    world.local().exchange(buf, {&s, 1}, buf, {&r, 1}, ctx);
    ctx.synchronize();
    return 0;
  }
  const std::size_t n = mode == "count" && me == 1 ? 5 : 4;
  sluice::DeviceBuffer<double> b(ctx, n);
  sluice::memset(ctx, b, 0);
  if (mode == "throw" && me == 1)
    throw std::runtime_error("process 1 gave up before its allreduce");
  world.allreduce(b, dist::ReduceOp::sum);
  ctx.synchronize();
  return 0;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "throw";
  const std::string backend = argc > 2 ? argv[2] : "host";
  int status = 0;
  try {
    dist::Environment env(argc, argv);
    try {
      status = run(mode, backend);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "process %d failed: %s\n", dist::Environment::process_rank(), e.what());
      dist::Environment::fail(e.what());
      status = 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_fail: %s\n", e.what());
    status = 2;
  }
  return status;
}
