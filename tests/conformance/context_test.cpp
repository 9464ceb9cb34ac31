// Context semantics, stated once for every backend.

#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <thread>

#include <gtest/gtest-spi.h>

#include "backend_param.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

class ContextTest : public BackendTest {};

TEST_P(ContextTest, HostTasksRunInIssueOrder) {
  auto ctx = make_context();
  std::vector<int> seen;
  for (int i = 0; i < 1000; ++i) ctx.host_task([&seen, i] { seen.push_back(i); });
  ctx.synchronize();
  std::vector<int> expected(1000);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(seen, expected);
}

TEST_P(ContextTest, MixedOperationsRunInIssueOrder) {
  // memset, copies and host tasks interleaved on one context: any reordering changes the result.
  auto ctx = make_context();
  constexpr std::size_t n = 1 << 16;
  PinnedBuffer<std::uint32_t> src(ctx, n), dst(ctx, n);
  for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<std::uint32_t>(i * 2654435761u);
  DeviceBuffer<std::uint32_t> a(ctx, n), b(ctx, n);
  for (int round = 0; round < 20; ++round) {
    memset(ctx, a, 0);
    copy(ctx, a, src);
    memset(ctx, b, 0xff);
    copy(ctx, b, a);
    memset(ctx, a, 0);
    copy(ctx, a, b);
  }
  std::atomic<bool> copied_back{false};
  copy(ctx, dst, a);
  ctx.host_task([&] { copied_back = dst[n - 1] == src[n - 1]; });
  ctx.synchronize();
  EXPECT_TRUE(copied_back.load());
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(dst[i], src[i]) << "at " << i;
}

TEST_P(ContextTest, IndependentContextsOverlap) {
  // Both contexts must be inside their rendezvous at the same time; a runtime that serialized
  // them would time out instead.
  auto a = make_context();
  auto b = make_context();
  Rendezvous r(a, 2);
  r.arrive(a, 0);
  r.arrive(b, 1);
  a.synchronize();
  b.synchronize();
  EXPECT_TRUE(r.all_met());
}

TEST_P(ContextTest, ManyContextsOverlap) {
  constexpr int n = 4;
  auto home = make_context();
  std::vector<Context> ctxs;
  for (int i = 0; i < n; ++i) ctxs.push_back(make_context());
  Rendezvous r(home, n);
  for (int i = 0; i < n; ++i) r.arrive(ctxs[static_cast<std::size_t>(i)], i);
  for (auto& c : ctxs) c.synchronize();
  EXPECT_TRUE(r.all_met());
}

TEST_P(ContextTest, WaitForOrdersAcrossContexts) {
  auto a = make_context();
  auto b = make_context();
  constexpr std::size_t n = 1 << 20;
  PinnedBuffer<int> src(a, n), dst(b, n);
  for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<int>(i) ^ 0x5a5a;
  DeviceBuffer<int> d(a, n);
  memset(a, d, 0);
  a.host_task([] { std::this_thread::sleep_for(30ms); });  // the copy below comes late
  copy(a, d, src);
  b.wait_for(a);
  copy(b, dst, d);
  b.synchronize();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(dst[i], src[i]) << "at " << i;
  a.synchronize();
}

TEST_P(ContextTest, WaitForDoesNotBlockTheHost) {
  auto a = make_context();
  auto b = make_context();
  std::atomic<bool> release{false};
  a.host_task([&] {
    while (!release) std::this_thread::yield();
  });
  auto t0 = std::chrono::steady_clock::now();
  b.wait_for(a);
  std::atomic<bool> ran{false};
  b.host_task([&] { ran = true; });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_FALSE(ran.load());  // b's work waits for a's gate
  release = true;
  b.synchronize();
  EXPECT_TRUE(ran.load());
  a.synchronize();
}

TEST_P(ContextTest, IdleReportsPendingWork) {
  auto ctx = make_context();
  ctx.synchronize();
  EXPECT_TRUE(ctx.idle());
  std::atomic<bool> release{false};
  ctx.host_task([&] {
    while (!release) std::this_thread::yield();
  });
  EXPECT_FALSE(ctx.idle());
  release = true;
  ctx.synchronize();
  EXPECT_TRUE(ctx.idle());
}

TEST_P(ContextTest, BlockingKindWaitsForDeviceAndCompletesOnReturn) {
  auto async_ctx = make_context();
  auto blocking = make_context(StreamKind::blocking);
  EXPECT_EQ(blocking.kind(), StreamKind::blocking);
  std::atomic<bool> earlier_done{false};
  async_ctx.host_task([&] {
    std::this_thread::sleep_for(30ms);
    earlier_done = true;
  });
  std::atomic<bool> mine_done{false};
  blocking.host_task([&] { mine_done = true; });
  EXPECT_TRUE(earlier_done.load()) << "blocking work must wait for prior work on the device";
  EXPECT_TRUE(mine_done.load()) << "blocking work must be complete when the call returns";
  EXPECT_TRUE(blocking.idle());

  // Data: a blocking copy to the host is readable at once.
  DeviceBuffer<int> d(blocking, 4);
  std::vector<int> src{1, 2, 3, 4}, dst(4, 0);
  copy(blocking, d, src);
  copy(blocking, dst, d);
  EXPECT_EQ(dst, src);
}

TEST_P(ContextTest, AsyncContextDoesNotWaitForOthers) {
  auto a = make_context();
  auto b = make_context();
  Gate gate(device());
  gate.block(a);
  std::atomic<bool> ran{false};
  b.host_task([&] { ran = true; });
  b.synchronize();  // would hang (30 s, then fail) if b waited for a
  EXPECT_TRUE(ran.load());
  EXPECT_FALSE(a.idle());
  gate.open();
  a.synchronize();
}

