// Peer reductions on GPUs (docs/dist.md, "Peer reductions"): the fused gather against NCCL's
// allgather bit for bit over many epochs, and solves whose reductions take the peer path against
// the same solves through NCCL (iterations, histories and iterates bit for bit, graph mode
// relaunched many times). With one process driving every GPU (peer access) and with a process
// per GPU (CUDA IPC, under mpirun -np 2); scripts/gpu-dist runs them, elsewhere they skip.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "dist/comm_state.hpp"
#include "dist_test_util.hpp"
#include "sluice/dist.hpp"
#include "sluice/error.hpp"
#include "sluice/memory.hpp"

namespace sluice::dist {
namespace {

/// Every process's ranks on GPUs of their own (alone: every GPU; under mpirun: one each), with
/// the reductions on `path`.
Comm gpu_comm(ReducePath path, const char* name) {
  const int local = Environment::process_count() == 1 ? test::cuda_devices() : 1;
  std::vector<Context> ctxs;
  const int first = Environment::node_process_rank() * local;
  for (int i = 0; i < local; ++i) {
    ctxs.emplace_back(ContextOptions{.device = Device{"cuda", first + i},
                                     .name = std::string(name) + " rank " + std::to_string(i)});
  }
  return Comm(CommOptions{.contexts = ctxs, .name = name, .reductions = path});
}

/// Rank r's sums of epoch k: a few values of every kind, distinct per rank, epoch and slot
/// (negative zero, subnormals, huge and tiny magnitudes), so that any misplaced or stale value
/// shows.
double value(int r, int k, std::size_t i) {
  const std::uint64_t h =
      (static_cast<std::uint64_t>(r) * 1000003u + static_cast<std::uint64_t>(k)) *
          6364136223846793005u +
      i * 1442695040888963407u;
  switch (h % 5) {
    case 0:
      return -0.0;
    case 1:
      return 4.9e-324 * static_cast<double>(1 + (h >> 40) % 1000);
    case 2:
      return 1e300 / static_cast<double>(1 + (h >> 33) % 977);
    default:
      return static_cast<double>(static_cast<std::int64_t>(h >> 11)) * 1e-7 + r + 0.25 * k;
  }
}

/// The count of epoch k, the same on every rank: 1 to 32 doubles (a slot's capacity).
std::size_t count_of(int k) {
  return 1 + static_cast<std::size_t>((k * 7919 + 13) % 32);
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

/// `epochs` gathers of every rank issued back to back (no synchronize between them: a fast rank
/// runs ahead of a slow one as far as the signalling lets it), by the fused gather on `peer` and
/// by the engine's allgather on `nccl`; every result against the values each rank sent.
void gathers_match(const Comm& peer, const Comm& nccl, int epochs) {
  ASSERT_EQ(peer.reductions(), "peer");
  ASSERT_EQ(nccl.reductions(), "nccl");
  const int n = peer.size();
  auto& pst = *peer.state();
  auto& nst = *nccl.state();
  ASSERT_EQ(pst.engine->fused_gather_capacity(), 32u);
  constexpr std::size_t cap = 32;
  struct Buffers {
    DeviceBuffer<double> send, via_peer, via_nccl;
  };
  std::vector<Buffers> b;
  for (int l = 0; l < peer.local_size(); ++l) {
    const Context& ctx = peer.context(l);
    std::vector<double> h(cap * static_cast<std::size_t>(epochs));
    for (int k = 0; k < epochs; ++k) {
      for (std::size_t i = 0; i < cap; ++i)
        h[static_cast<std::size_t>(k) * cap + i] = value(peer.rank(l), k, i);
    }
    Buffers x{DeviceBuffer<double>(ctx, h.size()),
              DeviceBuffer<double>(ctx, h.size() * static_cast<std::size_t>(n)),
              DeviceBuffer<double>(ctx, h.size() * static_cast<std::size_t>(n))};
    sluice::copy(ctx, x.send, h);
    sluice::memset(ctx, x.via_peer, 0xff);
    sluice::memset(ctx, x.via_nccl, 0xff);
    ctx.synchronize();
    b.push_back(std::move(x));
  }
  peer.for_each_local([&](const Rank& r) {
    const int l = r.local_index();
    auto& x = b[static_cast<std::size_t>(l)];
    for (int k = 0; k < epochs; ++k) {
      const std::size_t c = count_of(k);
      const std::size_t at = static_cast<std::size_t>(k) * cap;
      const std::size_t out = at * static_cast<std::size_t>(n);
      detail::AccessList pa;
      const double* send = pa.read(x.send, {at * 8, c * 8}) + at;
      double* recv = pa.write(x.via_peer, {out * 8, c * static_cast<std::size_t>(n) * 8}) + out;
      pst.issue(l, r.context(), pa, "test peer gather", std::source_location::current(),
                [&](Stream& s, const OpInfo& op) {
                  pst.engine->gather_finalize(s, l, send, recv, c, nullptr, op);
                });
      detail::AccessList na;
      (void)na.read(x.send, {at * 8, c * 8});
      double* nrecv = na.write(x.via_nccl, {out * 8, c * static_cast<std::size_t>(n) * 8}) + out;
      nst.issue(l, r.context(), na, "test nccl gather", std::source_location::current(),
                [&](Stream& s, const OpInfo& op) {
                  nst.engine->allgather(s, l, send, nrecv, c, DistType::f64, false, op);
                });
    }
  });
  for (int l = 0; l < peer.local_size(); ++l) {
    const Context& ctx = peer.context(l);
    auto& x = b[static_cast<std::size_t>(l)];
    std::vector<double> p(x.via_peer.size()), q(x.via_nccl.size());
    sluice::copy(ctx, p, x.via_peer);
    sluice::copy(ctx, q, x.via_nccl);
    ctx.synchronize();
    for (int k = 0; k < epochs; ++k) {
      const std::size_t c = count_of(k),
                        out = static_cast<std::size_t>(k) * cap * static_cast<std::size_t>(n);
      std::vector<double> want;
      for (int rank = 0; rank < n; ++rank) {
        for (std::size_t i = 0; i < c; ++i) want.push_back(value(rank, k, i));
      }
      const std::vector<double> got_p(
          p.begin() + static_cast<std::ptrdiff_t>(out),
          p.begin() + static_cast<std::ptrdiff_t>(out + c * static_cast<std::size_t>(n)));
      const std::vector<double> got_q(
          q.begin() + static_cast<std::ptrdiff_t>(out),
          q.begin() + static_cast<std::ptrdiff_t>(out + c * static_cast<std::size_t>(n)));
      ASSERT_TRUE(same_bits(got_p, want))
          << "peer gather, rank " << peer.rank(l) << ", epoch " << k;
      ASSERT_TRUE(same_bits(got_q, want))
          << "NCCL allgather, rank " << peer.rank(l) << ", epoch " << k;
    }
  }
}

/// The same solves on `peer` and `nccl`: the same iterations, histories and iterates, bit for
/// bit, in every mode; graph mode relaunches its block of check_every iterations many times.
void solves_match(const Comm& peer, const Comm& nccl) {
  const std::int64_t nz = 4 * peer.size() + 3;
  for (bool assembled : {false, true}) {
    for (auto [type, variant] : {std::pair{la::KspType::cg, la::CgVariant::classic},
                                 std::pair{la::KspType::cg, la::CgVariant::single_reduction},
                                 std::pair{la::KspType::tfqmr, la::CgVariant::classic}}) {
      // MPIAIJ with classic CG only: the case's watchdog (SLUICE_TEST_CASE_TIMEOUT) is 30 s.
      if (assembled && (type != la::KspType::cg || variant != la::CgVariant::classic)) continue;
      for (auto mode : {la::SolveMode::sync, la::SolveMode::async, la::SolveMode::graph}) {
        SCOPED_TRACE(std::string(la::to_string(type)) + " " + std::string(la::to_string(variant)) +
                     " " + std::string(la::to_string(mode)) + (assembled ? " csr" : " stencil"));
        la::KspOptions o{.type = type,
                         .cg_variant = variant,
                         .rtol = 1e-9,
                         .mode = mode,
                         .check_every = 2,
                         .history = true};
        std::vector<double> xs[2];
        la::KspResult r[2];
        int i = 0;
        for (const Comm* c : {&peer, &nccl}) {
          const Mat A = assembled ? Mat::stencil_csr(*c, la::Stencil::d3p7, 24, 20, nz)
                                  : Mat::stencil(*c, la::Stencil::d3p7, 24, 20, nz);
          Vec b = A.create_vec(), x = A.create_vec(), ones = A.create_vec();
          set(ones, 1.0);
          mult(A, ones, b);
          Ksp ksp(A, o);
          r[i] = ksp.solve(b, x);
          xs[i] = x.to_vector();
          ++i;
        }
        EXPECT_TRUE(r[0].converged());
        EXPECT_GT(r[0].iterations, 10);
        EXPECT_EQ(r[0].iterations, r[1].iterations);
        EXPECT_EQ(r[0].history, r[1].history);
        EXPECT_TRUE(same_bits(xs[0], xs[1]));
      }
    }
  }
}

TEST(DistGpu, PeerReductionsEqualNcclOnes) {
  const int local = Environment::process_count() == 1 ? test::cuda_devices() : 1;
  if (auto why = test::gpus_needed(local, 2); !why.empty()) GTEST_SKIP() << why;
  const Comm peer = gpu_comm(ReducePath::peer, "peer");
  const Comm nccl = gpu_comm(ReducePath::engine, "nccl");
  std::cout << "[ reduce   ] " << peer.size() << " ranks in " << peer.processes()
            << " process(es): reductions " << peer.reductions() << " and " << nccl.reductions()
            << std::endl;
  {
    SCOPED_TRACE("gathers");
    gathers_match(peer, nccl, 300);
    gathers_match(peer, nccl, 7);  // the epochs go on from where they were
  }
  solves_match(peer, nccl);
}

TEST(DistGpu, AutomaticReductionsTakeThePeerPathWhereGpusReachEachOther) {
  const int local = Environment::process_count() == 1 ? test::cuda_devices() : 1;
  if (auto why = test::gpus_needed(local, 2); !why.empty()) GTEST_SKIP() << why;
  // Automatic: the peer path, since every GPU of a node reaches every other's here (NVLink or
  // PCIe peer access); what scripts/gpu-dist's machines have.
  const Comm a = gpu_comm(ReducePath::automatic, "auto");
  EXPECT_EQ(a.reductions(), "peer");
  EXPECT_EQ(a.engine(), "nccl");
}

}  // namespace
}  // namespace sluice::dist
