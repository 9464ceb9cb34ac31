// The index logic of the small la kernels (src/la/cuda/small_geometry.hpp, cg_small_layout.hpp),
// checked on the host: the tiles' points (with the shifts that replace divisions by a power-of-2
// width, against the divisions), the update units' elements, and the small CG kernel's windows
// (every element a block of a cluster reads or owns lies in its window, and a block's shared
// memory fits at the largest sizes the kernel advertises).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "la/cuda/cg_small_layout.hpp"
#include "la/cuda/small_geometry.hpp"
#include "la/kernel_math.hpp"

namespace sluice::test {
namespace {

using namespace detail::cuda::small_steps;  // NOLINT
using detail::LaStencil;
using detail::LaStencilKind;

/// The steps' geometry as la_kernels.cu's tiles_for and the update's chunks make it: 2D tiles
/// of 32 x 16, 3D 7-point flat tiles (256 points of a plane, 2 planes deep), 3D 27-point tiles of
/// `width3` x (512 / width3).
Geometry geometry_for(const LaStencil& s, unsigned width3 = 128) {
  Geometry g;
  g.nx = static_cast<int>(s.nx);
  g.ny = static_cast<int>(s.ny);
  g.nz = static_cast<int>(s.nz);
  g.n = g.nx * g.ny * g.nz;
  if (s.kind == LaStencilKind::d3p7) {
    g.width = kStepThreads;
    g.height = 1;
    g.depth = kRows;
    g.tx = static_cast<unsigned>((g.nx * g.ny + kStepThreads - 1) / kStepThreads);
    g.ty = 1;
  } else {
    const bool three = s.kind == LaStencilKind::d3p27;
    g.width = three ? width3 : 32;
    g.height = kStepThreads / g.width * kRows;
    g.tx = (static_cast<unsigned>(g.nx) + g.width - 1) / g.width;
    g.ty = (static_cast<unsigned>(g.ny) + g.height - 1) / g.height;
  }
  g.tiles = g.tx * g.ty * ((static_cast<unsigned>(g.nz) + g.depth - 1) / g.depth);
  g.chunks = static_cast<unsigned>((g.n + kStepThreads - 1) / kStepThreads);
  g.dir_units = g.tiles * kStepWarps;
  g.upd_units = g.chunks * kStepWarps;
  g.wshift = log2_if_pow2(g.width);
  return g;
}

LaStencil stencil(LaStencilKind kind, int nx, int ny, int nz) {
  LaStencil s;
  s.kind = kind;
  s.nx = nx;
  s.ny = ny;
  s.nz = nz;
  s.center = 4;
  s.neighbor = -1;
  return s;
}

/// The elements point q's row of the stencil reads (its neighbours, then itself).
std::vector<int> reads_of(const LaStencil& s, const Point& q) {
  std::vector<int> out;
  const auto in = [&](int j) {
    out.push_back(j);
    return 0.0;
  };
  const int sy = static_cast<int>(s.nx), sz = static_cast<int>(s.nx * s.ny);
  detail::la_math::with_stencil_kind(s.kind, [&](auto k) {
    (void)detail::la_math::stencil_neighbors<decltype(k)::value>(s, in, q.ix, q.iy, q.iz, q.i, sy,
                                                                 sz);
  });
  out.push_back(q.i);
  return out;
}

TEST(SmallGeometryTest, Log2OfPowersOfTwoOnly) {
  EXPECT_EQ(log2_if_pow2(1), 0);
  EXPECT_EQ(log2_if_pow2(32), 5);
  EXPECT_EQ(log2_if_pow2(256), 8);
  EXPECT_EQ(log2_if_pow2(1u << 31), 31);
  for (unsigned v : {0u, 3u, 48u, 96u, 255u, 257u}) EXPECT_EQ(log2_if_pow2(v), -1) << v;
}

TEST(SmallGeometryTest, TilesCoverEveryPointOnceAndShiftsEqualDivisions) {
  struct Case {
    LaStencilKind kind;
    int nx, ny, nz;
    unsigned width3;
  };
  const std::vector<Case> cases = {
      {LaStencilKind::d2p5, 64, 64, 1, 0},    {LaStencilKind::d2p5, 16, 16, 1, 0},
      {LaStencilKind::d2p9, 33, 17, 1, 0},    {LaStencilKind::d2p5, 181, 181, 1, 0},
      {LaStencilKind::d3p7, 16, 16, 16, 0},   {LaStencilKind::d3p7, 13, 11, 7, 0},
      {LaStencilKind::d3p27, 8, 8, 8, 32},    {LaStencilKind::d3p27, 20, 9, 5, 64},
      {LaStencilKind::d3p27, 24, 24, 24, 128}};
  for (const auto& c : cases) {
    const LaStencil s = stencil(c.kind, c.nx, c.ny, c.nz);
    Geometry g = geometry_for(s, c.width3);
    Geometry divided = g;
    divided.wshift = -1;
    SCOPED_TRACE(std::to_string(c.nx) + "x" + std::to_string(c.ny) + "x" + std::to_string(c.nz));
    std::vector<int> hits(static_cast<std::size_t>(g.n), 0);
    for (unsigned t = 0; t < g.tiles; ++t) {
      const Origin o = tile_origin(g, t);
      for (int T = 0; T < kStepThreads; ++T) {
        for (int r = 0; r < kRows; ++r) {
          const Point q = tile_point(g, o, T, r);
          const Point d = tile_point(divided, o, T, r);
          ASSERT_EQ(q.i, d.i);
          ASSERT_EQ(q.ix, d.ix);
          ASSERT_EQ(q.iy, d.iy);
          ASSERT_EQ(q.iz, d.iz);
          if (q.i < 0) continue;
          ASSERT_LT(q.i, g.n);
          ASSERT_EQ(q.i, q.ix + c.nx * (q.iy + c.ny * q.iz));
          ++hits[static_cast<std::size_t>(q.i)];
        }
      }
    }
    EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
  }
}

TEST(SmallGeometryTest, UpdateUnitsHoldEveryElementOnce) {
  for (int n : {1, 31, 256, 257, 4096, 4097, 32768}) {
    Geometry g;
    g.n = n;
    g.chunks = static_cast<unsigned>((n + kStepThreads - 1) / kStepThreads);
    g.upd_units = g.chunks * kStepWarps;
    std::vector<int> hits(static_cast<std::size_t>(n), 0);
    for (unsigned u = 0; u < g.upd_units; ++u) {
      for (int lane = 0; lane < 32; ++lane) {
        const int j = update_element(g, u, lane);
        ASSERT_GE(j, 0);
        if (j >= n) continue;
        ASSERT_EQ(update_unit(g, j), u) << j;
        ++hits[static_cast<std::size_t>(j)];
      }
    }
    EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; })) << n;
    for (unsigned parts : {1u, 2u, 4u, 16u, 512u}) {
      for (unsigned u = 0; u < g.upd_units; ++u) {
        const unsigned p = owner_of(g.upd_units, parts, u);
        ASSERT_LT(p, parts);
        ASSERT_LE(first_of(g.upd_units, parts, p), u);
        ASSERT_LT(u, first_of(g.upd_units, parts, p + 1));
      }
    }
  }
}

