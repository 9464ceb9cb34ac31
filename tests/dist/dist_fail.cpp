// A program whose processes disagree, for tests/dist/fail_test.sh: every process must fail with a
// clear message naming what went wrong, and none may hang.
//
//   dist_fail throw      process 1 throws before its allreduce; the others wait in theirs
//   dist_fail count      process 1 allreduces one element more than the others
//   dist_fail vector     process 1 makes a vector of another size
//   dist_fail exchange   process 1 receives fewer elements than process 0 sends it
//   dist_fail local      one process, two ranks: rank 1 allreduces one element more
//   dist_fail peer       (cuda) process 1 throws before a peer gather; process 0 waits in its own
//   dist_fail peer_timeout  (cuda; SLUICE_DIST_TIMEOUT=2) process 1 sleeps 8 s before its peer
//                        gather: process 0's gives up at its deadline and fails (mpirun
//                        ends process 1, still asleep)
//   dist_fail exchange_peer     (cuda) process 1 throws before a peer exchange; process 0's
//                        stream waits for its messages
//   dist_fail exchange_timeout  (cuda; SLUICE_DIST_TIMEOUT=2) process 1 sleeps 8 s before its
//                        peer exchange: process 0's wait passes its deadline and it fails
//
// A second argument names the backend of the processes' ranks (default host; cuda on a GPU
// machine: scripts/gpu-dist).

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dist/comm_state.hpp"
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

/// One fused gather of 4 doubles on the peer path (the reductions of the distributed solvers).
void peer_gather(const dist::Comm& world) {
  const sluice::Context& ctx = world.context();
  auto& st = *world.state();
  sluice::DeviceBuffer<double> send(ctx, 4), recv(ctx, 4 * static_cast<std::size_t>(world.size()));
  sluice::memset(ctx, send, 0);
  sluice::detail::AccessList acc;
  const double* s = acc.read(send);
  double* r = acc.write(recv);
  st.issue(0, ctx, acc, "peer gather", std::source_location::current(),
           [&](sluice::Stream& stream, const sluice::OpInfo& op) {
             st.engine->gather_finalize(stream, 0, s, r, 4, nullptr, op);
           });
  ctx.synchronize();
}

/// One exchange of 4 doubles with the other process on the peer path (copy engines).
void peer_exchange(const dist::Comm& world) {
  const sluice::Context& ctx = world.context();
  sluice::DeviceBuffer<double> buf(ctx, 8);
  sluice::memset(ctx, buf, 0);
  const int peer = world.rank() == 0 ? 1 : 0;
  const sluice::DistSegment s{peer, 0, 4}, r{peer, 4, 4};
  world.local().exchange(buf, {&s, 1}, buf, {&r, 1}, ctx);
  ctx.synchronize();
}

int run(const std::string& mode, const std::string& backend) {
  if (mode == "local") return run_local();
  if (mode == "exchange_peer" || mode == "exchange_timeout") {
    dist::Comm world(
        dist::CommOptions{.backend = backend, .exchanges = sluice::ExchangePath::peer});
    if (world.rank() == 1) {
      if (mode == "exchange_peer")
        throw std::runtime_error("process 1 gave up before its peer exchange");
      std::this_thread::sleep_for(std::chrono::seconds(8));
    }
    peer_exchange(world);
    return 0;
  }
  if (mode == "peer" || mode == "peer_timeout") {
    dist::Comm world(dist::CommOptions{.backend = backend, .reductions = sluice::ReducePath::peer});
    if (world.rank() == 1) {
      if (mode == "peer") throw std::runtime_error("process 1 gave up before its peer gather");
      std::this_thread::sleep_for(std::chrono::seconds(8));
    }
    peer_gather(world);
    return 0;
  }
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
