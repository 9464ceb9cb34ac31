#pragma once
// Dataflow cases of submission: events recorded only when kept, command groups placed on the
// context of what they depend on, the host-accessor deadlock check through other contexts, copies
// in while a host accessor lives, and nd_range reductions. Written once like dataflow_cases.hpp
// (compiled by nvcc in a cuda build, by the host compiler otherwise).

#include <gtest/gtest.h>

#include <numeric>
#include <optional>
#include <vector>

#include "backend_param.hpp"
#include "sluice/dataflow.hpp"
#include "sluice/sluice.hpp"

namespace sluice::test::dataflow_submit_cases {

namespace df = sluice::dataflow;
using df::access_mode;

/// A kept event is exact: recorded where its command group ended, not where it was first waited
/// on. Here later work on the same context is held back by a host accessor, so an event recorded
/// when waited on would never complete.
inline void kept_events_are_exact(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d, .in_order = true});
  int* x = df::malloc_shared<int>(4, q);
  std::vector<int> hv(16, 1);
  df::Buffer<int> b(hv.data(), df::range<1>(16));
  // Pass 0 only loads the kernels (see deadlock_through_other_contexts).
  for (int pass = 0; pass < 2; ++pass) {
    const bool hold = pass == 1;
    q.single_task([=] SLUICE_KERNEL() {
       for (int i = 0; i < 4; ++i) x[i] = 0;
     }).wait();
    const df::Event e1 = q.single_task([=] SLUICE_KERNEL() { x[0] = 1; });
    const df::Event copy = e1;
    (void)q.single_task([=] SLUICE_KERNEL() { x[1] = 2; });  // dropped: never gets an event
    df::Event held;
    {
      std::optional<df::HostAccessor<int, 1, access_mode::read_write>> h;
      if (hold) h.emplace(b);  // waits for nothing on the device
      held = q.submit([&](df::Handler& cg) {
        auto a = b.get_access<access_mode::read_write>(cg);
        cg.single_task([=] SLUICE_KERNEL() { a[0] += x[0] + x[1]; });
      });
      copy.wait();  // before the gate on the same context: returns
      EXPECT_EQ(x[0], 1);
      EXPECT_TRUE(e1.complete());
      if (hold) {
        EXPECT_FALSE(held.complete());
        EXPECT_THROW(held.wait(), sluice::Error);
        (*h)[0] = 10;
      }
    }
    held.wait();
    // An event asked for while its command group is the context's last operation.
    const df::Event last = q.single_task([=] SLUICE_KERNEL() { x[2] = 3; });
    last.wait();
    EXPECT_EQ(x[2], 3);
  }
  {
    df::HostAccessor<int, 1, access_mode::read> h(b);
    EXPECT_EQ(h[0], 13);
  }
  df::free(x, q);
}

/// On an out-of-order queue a chain of read_write command groups stays on the context of the
/// previous one while nothing else was issued there: no cross-context wait at all.
inline void chains_stay_on_their_context(const Device& d) {
  constexpr std::size_t n = 64;
  df::Queue q(df::QueueOptions{.device = d, .contexts = 4});
  df::Buffer<int> X{df::range<1>(n)}, Y{df::range<1>(n)};
  const df::Event e1 = q.submit([&](df::Handler& h) {
    auto a = X.get_access<access_mode::write>(h, df::no_init);
    h.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { a[i] = int(i[0]); });
  });
  auto before = sluice::deps::stats();
  for (int k = 0; k < 20; ++k) {
    q.submit([&](df::Handler& h) {
      auto a = X.get_access<access_mode::read_write>(h);
      h.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { a[i] += 1; });
    });
  }
  EXPECT_EQ(sluice::deps::stats().waits_issued, before.waits_issued);
  // A group that depends on an event also follows it; a context with later work is not used.
  const df::Event e2 = q.submit([&](df::Handler& h) {
    auto a = X.get_access<access_mode::read_write>(h);
    h.single_task([=] SLUICE_KERNEL() { a[0] += 100; });
  });
  q.submit([&](df::Handler& h) {
    h.depends_on(e2);
    auto y = Y.get_access<access_mode::write>(h, df::no_init);
    h.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { y[i] = 5; });
  });
  before = sluice::deps::stats();
  q.submit([&](df::Handler& h) {  // X's writer's context has Y's group after it now
    auto a = X.get_access<access_mode::read_write>(h);
    h.single_task([=] SLUICE_KERNEL() { a[1] += 1000; });
  });
  EXPECT_EQ(sluice::deps::stats().waits_issued, before.waits_issued + 1);
  df::HostAccessor<int, 1, access_mode::read> hx(X);
  df::HostAccessor<int, 1, access_mode::read> hy(Y);
  EXPECT_EQ(hx[0], 120);
  EXPECT_EQ(hx[1], 1021);
  for (std::size_t i = 2; i < n; ++i) ASSERT_EQ(hx[i], int(i) + 20) << i;
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hy[i], 5) << i;
  e1.wait();
}

