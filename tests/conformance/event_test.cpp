// Events: record, query, synchronize, cross-context waits, timing.

#include <atomic>
#include <chrono>
#include <thread>

#include "backend_param.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

class EventTest : public BackendTest {};

TEST_P(EventTest, UnrecordedEventIsComplete) {
  Event e;
  EXPECT_FALSE(e.recorded());
  EXPECT_TRUE(e.query());
  EXPECT_NO_THROW(e.synchronize());
  auto ctx = make_context();
  EXPECT_NO_THROW(ctx.wait(e));
}

TEST_P(EventTest, QueryAndSynchronizeFollowTheRecordedPoint) {
  auto ctx = make_context();
  std::atomic<bool> release{false};
  ctx.host_task([&] {
    while (!release) std::this_thread::yield();
  });
  Event e;
  e.record(ctx);
  EXPECT_TRUE(e.recorded());
  EXPECT_FALSE(e.query());
  release = true;
  e.synchronize();
  EXPECT_TRUE(e.query());
  ctx.synchronize();
}

TEST_P(EventTest, SynchronizeWaitsOnlyForWorkBeforeTheRecord) {
  auto ctx = make_context();
  std::atomic<bool> first{false};
  ctx.host_task([&] { first = true; });
  Event e;
  e.record(ctx);
  std::atomic<bool> release{false};
  ctx.host_task([&] {
    while (!release) std::this_thread::yield();
  });
  e.synchronize();  // must not wait for the gate after the record
  EXPECT_TRUE(first.load());
  EXPECT_FALSE(ctx.idle());
  release = true;
  ctx.synchronize();
}

TEST_P(EventTest, WaitOrdersAnotherContext) {
  auto a = make_context();
  auto b = make_context();
  std::atomic<int> value{0};
  a.host_task([&] {
    std::this_thread::sleep_for(20ms);
    value = 42;
  });
  Event e;
  e.record(a);
  Gate gate(device());
  gate.block(a);  // after the event: b must not wait for this
  b.wait(e);
  int seen = 0;
  b.host_task([&] { seen = value.load(); });
  b.synchronize();  // would hang (30 s, then fail) if b waited for the gate
  EXPECT_EQ(seen, 42);
  EXPECT_FALSE(a.idle()) << "waiting on an event waited for work recorded after it";
  gate.open();
  a.synchronize();
}

TEST_P(EventTest, RerecordingMovesThePoint) {
  auto ctx = make_context();
  Event e;
  e.record(ctx);
  e.synchronize();
  std::atomic<bool> release{false};
  ctx.host_task([&] {
    while (!release) std::this_thread::yield();
  });
  e.record(ctx);
  EXPECT_FALSE(e.query());
  release = true;
  e.synchronize();
  EXPECT_TRUE(e.query());
}

TEST_P(EventTest, ElapsedTimeCoversTheWork) {
  auto ctx = make_context();
  Event start({.timing = true}), stop({.timing = true});
  start.record(ctx);
  ctx.host_task([] { std::this_thread::sleep_for(25ms); });
  stop.record(ctx);
  double ms = Event::elapsed_ms(start, stop);
  EXPECT_GE(ms, 20.0);
  EXPECT_LT(ms, 5000.0);
}

TEST_P(EventTest, ElapsedTimeNeedsTimingEvents) {
  auto ctx = make_context();
  Event a, b;
  a.record(ctx);
  b.record(ctx);
  try {
    (void)Event::elapsed_ms(a, b);
    FAIL() << "expected sluice::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("timing"), std::string::npos) << e.what();
  }
  Event c({.timing = true});
  EXPECT_THROW((void)Event::elapsed_ms(c, c), Error);  // unrecorded
}

TEST_P(EventTest, CrossBackendWaitWithHost) {
  // A context of this backend waits for an event of the host backend, and the reverse.
  auto mine = make_context();
  Context host_ctx(Device{"host", 0});
  std::atomic<int> value{0};
  host_ctx.host_task([&] {
    std::this_thread::sleep_for(10ms);
    value = 7;
  });
  Event e;
  e.record(host_ctx);
  mine.wait(e);
  int seen = 0;
  mine.host_task([&] { seen = value.load(); });
  Event back;
  back.record(mine);
  host_ctx.wait(back);
  int seen_back = 0;
  host_ctx.host_task([&] { seen_back = seen; });
  host_ctx.synchronize();
  EXPECT_EQ(seen, 7);
  EXPECT_EQ(seen_back, 7);
}

SLUICE_INSTANTIATE_BACKENDS(EventTest);

}  // namespace
}  // namespace sluice::test
