// Contexts and memory as Warp and CUDA programs use them: typed fills, reading a buffer back into
// a std::vector, a device-wide synchronize, the scoped current context (Warp's ScopedStream and
// ScopedDevice, with sync_enter / sync_exit), and Context::wrap on the host backend.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backend_param.hpp"

namespace sluice::test {
namespace {

class ContextMemoryApi : public BackendTest {};

/// 12 and 3 bytes: patterns that no byte-wise memset can make.
struct Vec3 {
  float x, y, z;
  friend bool operator==(const Vec3&, const Vec3&) = default;
};
struct Rgb {
  std::uint8_t r, g, b;
  friend bool operator==(const Rgb&, const Rgb&) = default;
};

TEST_P(ContextMemoryApi, TypedFillOfEveryElementSize) {
  auto ctx = make_context();
  constexpr std::size_t n = 100003;
  DeviceBuffer<int> i32(ctx, n);
  DeviceBuffer<double> f64(ctx, n);
  DeviceBuffer<Vec3> v3(ctx, n);
  DeviceBuffer<Rgb> rgb(ctx, n);
  DeviceBuffer<std::uint16_t> u16(ctx, n);
  fill(ctx, i32, -3);
  fill(ctx, f64, 0.1);
  fill(ctx, v3, Vec3{1.5f, -2.0f, 3.25f});
  fill(ctx, rgb, Rgb{1, 2, 3});
  fill(ctx, u16, 0xBEEF);
  fill(ctx, f64.span().subspan(10, 5), 2);  // converted to the element type
  const auto a = to_vector(ctx, i32);
  const auto b = to_vector(ctx, f64);
  const auto c = to_vector(ctx, v3);
  const auto d = to_vector(ctx, rgb);
  const auto e = to_vector(ctx, u16);
  ASSERT_EQ(a.size(), n);
  for (std::size_t k = 0; k < n; ++k) {
    ASSERT_EQ(a[k], -3) << k;
    ASSERT_EQ(b[k], k >= 10 && k < 15 ? 2.0 : 0.1) << k;
    ASSERT_EQ(c[k], (Vec3{1.5f, -2.0f, 3.25f})) << k;
    ASSERT_EQ(d[k], (Rgb{1, 2, 3})) << k;
    ASSERT_EQ(e[k], 0xBEEF) << k;
  }
  // Pinned memory is written in stream order too.
  PinnedBuffer<Vec3> pinned(ctx, 17);
  fill(ctx, pinned, Vec3{4, 5, 6});
  ctx.synchronize();
  EXPECT_EQ(pinned[16], (Vec3{4, 5, 6}));
}

TEST_P(ContextMemoryApi, FillIsOrderedByTheTrackerAcrossContexts) {
  auto a = make_context(), b = make_context();
  constexpr std::size_t n = 1 << 20;
  DeviceBuffer<float> x(a, n);
  fill(a, x, 1.0f);
  fill(b, x.span().subspan(0, n / 2), 2.0f);  // after a's fill: write after write
  const auto back = to_vector(a, x);          // after both: read after write
  EXPECT_EQ(back[0], 2.0f);
  EXPECT_EQ(back[n / 2 - 1], 2.0f);
  EXPECT_EQ(back[n / 2], 1.0f);
  EXPECT_EQ(back[n - 1], 1.0f);
}

TEST_P(ContextMemoryApi, FillOfMemoryTheDeviceCannotWriteIsAnError) {
  auto ctx = make_context();
  std::vector<int> pageable(4, 0);
  if (is_host()) {
    fill(ctx, pageable, 9);
    ctx.synchronize();
    EXPECT_EQ(pageable[3], 9);
  } else {
    EXPECT_THROW(fill(ctx, pageable, 9), Error);
  }
}

TEST_P(ContextMemoryApi, DeviceSynchronizeWaitsForEveryContext) {
  auto a = make_context(), b = make_context();
  std::atomic<int> done{0};
  for (const auto* c : {&a, &b}) {
    c->host_task([&done] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      done.fetch_add(1);
    });
  }
  synchronize(device());
  EXPECT_EQ(done.load(), 2);
  EXPECT_TRUE(a.idle());
  EXPECT_TRUE(b.idle());
  // A failure on one context is thrown once, after all of them were waited for.
  a.host_task([] { throw std::runtime_error("boom"); }, "failing task");
  b.host_task([&done] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    done.fetch_add(1);
  });
  EXPECT_THROW(synchronize(device()), WorkFailed);
  EXPECT_EQ(done.load(), 3);
  synchronize(device());  // reported once
  EXPECT_THROW(synchronize(Device{device().backend, 99}), Error);
}

TEST_P(ContextMemoryApi, ScopedContextIsCurrentAndNests) {
  const Context outer_default = current_context();
  EXPECT_EQ(current_context(), outer_default);  // one default context per device
  auto a = make_context(), b = make_context();
  {
    ScopedDevice dev(device());
    EXPECT_EQ(current_device(), device());
    ScopedContext sa(a);
    EXPECT_EQ(current_context(), a);
    {
      ScopedContext sb(b, {.sync_enter = false});
      EXPECT_EQ(current_context(), b);
    }
    EXPECT_EQ(current_context(), a);
    // Code that takes no context issues on the current one.
    DeviceBuffer<int> x(a, 8);
    fill(x, 5);
    const auto v = to_vector(x);
    EXPECT_EQ(v[7], 5);
    // Scopes belong to their thread: another thread sees the default context.
    std::optional<Context> other;
    std::thread([&] { other = current_context(); }).join();
    EXPECT_EQ(*other, outer_default);
  }
  EXPECT_EQ(current_context(), outer_default);
}

TEST_P(ContextMemoryApi, ScopedContextSyncEnterAndExitOrderWork) {
  auto before = make_context(), scoped = make_context(), free_running = make_context();
  std::atomic<int> gated{0}, seen{-1}, free_seen{-1}, exit_seen{-1};
  Gate gate(device());
  ScopedContext first(before);
  gate.block(before);  // before's later work waits for the gate
  before.host_task([&] { gated.store(1); });
  {
    // sync_enter (the default): the scope's context waits for before's work so far.
    ScopedContext second(scoped, {.sync_enter = true, .sync_exit = true});
    current_context().host_task([&] { seen.store(gated.load()); });
  }
  {
    ScopedContext third(free_running, {.sync_enter = false});
    current_context().host_task([&] { free_seen.store(gated.load()); });
  }
  free_running.synchronize();  // not ordered after the gate: completes while it is closed
  EXPECT_EQ(free_seen.load(), 0);
  EXPECT_FALSE(scoped.idle());
  // sync_exit: before's later work waits for the scope's.
  before.host_task([&] { exit_seen.store(seen.load()); });
  gate.open();
  before.synchronize();
  EXPECT_EQ(seen.load(), 1);
  EXPECT_EQ(exit_seen.load(), 1);
}

TEST_P(ContextMemoryApi, WrapOnTheHostBackendSaysWhyNot) {
  if (!is_host()) GTEST_SKIP() << "Context::wrap of a cudaStream_t is tested in context_test";
  try {
    (void)Context::wrap(device(), reinterpret_cast<void*>(0x1));
    FAIL() << "expected Error(unsupported)";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("host_task"), std::string::npos) << e.what();
  }
}

SLUICE_INSTANTIATE_BACKENDS(ContextMemoryApi);

}  // namespace
}  // namespace sluice::test
