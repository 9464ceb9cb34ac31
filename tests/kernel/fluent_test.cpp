// The fluent stream API and timers on every backend: a chain of every step, failures named with
// the failing step's line, timer misuse.

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "backend_param.hpp"
#include "kernel_test_util.hpp"
#include "sluice/kernel.hpp"

namespace sluice::test {
namespace {

class FluentTest : public BackendTest {};

TEST_P(FluentTest, ChainOfEveryStep) {
  auto ctx = make_context();
  auto other = make_context();
  AxpyKernel axpy(ctx, axpy_spec());
  constexpr unsigned n = 2048;
  DeviceBuffer<float> x(ctx, n), y(ctx, n);
  std::vector<float> hx(n, 2.0f), out(n, -1.0f);
  Timer timer;
  Event done;
  std::atomic<int> ran{0};
  other.then().then_memset(y, 0).block_host_until_done();
  ctx.then_launch(axpy, 1, 1, 0u, 0.0f, read(x), read_write(y))  // n = 0: touches nothing
      .then_wait_for(other)
      .then_start_timer(timer)
      .then_copy(x, hx)
      .then_launch(axpy, n / 256, 256, n, 1.5f, read(x), read_write(y))
      .then_copy(out, y)
      .then_stop_timer(timer)
      .then_record(done)
      .then_host_task([&] { ran.fetch_add(1); }, "count")
      .block_host_until_done();
  EXPECT_EQ(ran.load(), 1);
  EXPECT_TRUE(done.query());
  for (float v : out) ASSERT_EQ(v, 3.0f);
  EXPECT_GE(timer.elapsed_ms(), 0.0);
}

TEST_P(FluentTest, FailureNamesTheFailingStepAndItsLine) {
  auto ctx = make_context();
  DeviceBuffer<float> x(ctx, 16);
  auto fail = [] { throw std::runtime_error("step failed"); };
  unsigned line = 0;
  try {
    Fluent chain = ctx.then().then_memset(x, 0);
    line = __LINE__ + 1;
    chain.then_host_task(fail, "failing step").then_memset(x, 1).block_host_until_done();
    FAIL() << "expected WorkFailed";
  } catch (const WorkFailed& e) {
    EXPECT_EQ(e.operation(), "failing step");
    EXPECT_EQ(e.issued_at().line(), line);
    EXPECT_NE(e.cause().find("step failed"), std::string::npos);
  }
}

TEST_P(FluentTest, FailingHostKernelNamesTheKernelAndTheLaunchLine) {
  if (!is_host()) GTEST_SKIP() << "a throwing implementation exists on the host backend only";
  auto ctx = make_context();
  KernelSpec spec("throws", 1);
  spec.add_host<int>([](std::size_t i, int at) {
    if (static_cast<int>(i) == at) throw std::runtime_error("index 5 is bad");
  });
  TypedKernel<int> kernel(ctx, spec);
  const unsigned line = __LINE__ + 1;
  ctx.then_launch(kernel, 4, 4, 5);
  try {
    ctx.synchronize();
    FAIL() << "expected WorkFailed";
  } catch (const WorkFailed& e) {
    EXPECT_EQ(e.operation(), "kernel throws");
    EXPECT_EQ(e.issued_at().line(), line);
    EXPECT_NE(e.cause().find("index 5 is bad"), std::string::npos);
  }
}

TEST_P(FluentTest, TimerMisuseIsAnError) {
  auto ctx = make_context();
  Timer t;
  EXPECT_THROW((void)t.elapsed_ms(), Error);
  EXPECT_THROW(ctx.then().then_stop_timer(t), Error);
  ctx.then().then_start_timer(t);
  try {
    (void)t.elapsed_ms();
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_state);
    EXPECT_NE(std::string(e.what()).find("started but not stopped"), std::string::npos);
  }
  ctx.then().then_stop_timer(t).block_host_until_done();
  EXPECT_GE(t.elapsed_ms(), 0.0);
}

SLUICE_INSTANTIATE_BACKENDS(FluentTest);

}  // namespace
}  // namespace sluice::test
