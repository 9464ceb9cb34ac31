// Communicators: ranks, collectives, messages, misuse (sluice/dist.hpp). Run alone and under
// mpirun; each case runs with one and with several ranks per process.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <random>

#include "dist/comm_state.hpp"
#include "dist_test_util.hpp"
#include "sluice/dist.hpp"
#include "sluice/error.hpp"
#include "sluice/memory.hpp"

namespace sluice::dist {
namespace {

using test::host_comm;
using test::local_counts;

template <class T>
DeviceBuffer<T> upload(const Context& ctx, const std::vector<T>& v) {
  DeviceBuffer<T> b(ctx, v.size());
  sluice::copy(ctx, b, v);
  ctx.synchronize();
  return b;
}

template <class T>
std::vector<T> download(const Context& ctx, const DeviceBuffer<T>& b) {
  std::vector<T> v(b.size());
  sluice::copy(ctx, v, b);
  ctx.synchronize();
  return v;
}

/// Rank r's contribution: r + 1 + k/8 at element k.
std::vector<double> contribution(int r, std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t k = 0; k < n; ++k) v[k] = r + 1 + static_cast<double>(k) / 8;
  return v;
}

TEST(DistComm, RanksAreNumberedProcessByProcess) {
  for (int L : local_counts()) {
    Comm c = host_comm(L);
    EXPECT_EQ(c.size(), L * Environment::process_count());
    EXPECT_EQ(c.local_size(), L);
    EXPECT_EQ(c.processes(), Environment::process_count());
    for (int i = 0; i < L; ++i) EXPECT_EQ(c.rank(i), Environment::process_rank() * L + i);
    EXPECT_EQ(c.engine(), Environment::process_count() > 1 ? "mpi" : "local");
  }
}

TEST(DistComm, AllreduceSumMaxMin) {
  for (int L : local_counts()) {
    Comm c = host_comm(L);
    const int n = c.size();
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
      std::vector<DeviceBuffer<double>> bufs;
      for (int i = 0; i < L; ++i) bufs.push_back(upload(c.context(i), contribution(c.rank(i), 9)));
      for (int i = 0; i < L; ++i) c.local(i).allreduce(bufs[static_cast<std::size_t>(i)], op);
      for (int i = 0; i < L; ++i) {
        const auto got = download(c.context(i), bufs[static_cast<std::size_t>(i)]);
        for (std::size_t k = 0; k < got.size(); ++k) {
          double want = op == ReduceOp::sum ? 0 : op == ReduceOp::max ? -1e300 : 1e300;
          for (int r = 0; r < n; ++r) {
            const double x = contribution(r, 9)[k];
            want = op == ReduceOp::sum   ? want + x
                   : op == ReduceOp::max ? std::max(want, x)
                                         : std::min(want, x);
          }
          EXPECT_EQ(got[k], want) << "L=" << L << " k=" << k;
        }
      }
    }
  }
}

TEST(DistComm, IntegersAndSeparateBuffers) {
  for (int L : local_counts()) {
    Comm c = host_comm(L);
    std::vector<DeviceBuffer<std::int64_t>> send, recv;
    for (int i = 0; i < L; ++i) {
      send.push_back(upload(c.context(i), std::vector<std::int64_t>{c.rank(i), 1, -c.rank(i)}));
      recv.emplace_back(c.context(i), 3);
    }
    for (int i = 0; i < L; ++i) {
      c.local(i).allreduce(send[static_cast<std::size_t>(i)], recv[static_cast<std::size_t>(i)],
                           ReduceOp::sum, c.context(i));
    }
    const std::int64_t n = c.size();
    for (int i = 0; i < L; ++i) {
      EXPECT_EQ(download(c.context(i), recv[static_cast<std::size_t>(i)]),
                (std::vector<std::int64_t>{n * (n - 1) / 2, n, -n * (n - 1) / 2}));
    }
  }
}

TEST(DistComm, ManagedValueIsReducedWhereItLies) {
  for (int L : local_counts()) {
    Comm c = host_comm(L);
    std::vector<Managed<double>> v;
    for (int i = 0; i < L; ++i) v.emplace_back(1.0 + c.rank(i), c.context(i));
    for (int i = 0; i < L; ++i) c.local(i).allreduce(v[static_cast<std::size_t>(i)], ReduceOp::sum);
    const double n = c.size();
    for (auto& m : v) EXPECT_EQ(m.value(), n * (n + 1) / 2);
  }
}

