// Peer exchanges on GPUs (docs/dist.md, "Peer exchanges"): exchanges of several parts and sizes,
// some larger than the inbox's slot (those take NCCL, in the same operation), many back to back
// with no reduction between (the slots' parities and acknowledgements), ranks that skip some
// exchanges with some peers, and local work on other contexts of the rank reading and writing
// the same buffers; every received value against what its sender sent, on the peer path and on
// NCCL's. Then solves whose exchanges take the peer path against the same through NCCL
// (iterations, histories and iterates bit for bit, every mode). With one process driving every
// GPU (peer access) and with a process per GPU (CUDA IPC, under mpirun -np 2/3/4);
// scripts/gpu-dist runs them, elsewhere they skip.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "dist/comm_state.hpp"
#include "dist_test_util.hpp"
#include "scoped_env.hpp"
#include "sluice/dist.hpp"
#include "sluice/error.hpp"
#include "sluice/memory.hpp"

namespace sluice::dist {
namespace {

using sluice::test::ScopedEnv;

/// Every process's ranks on GPUs of their own (alone: every GPU; under mpirun: one each), with
/// the exchanges on `path` and an inbox slot of `inbox` bytes (SLUICE_DIST_PEER_INBOX; null:
/// the default).
Comm gpu_comm(ExchangePath path, const char* name, const char* inbox = nullptr) {
  const ScopedEnv slot("SLUICE_DIST_PEER_INBOX", inbox);
  const int local = Environment::process_count() == 1 ? test::cuda_devices() : 1;
  std::vector<Context> ctxs;
  const int first = Environment::node_process_rank() * local;
  for (int i = 0; i < local; ++i) {
    ctxs.emplace_back(ContextOptions{.device = Device{"cuda", first + i},
                                     .name = std::string(name) + " rank " + std::to_string(i)});
  }
  return Comm(CommOptions{.contexts = ctxs, .name = name, .exchanges = path});
}

constexpr int kParts = 3;
/// The most doubles one part sends one peer in an exchange.
constexpr std::size_t kMax = 6000;
/// The slot of the small-inbox communicators: 64 KiB, 8192 doubles.
constexpr const char* kSmallInbox = "64k";

/// Doubles that rank `from` sends rank `to` in part `j` of exchange `k`: mostly a few hundred;
/// every fifth exchange thousands, so that a peer's messages of one exchange (all parts) may
/// pass the 64 KiB slot in one direction and not in the other; some parts send nothing.
std::size_t count_of(int k, int j, int from, int to) {
  const auto h = static_cast<std::size_t>((k * 131 + j * 31 + from * 7 + to * 3) * 2654435761u);
  if ((h >> 7) % 11 == 0) return 0;
  return k % 5 == 4 ? 2000 + (h >> 9) % 4001 : 1 + (h >> 9) % 700;
}

/// Whether ranks a and b exchange in exchange k (symmetric: some pairs skip some exchanges).
bool pair_in(int k, int a, int b) {
  return a != b && (a + b + k) % 3 != 0;
}

/// What rank `from` sends rank `to` at element i of part j of exchange k: distinct per sender,
/// receiver, exchange, part and element, exact under scaling by powers of two.
double value(int from, int to, int k, int j, std::size_t i) {
  return static_cast<double>(from * 100000 + to * 10000 + k * 97 + j * 13) +
         static_cast<double>(i % 4093) / 4096.0;
}

/// `epochs` exchanges of every rank issued back to back (no synchronize, no reduction between)
/// on a rotating one of three contexts of the rank; part 0's send buffer scaled by 2 before some
/// of them and part 1's receive buffer by 1/2 after some, each on another context, so that the
/// tracker must order them with the exchanges. Every received value against its sender's.
void exchanges_deliver(const Comm& c, int epochs) {
  const int n = c.size();
  auto& st = *c.state();
  const auto N = static_cast<std::size_t>(n);
  const std::size_t region = kMax;  // per (exchange, peer) in each part's buffers
  const std::size_t len = static_cast<std::size_t>(epochs) * N * region;
  auto at = [&](int k, int q) {
    return (static_cast<std::size_t>(k) * N + static_cast<std::size_t>(q)) * region;
  };
  struct Local {
    std::vector<Context> ctxs;
    std::vector<la::Vec> send, recv;
  };
  std::vector<Local> locals(static_cast<std::size_t>(c.local_size()));
  for (int l = 0; l < c.local_size(); ++l) {
    auto& lc = locals[static_cast<std::size_t>(l)];
    lc.ctxs.push_back(c.context(l));
    for (auto& f : c.context(l).fork(2)) lc.ctxs.push_back(f);
    const int me = c.rank(l);
    for (int j = 0; j < kParts; ++j) {
      std::vector<double> h(len, 0.0);
      for (int k = 0; k < epochs; ++k) {
        for (int q = 0; q < n; ++q) {
          for (std::size_t i = 0; i < count_of(k, j, me, q); ++i)
            h[at(k, q) + i] = value(me, q, k, j, i);
        }
      }
      lc.send.emplace_back(lc.ctxs[0], h);
      lc.recv.emplace_back(lc.ctxs[0], std::vector<double>(len, -1.0));
    }
  }
  // The factors every rank applies alike: part 0's sends (by exchange) and part 1's receives.
  std::vector<double> sent_factor(static_cast<std::size_t>(epochs), 1.0),
      recv_factor(static_cast<std::size_t>(epochs), 1.0);
  {
    double f = 1.0;
    for (int k = 0; k < epochs; ++k) {
      if (k % 4 == 1) f *= 2.0;
      sent_factor[static_cast<std::size_t>(k)] = f;
    }
    for (int k = 0; k < epochs; ++k) {
      for (int later = k; later < epochs; ++later) {
        if (later % 4 == 3) recv_factor[static_cast<std::size_t>(k)] *= 0.5;
      }
    }
  }
  c.for_each_local([&](const Rank& r) {
    const int l = r.local_index();
    const int me = r.rank();
    auto& lc = locals[static_cast<std::size_t>(l)];
    for (int k = 0; k < epochs; ++k) {
      if (k % 4 == 1) la::scale(lc.send[0], 2.0, lc.ctxs[static_cast<std::size_t>((k / 4) % 3)]);
      std::vector<std::vector<DistSegment>> sends(kParts), recvs(kParts);
      std::vector<DistExchangePart> parts;
      detail::AccessList acc;
      for (int j = 0; j < kParts; ++j) {
        auto& S = lc.send[static_cast<std::size_t>(j)];
        auto& R = lc.recv[static_cast<std::size_t>(j)];
        for (int q = 0; q < n; ++q) {
          if (!pair_in(k, me, q)) continue;
          const std::size_t out = count_of(k, j, me, q), in = count_of(k, j, q, me);
          if (out > 0) {
            sends[static_cast<std::size_t>(j)].push_back({q, at(k, q), out});
            (void)acc.read(S.buffer(), {(S.offset() + at(k, q)) * 8, out * 8});
          }
          if (in > 0) {
            recvs[static_cast<std::size_t>(j)].push_back({q, at(k, q), in});
            (void)acc.write(R.buffer(), {(R.offset() + at(k, q)) * 8, in * 8});
          }
        }
        parts.push_back({S.data(), sends[static_cast<std::size_t>(j)], R.data(),
                         recvs[static_cast<std::size_t>(j)]});
      }
      st.issue(l, lc.ctxs[static_cast<std::size_t>(k % 3)], acc, "test exchange",
               std::source_location::current(), [&](Stream& s, const OpInfo& op) {
                 st.engine->exchange_parts(s, l, parts, DistType::f64, op);
               });
      if (k % 4 == 3) la::scale(lc.recv[1], 0.5, lc.ctxs[static_cast<std::size_t>((k + 1) % 3)]);
    }
  });
  for (int l = 0; l < c.local_size(); ++l) {
    auto& lc = locals[static_cast<std::size_t>(l)];
    const int me = c.rank(l);
    for (int j = 0; j < kParts; ++j) {
      const auto got = lc.recv[static_cast<std::size_t>(j)].to_vector(lc.ctxs[1]);
      for (int k = 0; k < epochs; ++k) {
        for (int q = 0; q < n; ++q) {
          const std::size_t cnt = pair_in(k, me, q) ? count_of(k, j, q, me) : 0;
          double f = 1.0;
          if (j == 0) f = sent_factor[static_cast<std::size_t>(k)];
          if (j == 1) f = recv_factor[static_cast<std::size_t>(k)];
          for (std::size_t i = 0; i < region; ++i) {
            const double want =
                i < cnt ? value(q, me, k, j, i) * f : (j == 1 ? -1.0 * recv_factor[0] : -1.0);
            const double g = got[at(k, q) + i];
            if (g != want) {
              FAIL() << c.exchanges() << " exchanges: rank " << me << " part " << j << " exchange "
                     << k << " from rank " << q << " element " << i << " (of " << cnt << "): got "
                     << g << ", want " << want;
            }
          }
        }
      }
    }
  }
}

TEST(DistGpu, PeerExchangesDeliverEveryPartAndFallBackToNcclWhereTheyDoNotFit) {
  const int local = Environment::process_count() == 1 ? test::cuda_devices() : 1;
  if (auto why = test::gpus_needed(local, 2); !why.empty()) GTEST_SKIP() << why;
  const Comm peer = gpu_comm(ExchangePath::peer, "peer exchanges", kSmallInbox);
  const Comm nccl = gpu_comm(ExchangePath::engine, "nccl exchanges", kSmallInbox);
  ASSERT_EQ(peer.exchanges(), "peer");
  ASSERT_EQ(nccl.exchanges(), "nccl");
  EXPECT_EQ(peer.state()->engine->exchange_sms(false), 0);  // the peer path takes none
  // A captured exchange is NCCL's, which a product leaves multiprocessors to.
  EXPECT_EQ(peer.state()->engine->exchange_sms(true), nccl.state()->engine->exchange_sms(true));
  std::cout << "[ exchange ] " << peer.size() << " ranks in " << peer.processes()
            << " process(es): exchanges " << peer.exchanges() << " and " << nccl.exchanges()
            << std::endl;
  for (const Comm* c : {&peer, &nccl}) {
    SCOPED_TRACE(std::string(c->exchanges()));
    exchanges_deliver(*c, 40);
    exchanges_deliver(*c, 9);  // the epochs go on from where they were
  }
}

TEST(DistGpu, PeerExchangesOfTheDefaultInboxCarryASolvesGhostPlanes) {
  const int local = Environment::process_count() == 1 ? test::cuda_devices() : 1;
  if (auto why = test::gpus_needed(local, 2); !why.empty()) GTEST_SKIP() << why;
  const Comm peer = gpu_comm(ExchangePath::peer, "peer solves");
  const Comm nccl = gpu_comm(ExchangePath::engine, "nccl solves");
  const std::int64_t nz = 4 * peer.size() + 3;
  for (bool assembled : {false, true}) {
    for (auto mode : {la::SolveMode::sync, la::SolveMode::async, la::SolveMode::graph}) {
      SCOPED_TRACE(std::string(la::to_string(mode)) + (assembled ? " csr" : " stencil"));
      const la::KspOptions o{
          .type = la::KspType::cg, .rtol = 1e-9, .mode = mode, .check_every = 2, .history = true};
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
      ASSERT_EQ(xs[0].size(), xs[1].size());
      EXPECT_EQ(std::memcmp(xs[0].data(), xs[1].data(), xs[0].size() * sizeof(double)), 0);
    }
  }
}

TEST(DistGpu, AutomaticExchangesTakeThePeerPathAndAWrongInboxIsRefused) {
  const int local = Environment::process_count() == 1 ? test::cuda_devices() : 1;
  if (auto why = test::gpus_needed(local, 2); !why.empty()) GTEST_SKIP() << why;
  // Automatic: the peer path, since every GPU of a node reaches every other's here (NVLink or
  // PCIe peer access); what scripts/gpu-dist's machines have.
  const Comm a = gpu_comm(ExchangePath::automatic, "auto exchanges");
  EXPECT_EQ(a.exchanges(), "peer");
  EXPECT_EQ(a.state()->engine->exchange_sms(false), 0);
  // Asked for NCCL's, it keeps them.
  const Comm n = gpu_comm(ExchangePath::engine, "nccl exchanges");
  EXPECT_EQ(n.exchanges(), "nccl");
  try {
    const Comm bad = gpu_comm(ExchangePath::peer, "bad inbox", "12q");
    ADD_FAILURE() << "SLUICE_DIST_PEER_INBOX=12q was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SLUICE_DIST_PEER_INBOX is '12q'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace sluice::dist
