// The z walk of the cuda backend's CG direction product (src/la/cuda/zwalk.hpp), checked on the
// host: which products take it, and that its items cover every point of the grid once, in
// chunks no shallower than the minimum, as many as fill the grid of resident blocks.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "la/cuda/zwalk.hpp"

namespace sluice::test {
namespace {

using detail::LaStencil;
using detail::LaStencilKind;
using detail::cuda::kZwalkHeight;
using detail::cuda::kZwalkMinDepth;
using detail::cuda::kZwalkWidth;
using detail::cuda::zwalk;
using detail::cuda::zwalk_mode;
using detail::cuda::zwalk_picks;
using detail::cuda::ZwalkMode;

LaStencil grid(LaStencilKind kind, std::int64_t nx, std::int64_t ny, std::int64_t nz) {
  LaStencil s;
  s.kind = kind;
  s.nx = nx;
  s.ny = ny;
  s.nz = nz;
  return s;
}

TEST(ZWalk, ModeNames) {
  EXPECT_EQ(zwalk_mode(nullptr), ZwalkMode::automatic);
  EXPECT_EQ(zwalk_mode(""), ZwalkMode::automatic);
  EXPECT_EQ(zwalk_mode("auto"), ZwalkMode::automatic);
  EXPECT_EQ(zwalk_mode("off"), ZwalkMode::off);
  EXPECT_EQ(zwalk_mode("0"), ZwalkMode::off);
  EXPECT_EQ(zwalk_mode("on"), ZwalkMode::on);
  EXPECT_EQ(zwalk_mode("1"), ZwalkMode::on);
  EXPECT_FALSE(zwalk_mode("yes"));
  EXPECT_FALSE(zwalk_mode("ON"));
}

TEST(ZWalk, PicksLargePlanesOf3DStencils) {
  using K = LaStencilKind;
  const auto a = ZwalkMode::automatic;
  // auto: planes of 384^2 and up on grids the cooperative CG block does not take.
  EXPECT_FALSE(zwalk_picks(a, grid(K::d3p7, 256, 256, 256)));
  EXPECT_TRUE(zwalk_picks(a, grid(K::d3p7, 384, 384, 384)));
  EXPECT_TRUE(zwalk_picks(a, grid(K::d3p7, 512, 512, 512)));
  EXPECT_TRUE(zwalk_picks(a, grid(K::d3p27, 512, 512, 512)));
  EXPECT_FALSE(zwalk_picks(a, grid(K::d3p7, 512, 512, 38)));  // 1.0e7 points: the CG block's
  EXPECT_FALSE(zwalk_picks(a, grid(K::d2p5, 4096, 4096, 1)));
  EXPECT_FALSE(zwalk_picks(a, grid(K::d2p9, 4096, 4096, 1)));
  // on: every 3D grid, however small; off: none.
  EXPECT_TRUE(zwalk_picks(ZwalkMode::on, grid(K::d3p7, 3, 5, 7)));
  EXPECT_TRUE(zwalk_picks(ZwalkMode::on, grid(K::d3p27, 1, 1, 1)));
  EXPECT_FALSE(zwalk_picks(ZwalkMode::on, grid(K::d2p5, 30, 50, 1)));
  EXPECT_FALSE(zwalk_picks(ZwalkMode::off, grid(K::d3p7, 512, 512, 512)));
  // Not for empty grids or planes past 32-bit offsets.
  EXPECT_FALSE(zwalk_picks(ZwalkMode::on, grid(K::d3p7, 8, 8, 0)));
  EXPECT_FALSE(zwalk_picks(ZwalkMode::on, grid(K::d3p7, 65536, 32768, 2)));
}

TEST(ZWalk, ItemsCoverEveryPointOnce) {
  struct Case {
    std::int64_t nx, ny, nz;
    unsigned blocks;
  };
  const Case cases[] = {{3, 5, 7, 528},     {1, 1, 1, 528},      {37, 21, 29, 528},
                        {70, 9, 40, 528},   {200, 150, 23, 528}, {1100, 300, 3, 528},
                        {32, 16, 64, 1},    {33, 17, 8, 4},      {64, 32, 100, 7},
                        {40, 40, 41, 2048}, {31, 15, 9, 512},    {96, 48, 17, 9}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::to_string(c.nx) + " x " + std::to_string(c.ny) + " x " +
                 std::to_string(c.nz) + ", " + std::to_string(c.blocks) + " blocks");
    const auto w = zwalk(c.nx, c.ny, c.nz, c.blocks);
    EXPECT_EQ(w.layer, w.tx * w.ty);
    EXPECT_EQ(w.count, w.layer * w.chunks);
    EXPECT_EQ(w.tx, (c.nx + kZwalkWidth - 1) / kZwalkWidth);
    EXPECT_EQ(w.ty, (c.ny + kZwalkHeight - 1) / kZwalkHeight);
    // Chunks: at least the minimum depth (unless the grid is shallower), at most 8 items per
    // block, the depth balanced.
    if (w.chunks > 1) {
      EXPECT_GE(w.depth, kZwalkMinDepth);
      EXPECT_LE((w.count + c.blocks - 1) / c.blocks, 8u);
    }
    EXPECT_EQ(w.chunks, (c.nz + w.depth - 1) / w.depth);
    EXPECT_LT((w.chunks - 1) * w.depth, c.nz);
    std::vector<int> seen(static_cast<std::size_t>(c.nx * c.ny * c.nz), 0);
    for (unsigned t = 0; t < w.count; ++t) {
      const auto it = w.item(t);
      EXPECT_EQ(it.x0 % kZwalkWidth, 0u);
      EXPECT_EQ(it.y0 % kZwalkHeight, 0u);
      EXPECT_LT(it.x0, c.nx);
      EXPECT_LT(it.y0, c.ny);
      EXPECT_LT(it.z0, it.z1);
      EXPECT_LE(it.z1 - it.z0, w.depth);
      EXPECT_LE(it.z1, c.nz);
      for (std::int64_t z = it.z0; z < it.z1; ++z) {
        for (std::int64_t y = it.y0; y < std::min<std::int64_t>(c.ny, it.y0 + kZwalkHeight); ++y) {
          for (std::int64_t x = it.x0; x < std::min<std::int64_t>(c.nx, it.x0 + kZwalkWidth); ++x) {
            ++seen[static_cast<std::size_t>(x + c.nx * (y + c.ny * z))];
          }
        }
      }
    }
    for (std::size_t i = 0; i < seen.size(); ++i) {
      if (seen[i] != 1) {
        ADD_FAILURE() << "point " << i << " taken " << seen[i] << " times";
        break;
      }
    }
  }
}

TEST(ZWalk, ChunksFillTheGrid) {
  // 256^3 with an H100's 528 resident blocks: 128 tiles of 32 x 16, 4 chunks of 64 planes.
  auto w = zwalk(256, 256, 256, 528);
  EXPECT_EQ(w.layer, 128u);
  EXPECT_EQ(w.chunks, 4u);
  EXPECT_EQ(w.depth, 64u);
  // 512^3: 512 tiles fill the grid on their own.
  w = zwalk(512, 512, 512, 528);
  EXPECT_EQ(w.layer, 512u);
  EXPECT_EQ(w.chunks, 1u);
  EXPECT_EQ(w.depth, 512u);
  // 384^3: 288 tiles; 11 chunks of 35 planes, 6 items per block (one chunk: 240 blocks idle).
  w = zwalk(384, 384, 384, 528);
  EXPECT_EQ(w.chunks, 11u);
  EXPECT_EQ(w.depth, 35u);
  EXPECT_EQ(w.count, 6u * 528u);
  // A grid of fewer blocks (spare multiprocessors): the chunks follow it.
  EXPECT_EQ(zwalk(256, 256, 256, 264).chunks, 2u);
  // Shallow grids: no chunk under the minimum depth; 37 planes in 4 chunks of 10 (the last 7).
  w = zwalk(37, 21, 37, 528);
  EXPECT_EQ(w.chunks, 4u);
  EXPECT_EQ(w.depth, 10u);
  EXPECT_EQ(w.item(w.count - 1).z1 - w.item(w.count - 1).z0, 7u);
  EXPECT_EQ(zwalk(3, 5, 7, 528).chunks, 1u);
}

}  // namespace
}  // namespace sluice::test