TEST(DistComm, ReduceBroadcastAllgather) {
  for (int L : local_counts()) {
    Comm c = host_comm(L);
    const int n = c.size();
    const int root = n - 1;
    std::vector<DeviceBuffer<double>> send, recv, data, gathered;
    for (int i = 0; i < L; ++i) {
      const Context& ctx = c.context(i);
      send.push_back(upload(ctx, contribution(c.rank(i), 4)));
      recv.emplace_back(ctx, 4);
      data.push_back(upload(ctx, contribution(c.rank(i) * 10, 6)));
      gathered.emplace_back(ctx, 4 * static_cast<std::size_t>(n));
    }
    for (int i = 0; i < L; ++i) {
      const auto k = static_cast<std::size_t>(i);
      const Rank r = c.local(i);
      r.reduce(send[k], recv[k], ReduceOp::sum, root, r.context());
      r.broadcast(data[k], root, r.context());
      r.allgather(send[k], gathered[k], r.context());
    }
    for (int i = 0; i < L; ++i) {
      const auto k = static_cast<std::size_t>(i);
      const Context& ctx = c.context(i);
      if (c.rank(i) == root) {
        const auto got = download(ctx, recv[k]);
        for (std::size_t e = 0; e < 4; ++e) {
          double want = 0;
          for (int r = 0; r < n; ++r) want += contribution(r, 4)[e];
          EXPECT_EQ(got[e], want);
        }
      }
      EXPECT_EQ(download(ctx, data[k]), contribution(root * 10, 6));
      std::vector<double> all;
      for (int r = 0; r < n; ++r) {
        const auto part = contribution(r, 4);
        all.insert(all.end(), part.begin(), part.end());
      }
      EXPECT_EQ(download(ctx, gathered[k]), all);
    }
  }
}

TEST(DistComm, RingExchangeAndPairedSendRecv) {
  for (int L : local_counts()) {
    Comm c = host_comm(L);
    const int n = c.size();
    std::vector<DeviceBuffer<double>> buf, got, pair;
    for (int i = 0; i < L; ++i) {
      // [mine (3) | from the left (3) | from the right (3)]
      auto v = contribution(c.rank(i), 3);
      v.resize(9, -1.0);
      buf.push_back(upload(c.context(i), v));
      pair.emplace_back(c.context(i), 5);
    }
    for (int i = 0; i < L; ++i) {
      const int me = c.rank(i), left = (me + n - 1) % n, right = (me + 1) % n;
      const DistSegment sends[] = {{right, 0, 3}, {left, 0, 3}};
      const DistSegment recvs[] = {{left, 3, 3}, {right, 6, 3}};
      c.local(i).exchange(buf[static_cast<std::size_t>(i)], sends, buf[static_cast<std::size_t>(i)],
                          recvs, c.context(i));
    }
    for (int i = 0; i < L; ++i) {
      const int me = c.rank(i), left = (me + n - 1) % n, right = (me + 1) % n;
      auto want = contribution(me, 3);
      const auto l = contribution(left, 3), r = contribution(right, 3);
      want.insert(want.end(), l.begin(), l.end());
      want.insert(want.end(), r.begin(), r.end());
      EXPECT_EQ(download(c.context(i), buf[static_cast<std::size_t>(i)]), want) << "rank " << me;
    }
    if (n < 2) continue;
    // Pairs (0, 1), (2, 3), ...: the even rank sends first, the odd one receives first.
    for (int i = 0; i < L; ++i) {
      const int me = c.rank(i), peer = me ^ 1;
      if (peer >= n) continue;
      const Rank r = c.local(i);
      const auto k = static_cast<std::size_t>(i);
      DeviceBuffer<double> mine = upload(r.context(), contribution(me, 5));
      if (me % 2 == 0) {
        r.send(mine, peer, r.context());
        r.recv(pair[k], peer, r.context());
      } else {
        r.recv(pair[k], peer, r.context());
        r.send(mine, peer, r.context());
      }
    }
    for (int i = 0; i < L; ++i) {
      const int me = c.rank(i), peer = me ^ 1;
      if (peer >= n) continue;
      EXPECT_EQ(download(c.context(i), pair[static_cast<std::size_t>(i)]), contribution(peer, 5));
    }
  }
}

