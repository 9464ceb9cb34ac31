// The order of the cuda stencil kernels' tiles (src/la/cuda/tile_walk.hpp), checked on the
// host: every tile taken exactly once, the plain order where the planes are small, and on large
// planes a tile's z neighbours within one group's width of it.

#include <gtest/gtest.h>

#include <vector>

#include "la/cuda/tile_walk.hpp"

namespace sluice::test {
namespace {

using detail::cuda::kTileGroupPoints;
using detail::cuda::tile_group;
using detail::cuda::tile_walk;
using detail::cuda::TileWalk;

/// Checks that `w` takes each of layer x layers tiles once, and returns t of every (q, l).
std::vector<unsigned> positions(const TileWalk& w, unsigned layer, unsigned layers) {
  const unsigned count = layer * layers;
  std::vector<unsigned> at(count, count);
  for (unsigned t = 0; t < count; ++t) {
    unsigned q = 0, l = 0;
    w.place(t, q, l);
    EXPECT_LT(q, layer) << "tile " << t;
    EXPECT_LT(l, layers) << "tile " << t;
    if (q >= layer || l >= layers) continue;
    EXPECT_EQ(at[q + layer * l], count) << "tile " << t << " repeats (" << q << ", " << l << ")";
    at[q + layer * l] = t;
  }
  return at;
}

TEST(TileWalk, TakesEveryTileOnceInGroups) {
  struct Case {
    unsigned layer, layers, group;
  };
  const Case cases[] = {{1, 1, 0},    {7, 5, 0},     {7, 5, 7},      {7, 5, 3},
                        {8, 5, 4},    {270, 3, 256}, {1024, 9, 256}, {1000, 4, 1},
                        {33, 17, 32}, {5, 1, 2},     {145, 6, 130},  {300, 2, 299}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::to_string(c.layer) + " x " + std::to_string(c.layers) + ", group " +
                 std::to_string(c.group));
    const TileWalk w = tile_walk(c.layer, c.layers, c.group);
    const auto at = positions(w, c.layer, c.layers);
    const bool plain = c.group == 0 || c.group >= c.layer || c.layers == 1;
    EXPECT_EQ(w.grouped(), !plain);
    for (unsigned l = 0; l < c.layers; ++l) {
      for (unsigned q = 0; q < c.layer; ++q) {
        const unsigned t = at[q + c.layer * l];
        if (plain) {
          EXPECT_EQ(t, q + c.layer * l);
          continue;
        }
        // Within a group: the layers in turn, each its tiles in order; the groups in turn.
        const unsigned g = q / c.group, first = g * c.group;
        const unsigned width = std::min(c.group, c.layer - first);
        EXPECT_EQ(t, first * c.layers + (q - first) + width * l) << q << ", " << l;
        if (l > 0) {
          EXPECT_LE(t - at[q + c.layer * (l - 1)], c.group);
        }
      }
    }
  }
}

TEST(TileWalk, GroupsOnlyPlanesLargerThanTheDefault) {
  // CG's 3D direction product: flat tiles of 256 points, two planes deep.
  const auto flat = [](std::int64_t n) {
    const auto layer = static_cast<unsigned>((n * n + 255) / 256);
    return tile_walk(layer, static_cast<unsigned>((n + 1) / 2),
                     tile_group(kTileGroupPoints, n, 256, 1));
  };
  EXPECT_FALSE(flat(128).grouped());
  EXPECT_FALSE(flat(256).grouped());  // 256^3: the order measured at the DRAM floor
  const TileWalk big = flat(512);
  EXPECT_TRUE(big.grouped());
  EXPECT_EQ(big.group, 256u);  // 128 x lines of 512
  // 2D tiles of 128 x 4 points (the other 3D products): groups of whole rows of tiles.
  EXPECT_EQ(tile_group(kTileGroupPoints, 512, 512, 4), 128u);
  EXPECT_EQ(tile_group(kTileGroupPoints, 300, 512, 5), 130u);
  // At least 16 x lines per group; none asked for: one group.
  EXPECT_EQ(tile_group(kTileGroupPoints, 8192, 256, 1), 512u);
  EXPECT_EQ(tile_group(0, 512, 256, 1), 0u);
  EXPECT_FALSE(tile_walk(1024, 256, 0).grouped());
}

}  // namespace
}  // namespace sluice::test