/// Waiting, while holding a host accessor, on work that waits for the accessor's gate only
/// through other contexts (an event, a buffer the gated group writes, two hops) is an Error at
/// the call, not a hang; unrelated work on those contexts can still be waited for.
inline void deadlock_through_other_contexts(const Device& d) {
  constexpr std::size_t n = 32;
  df::Queue q(df::QueueOptions{.device = d});
  df::Queue q2(df::QueueOptions{.device = d, .in_order = true});
  df::Queue q3(df::QueueOptions{.device = d, .in_order = true});
  df::Queue q4(df::QueueOptions{.device = d, .in_order = true});
  std::vector<int> hv(n, 1);
  df::Buffer<int> b(hv.data(), df::range<1>(n));
  df::Buffer<int> c{df::range<1>(n)};
  int* out = df::malloc_shared<int>(4, q);
  // Pass 0 only loads the kernels: on cuda, a kernel's first launch may wait for the device to
  // go idle (lazy loading), which it does not while a gate kernel holds work back.
  for (int pass = 0; pass < 2; ++pass) {
    const bool hold = pass == 1;
    df::Event e2, e3, e4;
    {
      std::optional<df::HostAccessor<int, 1, access_mode::read_write>> h;
      if (hold) h.emplace(b);
      const df::Event free2 = q2.single_task([=] SLUICE_KERNEL() { out[0] = 0; });
      const df::Event gated = q.submit([&](df::Handler& cg) {
        auto a = b.get_access<access_mode::read>(cg);
        auto w = c.get_access<access_mode::write>(cg, df::no_init);
        cg.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { w[i] = 2 * a[i]; });
      });
      e2 = q2.single_task(gated, [=] SLUICE_KERNEL() { out[1] = 1; });  // through an event
      e3 = q3.single_task(e2, [=] SLUICE_KERNEL() { out[2] = 2; });     // two hops
      e4 = q4.submit([&](df::Handler& cg) {                             // through the tracker
        auto r = c.get_access<access_mode::read>(cg);
        cg.single_task([=] SLUICE_KERNEL() { out[3] = r[0]; });
      });
      free2.wait();  // issued before the wait on the gated group
      if (hold) {
        EXPECT_THROW(e2.wait(), sluice::Error);
        EXPECT_THROW(e3.wait(), sluice::Error);
        EXPECT_THROW(e4.wait(), sluice::Error);
        EXPECT_THROW(df::wait_all({e3}), sluice::Error);
        EXPECT_THROW(q3.wait(), sluice::Error);
        (*h)[0] = 5;
      }
    }
    e3.wait();
    e4.wait();
    q.wait();
    EXPECT_EQ(out[1], 1);
    EXPECT_EQ(out[2], 2);
    EXPECT_EQ(out[3], hold ? 10 : 2);
  }
  df::free(out, q);
}

/// A command group submitted while a host accessor lives copies the buffer in after the accessor
/// goes, so it sees what the host wrote meanwhile (on cuda from pageable memory: through the
/// buffer's pinned mirror, never the backend's staging).
inline void copy_in_while_host_accessor_lives(const Device& d) {
  constexpr std::size_t n = 4096;
  df::Queue q(df::QueueOptions{.device = d, .in_order = true});
  std::vector<int> hv(n);
  std::iota(hv.begin(), hv.end(), 0);
  int* out = df::malloc_shared<int>(n, q);
  {
    df::Buffer<int> b(hv.data(), df::range<1>(n));
    auto read_into_out = [&] {
      q.submit([&](df::Handler& cg) {
        auto a = b.get_access<access_mode::read>(cg);
        cg.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { out[i[0]] = a[i]; });
      });
    };
    read_into_out();  // loads the kernel (see deadlock_through_other_contexts)
    for (int round = 0; round < 2; ++round) {
      q.submit([&](df::Handler& h) {  // the device copy becomes the current one
        auto a = b.get_access<access_mode::read_write>(h);
        h.parallel_for(df::range<1>(n), [=] SLUICE_KERNEL(df::id<1> i) { a[i] += 1; });
      });
      df::HostAccessor<int, 1, access_mode::read_write> h(b);  // copies back; device stale
      for (std::size_t i = 0; i < n; ++i) h[i] *= 10;
      read_into_out();
      for (std::size_t i = 0; i < n; ++i) h[i] += 3;
    }
    q.wait();
  }
  // Round 0: (i + 1) * 10 + 3; round 1 starts from that.
  for (std::size_t i = 0; i < n; ++i) {
    const int r0 = (int(i) + 1) * 10 + 3;
    ASSERT_EQ(out[i], (r0 + 1) * 10 + 3) << i;
    ASSERT_EQ(hv[i], (r0 + 1) * 10 + 3) << i;
  }
  df::free(out, q);
}