/// The host engine's exchanges in two halves (DistEngine::exchange_start/finish, what a product's
/// ghost exchange uses there): two started on each rank before either finishes, finished in the
/// other order, each by its key; a finish whose start never ran is an error of its operation.
TEST(DistComm, HostExchangesRunInTwoHalvesEachByItsKey) {
  for (int L : local_counts()) {
    Comm c = host_comm(L, "split exchanges");
    const auto& st = *c.state();
    ASSERT_TRUE(st.engine->splits_exchanges());
    const int n = c.size();
    std::vector<DeviceBuffer<double>> a, b;
    for (int i = 0; i < L; ++i) {
      // [mine (3) | from the left (3) | from the right (3)]
      auto va = contribution(c.rank(i), 3), vb = contribution(c.rank(i) + 100, 3);
      va.resize(9, -1.0);
      vb.resize(9, -1.0);
      a.push_back(upload(c.context(i), va));
      b.push_back(upload(c.context(i), vb));
    }
    const int keys[2] = {0, 0};
    auto half = [&](int i, DeviceBuffer<double>& buf, const void* key, bool start) {
      const int me = c.rank(i), left = (me + n - 1) % n, right = (me + 1) % n;
      const DistSegment sends[] = {{right, 0, 3}, {left, 0, 3}};
      const DistSegment recvs[] = {{left, 3, 3}, {right, 6, 3}};
      sluice::detail::AccessList acc;
      double* p = acc.read_write(buf);
      const DistExchangePart part{p, sends, p, recvs};
      st.issue(i, c.context(i), acc, start ? "test start" : "test finish",
               std::source_location::current(), [&](Stream& s, const OpInfo& op) {
                 if (start) {
                   st.engine->exchange_start(s, i, {&part, 1}, DistType::f64, key, op);
                 } else {
                   st.engine->exchange_finish(s, i, key, op);
                 }
               });
    };
    for (int i = 0; i < L; ++i) {
      const auto k = static_cast<std::size_t>(i);
      half(i, a[k], &keys[0], true);
      half(i, b[k], &keys[1], true);
      half(i, b[k], &keys[1], false);
      half(i, a[k], &keys[0], false);
    }
    for (int i = 0; i < L; ++i) {
      const int me = c.rank(i), left = (me + n - 1) % n, right = (me + 1) % n;
      for (int off : {0, 100}) {
        auto want = contribution(me + off, 3);
        const auto l = contribution(left + off, 3), r = contribution(right + off, 3);
        want.insert(want.end(), l.begin(), l.end());
        want.insert(want.end(), r.begin(), r.end());
        EXPECT_EQ(download(c.context(i), (off == 0 ? a : b)[static_cast<std::size_t>(i)]), want)
            << "rank " << me << (off == 0 ? ", first exchange" : ", second exchange");
      }
    }
    // A finish without its start fails its own operation, with a message that says so.
    half(0, a[0], &n, false);
    try {
      c.context(0).synchronize();
      ADD_FAILURE() << "a finish without a start passed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no exchange was started"), std::string::npos)
          << e.what();
    }
  }
}

TEST(DistComm, TwoCommunicatorsNeverCross) {
  // Collectives of two communicators on unordered contexts: each meets its own kind, whatever
  // order the processes run them in (each communicator has MPI communicators of its own).
  Comm a = host_comm(1, "a"), b = host_comm(1, "b");
  const double n = a.size();
  for (int round = 0; round < 20; ++round) {
    Managed<double> va(1.0 + a.rank(), a.context()), vb(100.0 * (1 + b.rank()), b.context());
    if (round % 2 == 0) {
      a.allreduce(va, ReduceOp::sum);
      b.allreduce(vb, ReduceOp::sum);
    } else {
      b.allreduce(vb, ReduceOp::sum);
      a.allreduce(va, ReduceOp::sum);
    }
    EXPECT_EQ(va.value(), n * (n + 1) / 2);
    EXPECT_EQ(vb.value(), 100.0 * n * (n + 1) / 2);
  }
}

