// Kernels as StreamExecutor and CUDA programs use them: host implementations that receive their
// grid and block coordinates (one body for both backends), the 128-bit Philox seed (key and
// subsequence, from StreamExecutor's seed bytes), and random fills as fluent steps.

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend_param.hpp"
#include "canned_test_util.hpp"
#include "sluice/kernel.hpp"
#include "sluice/rng.hpp"
#include "sluice/sluice.hpp"

namespace sluice::test {
namespace {

// Every thread writes where it is: block, thread, grid and block dimensions, packed x + 16 y +
// 256 z, at the flat index a GPU gives it (block-major, x fastest).
constexpr const char* kCoordsSource = R"(
extern "C" __global__ void coords(unsigned* out) {
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned i = b * (blockDim.x * blockDim.y * blockDim.z) + t;
  out[4 * i + 0] = blockIdx.x + 16 * blockIdx.y + 256 * blockIdx.z;
  out[4 * i + 1] = threadIdx.x + 16 * threadIdx.y + 256 * threadIdx.z;
  out[4 * i + 2] = gridDim.x + 16 * gridDim.y + 256 * gridDim.z;
  out[4 * i + 3] = blockDim.x + 16 * blockDim.y + 256 * blockDim.z;
})";

unsigned pack(const Dims& d) {
  return d.x + 16 * d.y + 256 * d.z;
}

class KernelApiTest : public BackendTest {};

TEST_P(KernelApiTest, HostImplementationsReceiveGridAndBlockCoordinates) {
  auto ctx = make_context();
  KernelSpec spec("coords", 1);
  spec.add_cuda_source(kCoordsSource).add_host<unsigned*>([](const ThreadIndex& t, unsigned* out) {
    // The same body as the CUDA source, on ThreadIndex's fields.
    const std::size_t i = t.linear;
    out[4 * i + 0] = pack(t.block_idx);
    out[4 * i + 1] = pack(t.thread_idx);
    out[4 * i + 2] = pack(t.grid_dim);
    out[4 * i + 3] = pack(t.block_dim);
  });
  TypedKernel<unsigned*> kernel(ctx, spec);
  const Dims grid(3, 2, 2), block(4, 2, 3);
  const std::size_t n = grid.count() * block.count();
  DeviceBuffer<unsigned> out(ctx, 4 * n);
  memset(ctx, out, 0xff);
  kernel.launch(ctx, Grid(grid), Block(block), write(out));
  const auto got = to_host(ctx, out);
  std::size_t i = 0;
  for (unsigned bz = 0; bz < grid.z; ++bz) {
    for (unsigned by = 0; by < grid.y; ++by) {
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        for (unsigned tz = 0; tz < block.z; ++tz) {
          for (unsigned ty = 0; ty < block.y; ++ty) {
            for (unsigned tx = 0; tx < block.x; ++tx, ++i) {
              ASSERT_EQ(got[4 * i + 0], bx + 16 * by + 256 * bz) << i;
              ASSERT_EQ(got[4 * i + 1], tx + 16 * ty + 256 * tz) << i;
              ASSERT_EQ(got[4 * i + 2], pack(grid)) << i;
              ASSERT_EQ(got[4 * i + 3], pack(block)) << i;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(i, n);
}

TEST(KernelThreadIndex, FlatIndexMapsToCoordinatesAsOnAGpu) {
  const Dims grid(5, 3, 2), block(7, 1, 4);
  const auto t = detail::thread_index(7 * 4 * 13 + 7 * 2 + 3, grid, block);
  EXPECT_EQ(pack(t.block_idx), 13u % 5 + 16 * ((13u / 5) % 3) + 256 * (13u / 15));
  EXPECT_EQ(pack(t.thread_idx), 3u + 0 + 256 * 2);
  EXPECT_EQ(t.linear, 7u * 4 * 13 + 7 * 2 + 3);
}

// The documented uniform floats of block b of key `key`, subsequence `sub`, from the bijection.
std::vector<float> expected_floats(std::uint64_t key, std::uint64_t sub, std::size_t n) {
  std::vector<float> v;
  for (std::uint64_t b = 0; v.size() < n; ++b) {
    const auto w = rng::philox4x32_10(
        {std::uint32_t(b), std::uint32_t(b >> 32), std::uint32_t(sub), std::uint32_t(sub >> 32)},
        {std::uint32_t(key), std::uint32_t(key >> 32)});
    for (auto x : w) {
      if (v.size() < n) v.push_back(std::ldexp(float(2 * (x >> 9) + 1), -24));
    }
  }
  return v;
}

class PhiloxSeedTest : public BackendTest {};

TEST_P(PhiloxSeedTest, SubsequenceIsTheUpperHalfOfTheCounter) {
  auto ctx = make_context();
  const std::uint64_t key = 0x0123456789abcdefull, sub = 0xfedcba9876543210ull;
  rng::Philox gen(key, sub, 0);
  DeviceBuffer<float> x(ctx, 1001);
  rng::uniform(ctx, x, gen);
  EXPECT_EQ(to_host(ctx, x), expected_floats(key, sub, 1001));
  EXPECT_EQ(gen.counter(), 251u);
  EXPECT_EQ(gen.subsequence(), sub);
  // Subsequence 0 is the stream of the 64-bit seed.
  rng::Philox zero(key, 0, 0), plain(key);
  DeviceBuffer<double> a(ctx, 64), b(ctx, 64);
  rng::normal(ctx, a, zero);
  rng::normal(ctx, b, plain);
  EXPECT_EQ(to_host(ctx, a), to_host(ctx, b));
}

TEST_P(PhiloxSeedTest, NormalsOfASubsequenceAreTheSameBitsOnEveryBackend) {
  auto ctx = make_context();
  Context host(Device{"host", 0});
  rng::Philox g1(7, 3, 11), g2(7, 3, 11);
  DeviceBuffer<float> d(ctx, 4099), h(host, 4099);
  rng::normal(ctx, d, g1, 2.0f, 0.5f);
  rng::normal(host, h, g2, 2.0f, 0.5f);
  const auto dv = to_host(ctx, d), hv = to_host(host, h);
  for (std::size_t i = 0; i < dv.size(); ++i) {
    ASSERT_EQ(std::memcmp(&dv[i], &hv[i], sizeof(float)), 0) << i;
  }
}

TEST(PhiloxSeed, SeedBytesAreKeyThenSubsequenceLittleEndian) {
  const std::array<std::uint8_t, 16> seed{0x0, 0x1, 0x2, 0x3, 0x4, 0x5, 0x6, 0x7,
                                          0x8, 0x9, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf};
  const auto g = rng::Philox::from_seed_bytes(seed);
  EXPECT_EQ(g.key(), 0x0706050403020100ull);
  EXPECT_EQ(g.subsequence(), 0x0f0e0d0c0b0a0908ull);
  EXPECT_EQ(g.counter(), 0u);
  const std::array<std::uint8_t, 8> short_seed{};
  EXPECT_THROW((void)rng::Philox::from_seed_bytes(short_seed), Error);
}

TEST_P(PhiloxSeedTest, RandomFillsAsFluentSteps) {
  auto ctx = make_context();
  const std::array<std::uint8_t, 16> seed{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  DeviceBuffer<float> u(ctx, 1024), z(ctx, 1024), ref_u(ctx, 1024), ref_z(ctx, 1024);
  // StreamExecutor's example: ThenSetRngSeed, ThenPopulateRandUniform, BlockHostUntilDone.
  auto chain = ctx.then();
  chain.then_set_rng_seed(seed)
      .then_populate_rand_uniform(u)
      .then_populate_rand_gaussian(z, 1.0f, 2.0f)
      .block_host_until_done();
  auto gen = rng::Philox::from_seed_bytes(seed);
  rng::uniform(ctx, ref_u, gen);
  rng::normal(ctx, ref_z, gen, 1.0f, 2.0f);
  EXPECT_EQ(to_host(ctx, u), to_host(ctx, ref_u));
  EXPECT_EQ(to_host(ctx, z), to_host(ctx, ref_z));
  EXPECT_EQ(chain.rng_state()->counter(), gen.counter());
  // An explicit generator, and the missing seed as an Error that says what to call.
  rng::Philox mine(5);
  ctx.then().then_uniform(u, mine).then_normal(z, mine).block_host_until_done();
  EXPECT_EQ(mine.counter(), 512u);
  try {
    ctx.then().then_populate_rand_uniform(u);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("then_set_rng_seed"), std::string::npos) << e.what();
  }
}

SLUICE_INSTANTIATE_BACKENDS(KernelApiTest);
SLUICE_INSTANTIATE_BACKENDS(PhiloxSeedTest);

}  // namespace
}  // namespace sluice::test
