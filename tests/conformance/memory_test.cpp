// Device and pinned buffers, copies in every direction, memset, pools.

#include <numeric>

#include "backend_param.hpp"

namespace sluice::test {
namespace {

class MemoryTest : public BackendTest {};

TEST_P(MemoryTest, RoundTripThroughPinnedAndPageable) {
  auto ctx = make_context();
  constexpr std::size_t n = 100003;  // odd size: no accidental alignment
  std::vector<double> pageable(n);
  std::iota(pageable.begin(), pageable.end(), 0.5);
  PinnedBuffer<double> pinned(ctx, n);
  DeviceBuffer<double> a(ctx, n), b(ctx, n);
  copy(ctx, a, pageable);  // pageable H2D
  copy(ctx, b, a);         // D2D
  copy(ctx, pinned, b);    // D2H into pinned
  std::vector<double> back(n, -1.0);
  copy(ctx, a, pinned);  // pinned H2D
  copy(ctx, back, a);    // pageable D2H
  ctx.synchronize();
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(pinned[i], pageable[i]) << i;
    ASSERT_EQ(back[i], pageable[i]) << i;
  }
}

TEST_P(MemoryTest, SubrangeCopiesAndMemset) {
  auto ctx = make_context();
  constexpr std::size_t n = 1000;
  DeviceBuffer<std::uint8_t> d(ctx, n);
  memset(ctx, d, 0x11);
  memset(ctx, d.span().subspan(100, 50), 0x22);
  std::vector<std::uint8_t> patch(10, 0x33);
  copy(ctx, d.span().subspan(990, 10), patch);
  std::vector<std::uint8_t> back(n);
  copy(ctx, back, d);
  ctx.synchronize();
  for (std::size_t i = 0; i < n; ++i) {
    std::uint8_t want = i >= 990 ? 0x33 : (i >= 100 && i < 150 ? 0x22 : 0x11);
    ASSERT_EQ(back[i], want) << i;
  }
}

TEST_P(MemoryTest, CopySizeMismatchIsAClearError) {
  auto ctx = make_context();
  DeviceBuffer<int> d(ctx, 10);
  std::vector<int> h(11);
  try {
    copy(ctx, d, h);
    FAIL() << "expected sluice::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("10 elements"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("11"), std::string::npos) << e.what();
  }
}

TEST_P(MemoryTest, EmptyBuffersAndCopiesAreFine) {
  auto ctx = make_context();
  DeviceBuffer<int> d(ctx, 0);
  EXPECT_TRUE(d.empty());
  std::vector<int> h;
  copy(ctx, d, h);
  memset(ctx, d, 0);
  ctx.synchronize();
}

TEST_P(MemoryTest, OutOfMemoryIsAClearError) {
  auto ctx = make_context();
  constexpr std::size_t huge = std::size_t{1} << 60;
  try {
    DeviceBuffer<std::byte> d(ctx, huge);
    FAIL() << "allocated 2^60 bytes?";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.code(), Errc::out_of_memory);
    EXPECT_EQ(e.requested(), huge);
  }
  // The context is still usable.
  DeviceBuffer<int> ok(ctx, 16);
  memset(ctx, ok, 0);
  ctx.synchronize();
}

TEST_P(MemoryTest, ElementCountOverflowIsAClearError) {
  auto ctx = make_context();
  const std::size_t too_many = std::size_t(-1) / sizeof(double) + 3;  // bytes would wrap
  EXPECT_THROW(DeviceBuffer<double>(ctx, too_many), OutOfMemory);
  EXPECT_THROW(PinnedBuffer<double>(device(), too_many), OutOfMemory);
}

TEST_P(MemoryTest, StreamOrderedPoolReusesFreedBlocks) {
  auto ctx = make_context();
  constexpr std::size_t bytes = 8 << 20;
  { DeviceBuffer<std::byte> warm(ctx, bytes); }
  ctx.synchronize();
  const auto reserved = pool_reserved(ctx.device());
  EXPECT_GE(reserved, bytes);
  for (int i = 0; i < 50; ++i) {
    DeviceBuffer<std::byte> d(ctx, bytes);
    memset(ctx, d, i);
  }
  ctx.synchronize();
  EXPECT_EQ(pool_reserved(ctx.device()), reserved) << "the pool grew instead of reusing blocks";
  trim_pool(ctx.device(), 0);
  EXPECT_LT(pool_reserved(ctx.device()), reserved);
}

TEST_P(MemoryTest, FreedMemoryIsNotReusedWhileWorkUsesIt) {
  // A buffer freed while a later copy on the same context reads it must keep its contents until
  // that copy ran, even if a new allocation is made and overwritten meanwhile.
  auto ctx = make_context();
  constexpr std::size_t n = 1 << 16;
  std::vector<int> src(n, 17), back(n, 0);
  std::atomic<bool> release{false};
  auto gate = [&] {
    while (!release) std::this_thread::yield();
  };
  {
    DeviceBuffer<int> d(ctx, n);
    copy(ctx, d, src);
    ctx.host_task(gate);
    copy(ctx, back, d);
  }  // freed here, in stream order
  DeviceBuffer<int> other(ctx, n);
  memset(ctx, other, 0);
  release = true;
  ctx.synchronize();
  EXPECT_EQ(back, src);
}

TEST_P(MemoryTest, PinnedBufferIsHostAccessible) {
  PinnedBuffer<int> p(device(), 8);
  for (int i = 0; i < 8; ++i) p[static_cast<std::size_t>(i)] = i * i;
  EXPECT_EQ(p[7], 49);
  EXPECT_EQ(p.size(), 8u);
}

TEST_P(MemoryTest, PoolOptionsApply) {
  set_pool_options(device(), {.release_threshold = 0});
  set_pool_options(device(), {.release_threshold = std::size_t(-1)});
  EXPECT_THROW(set_pool_options(Device{device().backend, 4242}, {}), Error);
}

SLUICE_INSTANTIATE_BACKENDS(MemoryTest);

}  // namespace
}  // namespace sluice::test
