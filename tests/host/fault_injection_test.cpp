// Host-backend fault injection: a failure leaves no leak, no hang and no corrupted state.

#include <gtest/gtest.h>

#include <atomic>

#include "sluice/host.hpp"
#include "sluice/sluice.hpp"

namespace sluice::test {
namespace {

class FaultInjection : public ::testing::Test {
 protected:
  void SetUp() override {
    host::clear_faults();
    trim_pool(host_device);
    before_ = host::live_counts();
  }
  void TearDown() override {
    host::clear_faults();
    EXPECT_EQ(host::live_counts(), before_) << "a failure leaked memory or a worker";
  }
  const Device host_device{"host", 0};

 private:
  host::LiveCounts before_;
};

TEST_F(FaultInjection, FailedAllocationThrowsAndLeaksNothing) {
  Context ctx(host_device);
  DeviceBuffer<int> first(ctx, 100);
  host::fail_nth_allocation(2);
  DeviceBuffer<int> second(ctx, 100);
  try {
    DeviceBuffer<int> third(ctx, 100);
    FAIL() << "injected failure did not fire";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.requested(), 400u);
    EXPECT_NE(std::string(e.what()).find("injected"), std::string::npos);
  }
  DeviceBuffer<int> fourth(ctx, 100);  // allocation works again
  memset(ctx, fourth, 0);
  ctx.synchronize();
}

TEST_F(FaultInjection, FailedPinnedAllocationThrows) {
  host::fail_nth_allocation(1);
  EXPECT_THROW(PinnedBuffer<int>(host_device, 10), OutOfMemory);
  PinnedBuffer<int> ok(host_device, 10);
  EXPECT_EQ(ok.size(), 10u);
}

TEST_F(FaultInjection, FailedOperationIsReportedOnceAndTheContextRecovers) {
  Context ctx(host_device);
  constexpr std::size_t n = 256;
  std::vector<int> src(n, 5), back(n, 0);
  DeviceBuffer<int> d(ctx, n);
  host::fail_nth_operation(2);
  memset(ctx, d, 0);  // 1st: runs
  const int line = __LINE__ + 1;
  copy(ctx, d, src);   // 2nd: fails
  copy(ctx, back, d);  // skipped
  try {
    ctx.synchronize();
    FAIL() << "injected operation failure was lost";
  } catch (const WorkFailed& e) {
    EXPECT_EQ(e.operation(), "copy");
    EXPECT_EQ(e.issued_at().line(), static_cast<unsigned>(line));
    EXPECT_EQ(e.skipped(), 1u);
  }
  EXPECT_EQ(back, std::vector<int>(n, 0)) << "a skipped copy ran";
  copy(ctx, d, src);
  copy(ctx, back, d);
  ctx.synchronize();
  EXPECT_EQ(back, src);
}

TEST_F(FaultInjection, EveryOperationPositionFailsCleanly) {
  // Fail each position of a small multi-context program in turn: every run reports exactly one
  // failure, never hangs, and frees everything.
  for (int nth = 1; nth <= 7; ++nth) {
    SCOPED_TRACE("failing operation " + std::to_string(nth));
    int reported = 0;
    {
      Context a(host_device), b(host_device);
      std::vector<int> src(64, nth), back(64);
      DeviceBuffer<int> d(a, 64);
      host::fail_nth_operation(static_cast<std::uint64_t>(nth));
      memset(a, d, 0);
      copy(a, d, src);
      a.host_task([] {});
      b.wait_for(a);
      copy(b, back, d);
      b.host_task([] {});
      a.wait_for(b);
      for (auto* c : {&b, &a}) {
        try {
          c->synchronize();
        } catch (const WorkFailed&) {
          ++reported;
        }
      }
      host::clear_faults();
    }
    // Five operations can fail (waits and frees cannot); past them nothing fires.
    EXPECT_EQ(reported, nth <= 5 ? 1 : 0);
  }
}

TEST_F(FaultInjection, AllocationFailureInsideABlockingContext) {
  Context ctx(ContextOptions{.device = host_device, .kind = StreamKind::blocking});
  host::fail_nth_allocation(1);
  EXPECT_THROW(DeviceBuffer<int>(ctx, 8), OutOfMemory);
  DeviceBuffer<int> ok(ctx, 8);
  memset(ctx, ok, 1);
}

}  // namespace
}  // namespace sluice::test