TEST(DistComm, ReductionPathsOnTheHostAreTheEngines) {
  // The peer path is the cuda engine's; the host's ranks of a process already meet in memory,
  // so asking for it there changes nothing, and the solvers reduce as before.
  for (ReducePath path : {ReducePath::automatic, ReducePath::peer, ReducePath::engine}) {
    Comm c(CommOptions{.contexts = {Context(Device{"host", 0}), Context(Device{"host", 0})},
                       .name = "paths",
                       .reductions = path});
    EXPECT_EQ(c.reductions(), c.engine());
    EXPECT_EQ(c.state()->engine->fused_gather_capacity(), 0u);
  }
  // A misspelt SLUICE_DIST_REDUCE is refused on every process alike, naming the values.
  const char* was = std::getenv("SLUICE_DIST_REDUCE");
  const std::string saved = was != nullptr ? was : "";
  setenv("SLUICE_DIST_REDUCE", "pier", 1);
  try {
    Comm c = host_comm(1, "misspelt");
    ADD_FAILURE() << "SLUICE_DIST_REDUCE=pier was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("peer, nccl"), std::string::npos) << e.what();
  }
  if (was != nullptr) {
    setenv("SLUICE_DIST_REDUCE", saved.c_str(), 1);
  } else {
    unsetenv("SLUICE_DIST_REDUCE");
  }
}

TEST(DistComm, ExchangePathsOnTheHostAreTheEngines) {
  // The peer exchange path is the cuda engine's (copy engines); the host's engine exchanges as
  // before, whatever is asked for.
  for (ExchangePath path : {ExchangePath::automatic, ExchangePath::peer, ExchangePath::engine}) {
    Comm c(CommOptions{.contexts = {Context(Device{"host", 0}), Context(Device{"host", 0})},
                       .name = "exchange paths",
                       .exchanges = path});
    EXPECT_EQ(c.exchanges(), c.engine());
    EXPECT_EQ(c.state()->engine->exchange_sms(false), 0);
  }
  // A misspelt SLUICE_DIST_EXCHANGE_PATH is refused on every process alike, naming the values.
  const char* was = std::getenv("SLUICE_DIST_EXCHANGE_PATH");
  const std::string saved = was != nullptr ? was : "";
  setenv("SLUICE_DIST_EXCHANGE_PATH", "pier", 1);
  try {
    Comm c = host_comm(1, "misspelt exchanges");
    ADD_FAILURE() << "SLUICE_DIST_EXCHANGE_PATH=pier was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SLUICE_DIST_EXCHANGE_PATH is 'pier'; it is peer, nccl"),
              std::string::npos)
        << e.what();
  }
  if (was != nullptr) {
    setenv("SLUICE_DIST_EXCHANGE_PATH", saved.c_str(), 1);
  } else {
    unsetenv("SLUICE_DIST_EXCHANGE_PATH");
  }
}

TEST(DistComm, MisuseIsRefusedAtTheCall) {
  Comm c = host_comm(1);
  const Context& ctx = c.context();
  DeviceBuffer<double> a(ctx, 4), b(ctx, 5), g(ctx, 3);
  const Rank r = c.local();
  EXPECT_THROW(r.allreduce(a, b, ReduceOp::sum, ctx), Error);  // sizes differ
  EXPECT_THROW(r.allgather(a, g, ctx), Error);                 // too small
  EXPECT_THROW(r.broadcast(a, c.size(), ctx), Error);          // no such root
  const DistSegment beyond[] = {{0, 3, 4}};
  EXPECT_THROW(r.exchange(a, beyond, a, {}, ctx), Error);  // past the end
  EXPECT_THROW((void)c.local(1), Error);                   // one local rank
  try {
    r.allreduce(a, b, ReduceOp::sum, ctx);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("4 and 5 elements"), std::string::npos) << e.what();
  }
  Comm two = host_comm(2);
  DeviceBuffer<double> d(two.context(), 2);
  EXPECT_THROW(two.allreduce(d, ReduceOp::sum), Error);  // which local rank?
}