/// SYCL 2020's parallel_for(nd_range, reduction, f): sums and maxima with local memory and
/// barriers, groups whose size is not a multiple of 32, 1D and 2D, into USM and a buffer.
inline void nd_range_reductions(const Device& d) {
  df::Queue q(df::QueueOptions{.device = d});
  long long* sum = df::malloc_shared<long long>(1, q);
  double* mx = df::malloc_shared<double>(1, q);
  *sum = 7;
  *mx = 1e9;  // ignored: initialize_to_identity
  constexpr std::size_t groups = 37, local = 48, n = groups * local;
  q.submit([&](df::Handler& h) {
    df::local_accessor<long long, 1> tile(df::range<1>(local), h);
    h.parallel_for(
        df::nd_range<1>(df::range<1>(n), df::range<1>(local)),
        df::reduction(sum, df::plus<long long>()),
        [=] SLUICE_KERNEL(df::nd_item<1> it, df::Reducer<long long, df::plus<long long>> & r) {
          const std::size_t l = it.get_local_id(0);
          tile[l] = static_cast<long long>(it.get_global_id(0));
          it.barrier();
          r += tile[(l + 1) % local];  // a neighbour's value, through local memory
        });
  });
  q.submit([&](df::Handler& h) {
    h.parallel_for(
        df::nd_range<2>(df::range<2>(24, 40), df::range<2>(8, 5)),
        df::reduction(mx, df::maximum<double>(), {.initialize_to_identity = true}),
        [=] SLUICE_KERNEL(df::nd_item<2> it, df::Reducer<double, df::maximum<double>> & r) {
          const auto i = it.get_global_id(0), j = it.get_global_id(1);
          r.combine(-double((i * 31 + j * 17) % 101) + (i == 13 && j == 29 ? 50 : 0));
        });
  });
  q.wait();
  EXPECT_EQ(*sum, 7 + static_cast<long long>(n) * (n - 1) / 2);
  double expect = -1e300;
  for (std::size_t i = 0; i < 24; ++i) {
    for (std::size_t j = 0; j < 40; ++j) {
      expect = std::max(expect, -double((i * 31 + j * 17) % 101) + (i == 13 && j == 29 ? 50 : 0));
    }
  }
  EXPECT_EQ(*mx, expect);
  std::vector<int> v(1, 100);
  {
    df::Buffer<int> b(v.data(), df::range<1>(1));
    q.submit([&](df::Handler& h) {
      auto red = df::reduction(b, h, df::plus<int>());
      h.parallel_for(df::nd_range<1>(df::range<1>(300), df::range<1>(100)), red,
                     [=] SLUICE_KERNEL(df::nd_item<1> it, decltype(red)::reducer_type & r) {
                       r += int(it.get_global_id(0) % 3);
                     });
    });
  }
  EXPECT_EQ(v[0], 100 + 300);  // 0 + 1 + 2 per three items
  df::free(sum, q);
  df::free(mx, q);
}

}  // namespace sluice::test::dataflow_submit_cases

namespace sluice::test {

class DataflowSubmit : public BackendTest {};

TEST_P(DataflowSubmit, KeptEventsAreExact) {
  dataflow_submit_cases::kept_events_are_exact(device());
}
TEST_P(DataflowSubmit, ChainsStayOnTheirContext) {
  dataflow_submit_cases::chains_stay_on_their_context(device());
}
TEST_P(DataflowSubmit, DeadlockThroughOtherContextsIsAnError) {
  dataflow_submit_cases::deadlock_through_other_contexts(device());
}
TEST_P(DataflowSubmit, CopyInWhileHostAccessorLives) {
  dataflow_submit_cases::copy_in_while_host_accessor_lives(device());
}
TEST_P(DataflowSubmit, NdRangeReductions) {
  dataflow_submit_cases::nd_range_reductions(device());
}

SLUICE_INSTANTIATE_BACKENDS(DataflowSubmit);

}  // namespace sluice::test
