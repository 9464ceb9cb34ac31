// Failures of queued work: reported once, at the next wait, naming the operation and its line.

#include <atomic>
#include <stdexcept>

#include "backend_param.hpp"

namespace sluice::test {
namespace {

class ErrorTest : public BackendTest {};

TEST_P(ErrorTest, HostTaskFailureIsReportedAtTheNextWaitWithItsOrigin) {
  auto ctx = make_context();
  std::atomic<int> later_ran{0};
  // clang-format off
  const int line = __LINE__; ctx.host_task([] { throw std::runtime_error("boom"); }, "explode");
  // clang-format on
  ctx.host_task([&] { ++later_ran; });
  ctx.host_task([&] { ++later_ran; });
  try {
    ctx.synchronize();
    FAIL() << "the failure was lost";
  } catch (const WorkFailed& e) {
    EXPECT_EQ(e.code(), Errc::work_failed);
    EXPECT_EQ(e.operation(), "explode");
    EXPECT_EQ(e.cause(), "boom");
    EXPECT_EQ(e.issued_at().line(), static_cast<unsigned>(line));
    EXPECT_NE(std::string(e.issued_at().file_name()).find("error_test.cpp"), std::string::npos);
    EXPECT_EQ(e.skipped(), 2u);
    const std::string what = e.what();
    EXPECT_NE(what.find("explode"), std::string::npos) << what;
    EXPECT_NE(what.find("error_test.cpp:" + std::to_string(line)), std::string::npos) << what;
  }
  EXPECT_EQ(later_ran.load(), 0) << "work after a failure must not run";
  EXPECT_NO_THROW(ctx.synchronize()) << "a failure is reported exactly once";
  // The context works again.
  ctx.host_task([&] { ++later_ran; });
  ctx.synchronize();
  EXPECT_EQ(later_ran.load(), 1);
}

TEST_P(ErrorTest, NonStandardExceptionsAreCaptured) {
  auto ctx = make_context();
  ctx.host_task([] { throw 42; }, "throws int");
  EXPECT_THROW(ctx.synchronize(), WorkFailed);
}

TEST_P(ErrorTest, OnlyTheFirstFailureIsReported) {
  auto ctx = make_context();
  ctx.host_task([] { throw std::runtime_error("first"); }, "one");
  ctx.host_task([] { throw std::runtime_error("second"); }, "two");
  try {
    ctx.synchronize();
    FAIL();
  } catch (const WorkFailed& e) {
    EXPECT_EQ(e.operation(), "one");
    EXPECT_EQ(e.skipped(), 1u);
  }
  EXPECT_NO_THROW(ctx.synchronize());
}

TEST_P(ErrorTest, FailurePropagatesToDependentContextsAndIsReportedOnce) {
  auto a = make_context();
  auto b = make_context();
  a.host_task([] { throw std::runtime_error("upstream"); }, "produce");
  b.wait_for(a);
  std::atomic<bool> consumer_ran{false};
  b.host_task([&] { consumer_ran = true; }, "consume");
  try {
    b.synchronize();
    FAIL() << "b's work depended on failed work; the failure must surface at b's wait";
  } catch (const WorkFailed& e) {
    EXPECT_EQ(e.operation(), "produce");
    EXPECT_EQ(e.cause(), "upstream");
  }
  EXPECT_FALSE(consumer_ran.load());
  EXPECT_NO_THROW(a.synchronize()) << "already reported through b";
}

TEST_P(ErrorTest, IndependentContextsAreUnaffected) {
  auto a = make_context();
  auto b = make_context();
  a.host_task([] { throw std::runtime_error("only a"); });
  std::atomic<bool> ran{false};
  b.host_task([&] { ran = true; });
  EXPECT_NO_THROW(b.synchronize());
  EXPECT_TRUE(ran.load());
  EXPECT_THROW(a.synchronize(), WorkFailed);
}

TEST_P(ErrorTest, EventSynchronizeReportsFailureBeforeTheRecord) {
  auto ctx = make_context();
  ctx.host_task([] { throw std::runtime_error("before"); }, "early");
  Event e;
  e.record(ctx);
  EXPECT_THROW(e.synchronize(), WorkFailed);
  EXPECT_NO_THROW(e.synchronize());
  EXPECT_NO_THROW(ctx.synchronize());
}

TEST_P(ErrorTest, EventBeforeTheFailureIsClean) {
  auto ctx = make_context();
  Event e;
  ctx.host_task([] {});
  e.record(ctx);
  e.synchronize();
  ctx.host_task([] { throw std::runtime_error("after"); });
  EXPECT_NO_THROW(e.synchronize());
  EXPECT_THROW(ctx.synchronize(), WorkFailed);
}

TEST_P(ErrorTest, UnreportedFailureAtDestructionGoesToTheHandler) {
  std::string got;
  auto previous = set_unreported_failure_handler([&](const std::string& m) { got = m; });
  {
    auto ctx = make_context();
    ctx.host_task([] { throw std::runtime_error("never waited"); }, "orphan");
  }
  set_unreported_failure_handler(previous);
  EXPECT_NE(got.find("orphan"), std::string::npos) << got;
  EXPECT_NE(got.find("never waited"), std::string::npos) << got;
}

TEST_P(ErrorTest, BlockingContextThrowsAtTheCall) {
  auto ctx = make_context(StreamKind::blocking);
  EXPECT_THROW(ctx.host_task([] { throw std::runtime_error("now"); }), WorkFailed);
  EXPECT_NO_THROW(ctx.synchronize());
}

TEST_P(ErrorTest, MisuseIsAClearError) {
  auto ctx = make_context();
  EXPECT_THROW(ctx.host_task(nullptr), Error);
  try {
    Context bad(Device{device().backend, 999});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::no_device);
    EXPECT_NE(std::string(e.what()).find("999"), std::string::npos) << e.what();
  }
}

SLUICE_INSTANTIATE_BACKENDS(ErrorTest);

// Backend-independent misuse.
TEST(PlatformErrors, UnknownBackendNamesTheKnownOnes) {
  try {
    Context c(Device{"opencl", 0});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::no_device);
    EXPECT_NE(std::string(e.what()).find("host"), std::string::npos) << e.what();
  }
}

TEST(PlatformErrors, DeviceNamesParse) {
  EXPECT_EQ(Device::parse("cuda:1"), (Device{"cuda", 1}));
  EXPECT_EQ(Device::parse("host"), (Device{"host", 0}));
  EXPECT_THROW((void)Device::parse(":1"), Error);
  EXPECT_THROW((void)Device::parse("cuda:x"), Error);
  EXPECT_THROW((void)Device::parse("cuda:-1"), Error);
}

TEST(PlatformErrors, WrapNeedsANativeStream) {
  EXPECT_THROW((void)Context::wrap(Device{"host", 0}, nullptr), Error);
  int dummy = 0;
  try {
    (void)Context::wrap(Device{"host", 0}, &dummy);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported);
  }
}

TEST(Platform, DevicesAreListedWithProperties) {
  auto all = devices();
  ASSERT_FALSE(all.empty());
  bool host = false;
  for (const auto& d : all) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.compute_units, 0);
    EXPECT_GT(d.total_memory, 0u);
    host = host || d.device.backend == "host";
  }
  EXPECT_TRUE(host);
  for (const auto& b : backends()) {
    if (b.device_count == 0) {
      EXPECT_FALSE(b.unavailable_reason.empty()) << b.name;
    }
  }
  EXPECT_NO_THROW((void)default_device());
}

}  // namespace
}  // namespace sluice::test