// Every element a block of the small CG kernel reads (its direction units' points and their
// stencils, its own update elements) lies in its window, for every cluster size; and the shared
// memory of the largest shapes the kernel takes fits an H100's 227 KB per block with the static
// arrays (about 12 KB).
TEST(SmallGeometryTest, ClusterWindowsHoldWhatEachBlockReads) {
  struct Case {
    LaStencilKind kind;
    int nx, ny, nz;
  };
  const std::vector<Case> cases = {
      {LaStencilKind::d2p5, 64, 64, 1},   {LaStencilKind::d2p9, 16, 16, 1},
      {LaStencilKind::d2p5, 181, 181, 1}, {LaStencilKind::d3p7, 16, 16, 16},
      {LaStencilKind::d3p7, 32, 32, 32},  {LaStencilKind::d3p27, 8, 8, 8},
      {LaStencilKind::d3p27, 13, 11, 7}};
  for (const auto& c : cases) {
    const LaStencil s = stencil(c.kind, c.nx, c.ny, c.nz);
    const Geometry g = geometry_for(s);
    if (g.n > 32768) continue;
    for (int blocks : {1, 2, 4, 8, 16}) {
      SCOPED_TRACE(std::to_string(c.nx) + "x" + std::to_string(c.ny) + "x" + std::to_string(c.nz) +
                   ", " + std::to_string(blocks) + " block(s)");
      const Layout l = layout_for(g, s, blocks);
      const auto ub = static_cast<unsigned>(blocks);
      for (int b = 0; b < blocks; ++b) {
        const int lo = l.lo[b], hi = l.hi[b];
        ASSERT_LE(hi - lo, l.win);
        for (unsigned u = first_of(g.dir_units, ub, b); u < first_of(g.dir_units, ub, b + 1); ++u) {
          const Origin o = tile_origin(g, u / kStepWarps);
          for (int lane = 0; lane < 32; ++lane) {
            const int T = static_cast<int>(u % kStepWarps) * 32 + lane;
            for (int r = 0; r < kRows; ++r) {
              const Point q = tile_point(g, o, T, r);
              if (q.i < 0) continue;
              for (int j : reads_of(s, q)) {
                ASSERT_TRUE(lo <= j && j < hi) << "point " << q.i << " reads " << j;
              }
            }
          }
        }
        const unsigned part = upd_part(blocks, static_cast<unsigned>(b));
        for (unsigned u = first_of(g.upd_units, ub, part); u < first_of(g.upd_units, ub, part + 1);
             ++u) {
          for (int lane = 0; lane < 32; ++lane) {
            const int j = update_element(g, u, lane);
            if (j < g.n) {
              ASSERT_TRUE(lo <= j && j < hi) << "own element " << j;
            }
          }
        }
      }
    }
  }
  const auto bytes = [](const LaStencil& s, int blocks) {
    const Geometry g = geometry_for(s);
    return sizeof(double) * cg_small_shared_doubles(layout_for(g, s, blocks), g);
  };
  constexpr std::size_t kRoom = (227 - 12) * 1024;
  EXPECT_LE(bytes(stencil(LaStencilKind::d2p5, 64, 64, 1), 1), kRoom);
  EXPECT_LE(bytes(stencil(LaStencilKind::d3p7, 32, 32, 32), 16), kRoom);
  EXPECT_LE(bytes(stencil(LaStencilKind::d2p5, 181, 181, 1), 16), kRoom);
}

}  // namespace
}  // namespace sluice::test