// ---- randomized: collectives and exchanges among local work on several contexts ----------------

}  // namespace

void test::random_interleaving(const Comm& c, unsigned seed) {
  const int n = c.size();
  const int L = c.local_size();
  constexpr std::size_t kLen = 48;
  constexpr int kBufs = 4;
  // Per local rank: its contexts (its rank's and two more) and buffers.
  struct Local {
    std::vector<Context> ctxs;
    std::vector<la::Vec> bufs;
  };
  std::vector<Local> locals(static_cast<std::size_t>(L));
  std::vector<std::vector<std::vector<double>>> model(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    for (int k = 0; k < kBufs; ++k)
      model[static_cast<std::size_t>(r)].push_back(test::pattern(kLen, r + 0.25 * k));
  }
  for (int i = 0; i < L; ++i) {
    auto& lc = locals[static_cast<std::size_t>(i)];
    lc.ctxs.push_back(c.context(i));
    for (auto& f : c.context(i).fork(2)) lc.ctxs.push_back(f);
    for (int k = 0; k < kBufs; ++k) {
      lc.bufs.emplace_back(lc.ctxs[0],
                           model[static_cast<std::size_t>(c.rank(i))][static_cast<std::size_t>(k)]);
    }
  }
  std::mt19937 rng(seed);  // the same sequence on every process
  auto pick = [&](int m) { return static_cast<int>(rng() % static_cast<unsigned>(m)); };
  for (int step = 0; step < 60; ++step) {
    const int kind = pick(6);
    const int a = pick(kBufs), b = (a + 1 + pick(kBufs - 1)) % kBufs;
    const double s = 0.5 + 0.125 * pick(8);
    switch (kind) {
      case 0:    // local: scale, on a random context
      case 1: {  // local: axpy
        std::vector<int> ctx_of(static_cast<std::size_t>(n));
        for (auto& x : ctx_of) x = pick(3);
        for (int i = 0; i < L; ++i) {
          auto& lc = locals[static_cast<std::size_t>(i)];
          const Context& ctx =
              lc.ctxs[static_cast<std::size_t>(ctx_of[static_cast<std::size_t>(c.rank(i))])];
          if (kind == 0) {
            la::scale(lc.bufs[static_cast<std::size_t>(a)], s, ctx);
          } else {
            la::axpy(lc.bufs[static_cast<std::size_t>(a)], s, lc.bufs[static_cast<std::size_t>(b)],
                     ctx);
          }
        }
        for (auto& m : model) {
          auto& x = m[static_cast<std::size_t>(a)];
          const auto& y = m[static_cast<std::size_t>(b)];
          for (std::size_t e = 0; e < kLen; ++e) x[e] = kind == 0 ? s * x[e] : x[e] + s * y[e];
        }
        break;
      }
      case 2: {  // allreduce (an average: values stay bounded)
        const int which = pick(3);
        for (int i = 0; i < L; ++i) {
          auto& lc = locals[static_cast<std::size_t>(i)];
          auto& v = lc.bufs[static_cast<std::size_t>(a)];
          c.local(i).issue_allreduce(detail::ref(v), detail::ref(v), DistType::f64, ReduceOp::sum,
                                     lc.ctxs[static_cast<std::size_t>(which)], true,
                                     std::source_location::current());
          la::scale(v, 1.0 / n, lc.ctxs[static_cast<std::size_t>((which + 1) % 3)]);
        }
        std::vector<double> total(kLen, 0.0);
        for (auto& m : model) {
          for (std::size_t e = 0; e < kLen; ++e) total[e] += m[static_cast<std::size_t>(a)][e];
        }
        for (auto& m : model) {
          for (std::size_t e = 0; e < kLen; ++e)
            m[static_cast<std::size_t>(a)][e] = total[e] * (1.0 / n);
        }
        break;
      }
      case 3: {  // broadcast from a random root
        const int root = pick(n);
        for (int i = 0; i < L; ++i) {
          auto& lc = locals[static_cast<std::size_t>(i)];
          c.local(i).issue_broadcast(
              detail::ref(lc.bufs[static_cast<std::size_t>(a)]), DistType::f64, root,
              lc.ctxs[static_cast<std::size_t>(pick(3))], std::source_location::current());
        }
        for (auto& m : model)
          m[static_cast<std::size_t>(a)] =
              model[static_cast<std::size_t>(root)][static_cast<std::size_t>(a)];
        break;
      }
      case 4: {  // halo exchange: the ends of buffer a to the neighbours' buffer b
        constexpr std::size_t h = 5;
        for (int i = 0; i < L; ++i) {
          auto& lc = locals[static_cast<std::size_t>(i)];
          const int me = c.rank(i);
          std::vector<DistSegment> sends, recvs;
          if (me > 0) {
            sends.push_back({me - 1, 0, h});
            recvs.push_back({me - 1, 0, h});
          }
          if (me + 1 < n) {
            sends.push_back({me + 1, kLen - h, h});
            recvs.push_back({me + 1, kLen - h, h});
          }
          c.local(i).issue_exchange(detail::ref(lc.bufs[static_cast<std::size_t>(a)]), sends,
                                    detail::ref(lc.bufs[static_cast<std::size_t>(b)]), recvs,
                                    DistType::f64, lc.ctxs[static_cast<std::size_t>(pick(3))],
                                    std::source_location::current());
        }
        auto before = model;
        for (int r = 0; r < n; ++r) {
          auto& dst = model[static_cast<std::size_t>(r)][static_cast<std::size_t>(b)];
          if (r > 0) {
            const auto& src = before[static_cast<std::size_t>(r - 1)][static_cast<std::size_t>(a)];
            std::copy(src.end() - h, src.end(), dst.begin());
          }
          if (r + 1 < n) {
            const auto& src = before[static_cast<std::size_t>(r + 1)][static_cast<std::size_t>(a)];
            std::copy(src.begin(), src.begin() + h, dst.end() - h);
          }
        }
        break;
      }
      default: {  // a dot product reduced on the device, then used to scale
        for (int i = 0; i < L; ++i) {
          auto& lc = locals[static_cast<std::size_t>(i)];
          const Context& ctx = lc.ctxs[static_cast<std::size_t>(pick(3))];
          Managed<double> d;
          la::dot(lc.bufs[static_cast<std::size_t>(a)], lc.bufs[static_cast<std::size_t>(b)], d,
                  ctx);
          c.local(i).allreduce(d, ReduceOp::sum, ctx);
          la::scale(lc.bufs[static_cast<std::size_t>(b)], 1.0 / (1.0 + d * d),
                    lc.ctxs[static_cast<std::size_t>(pick(3))]);
        }
        double d = 0;
        for (auto& m : model) {
          for (std::size_t e = 0; e < kLen; ++e)
            d += m[static_cast<std::size_t>(a)][e] * m[static_cast<std::size_t>(b)][e];
        }
        const double f = 1.0 / (1.0 + d * d);
        for (auto& m : model) {
          for (auto& x : m[static_cast<std::size_t>(b)]) x *= f;
        }
        break;
      }
    }
  }
  for (int i = 0; i < L; ++i) {
    auto& lc = locals[static_cast<std::size_t>(i)];
    for (int k = 0; k < kBufs; ++k) {
      const auto got = lc.bufs[static_cast<std::size_t>(k)].to_vector(lc.ctxs[1]);
      const auto& want = model[static_cast<std::size_t>(c.rank(i))][static_cast<std::size_t>(k)];
      for (std::size_t e = 0; e < kLen; ++e) {
        ASSERT_NEAR(got[e], want[e], 1e-12 * (1 + std::abs(want[e])))
            << "rank " << c.rank(i) << " buffer " << k << " element " << e << " (seed " << seed
            << ")";
      }
    }
  }
}

namespace {

TEST(DistComm, RandomCollectivesAndExchangesAmongLocalWorkOnSeveralContexts) {
  for (int L : local_counts()) {
    const Comm c = host_comm(L, "random");
    for (unsigned seed : {1u, 2u, 3u})
      test::random_interleaving(c, seed * 7 + static_cast<unsigned>(L));
  }
}

}  // namespace
}  // namespace sluice::dist