// The check behind every ordering test with a Gate: a host wait for the gated work between
// block() and open() (here a synchronize) fails the test instead of passing once the gate gave
// up by itself; a gate opened in time does not.
TEST_P(ContextTest, AGateTheHostWaitedOutFailsTheTest) {
  auto ctx = make_context();
  {
    Gate gate(device(), 200ms);
    gate.block(ctx);
    ctx.synchronize();  // returns when the gate gives up
    EXPECT_NONFATAL_FAILURE(gate.open(), "the gate gave up");
  }
  Gate in_time(device());
  in_time.block(ctx);
  EXPECT_FALSE(ctx.idle());
  in_time.open();
  ctx.synchronize();
}

TEST_P(ContextTest, ForkStartsAfterParentAndJoinWaitsForChildren) {
  auto parent = make_context();
  std::atomic<bool> parent_done{false};
  std::atomic<int> children_ran{0};
  std::atomic<int> children_saw_parent{0};
  parent.host_task([&] {
    std::this_thread::sleep_for(20ms);
    parent_done = true;
  });
  auto children = parent.fork(3);
  ASSERT_EQ(children.size(), 3u);
  for (auto& c : children) {
    EXPECT_EQ(c.device(), parent.device());
    c.host_task([&] {
      if (parent_done) ++children_saw_parent;
      std::this_thread::sleep_for(5ms);
      ++children_ran;
    });
  }
  parent.join(children);
  int seen_by_parent = -1;
  parent.host_task([&] { seen_by_parent = children_ran.load(); });
  parent.synchronize();
  EXPECT_EQ(children_saw_parent.load(), 3);
  EXPECT_EQ(seen_by_parent, 3);
}

TEST_P(ContextTest, PrioritiesAreClampedAndQueryable) {
  // One convention on every backend, CUDA's and Warp's: lower numbers are more urgent, 0 is the
  // default, and no backend's default is its most urgent value while it can go lower.
  auto info = device_info(device());
  EXPECT_GE(info.priority_lowest, info.priority_highest) << "lower numbers are more urgent";
  EXPECT_GE(info.priority_lowest, 0);
  EXPECT_LE(info.priority_highest, 0);
  EXPECT_EQ(make_context(StreamKind::async, -1000).priority(), info.priority_highest);
  EXPECT_EQ(make_context(StreamKind::async, 1000).priority(), info.priority_lowest);
  EXPECT_EQ(make_context().priority(), 0);
  if (!is_host()) {
    // CUDA's range: 0 (the default, least urgent) down to its most urgent, e.g. -5.
    EXPECT_EQ(info.priority_lowest, 0);
    EXPECT_LT(info.priority_highest, 0);
  }
  // A low-priority context still runs its work.
  auto low = make_context(StreamKind::async, info.priority_lowest);
  std::atomic<bool> ran{false};
  low.host_task([&] { ran = true; });
  low.synchronize();
  EXPECT_TRUE(ran.load());
}

TEST_P(ContextTest, DestructionDrainsPendingWork) {
  std::atomic<int> ran{0};
  {
    auto ctx = make_context();
    for (int i = 0; i < 10; ++i) {
      ctx.host_task([&] {
        std::this_thread::sleep_for(2ms);
        ++ran;
      });
    }
  }
  EXPECT_EQ(ran.load(), 10);
}

TEST_P(ContextTest, DestructionWithPendingCopiesAndBuffers) {
  constexpr std::size_t n = 1 << 18;
  std::vector<float> host(n, 1.5f), back(n, 0.0f);
  {
    auto ctx = make_context();
    DeviceBuffer<float> d(ctx, n);
    copy(ctx, d, host);
    copy(ctx, back, d);
  }  // buffer freed in stream order, context drained
  EXPECT_EQ(back, host);
}

TEST_P(ContextTest, CopiesOfAHandleShareTheStream) {
  auto a = make_context();
  Context b = a;
  EXPECT_TRUE(a == b);
  std::vector<int> seen;
  a.host_task([&] { seen.push_back(1); });
  b.host_task([&] { seen.push_back(2); });
  a.synchronize();
  EXPECT_EQ(seen, (std::vector<int>{1, 2}));
}

TEST_P(ContextTest, ManyThreadsIssueToOneContext) {
  auto ctx = make_context();
  constexpr int threads = 8, per_thread = 500;
  std::mutex m;
  std::vector<std::vector<int>> seen(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        ctx.host_task([&, t, i] {
          std::lock_guard lock(m);
          seen[static_cast<std::size_t>(t)].push_back(i);
        });
      }
    });
  }
  for (auto& th : pool) th.join();
  ctx.synchronize();
  for (int t = 0; t < threads; ++t) {
    auto& s = seen[static_cast<std::size_t>(t)];
    ASSERT_EQ(s.size(), static_cast<std::size_t>(per_thread));
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end())) << "thread " << t << "'s work was reordered";
  }
}

TEST_P(ContextTest, ManyThreadsIssueToManyContexts) {
  constexpr int threads = 6;
  std::vector<std::thread> pool;
  std::atomic<int> failures{0};
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        auto ctx = make_context();
        constexpr std::size_t n = 4096;
        std::vector<int> src(n, t), dst(n, -1);
        DeviceBuffer<int> d(ctx, n);
        for (int r = 0; r < 50; ++r) {
          copy(ctx, d, src);
          copy(ctx, dst, d);
        }
        ctx.synchronize();
        if (dst != src) ++failures;
      } catch (...) {
        ++failures;
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(failures.load(), 0);
}

SLUICE_INSTANTIATE_BACKENDS(ContextTest);

}  // namespace
}  // namespace sluice::test
