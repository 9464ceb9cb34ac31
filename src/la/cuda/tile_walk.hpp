// The order in which the cuda stencil kernels' blocks take their tiles (src/la/cuda/kernels.cuh's
// Tiles), host and device (tests/la/tile_walk_test.cpp checks it on the host).
#pragma once

#include <algorithm>
#include <cstdint>

#include "la/cuda/fast_div.hpp"

namespace sluice::detail::cuda {

/// Points of a plane per group of tiles by default (see TileWalk): 256^2, the largest plane
/// measured with each input read from DRAM about once in the plain order (H200, ncu: CG's 3D
/// direction product 30.8 B per point at 256^3, 44 to 46 at 512^3, 32 the ideal).
constexpr std::int64_t kTileGroupPoints = 65536;
/// A group takes at least this many x lines of each plane: the lines at its edges have their y
/// neighbours in the groups beside it, read from DRAM once more.
constexpr std::int64_t kTileGroupMinLines = 16;

/// A stencil product's tiles form layers (one layer: the tiles of one plane, or of two planes
/// for tiles two planes deep), tile q of layer l. A block takes tiles t, t + grid, ..., so the
/// blocks at work at one time take a run of consecutive t. In the plain order (t = q + layer *
/// l) that run is a part of one layer, and the next layer's first tiles, which read the same
/// planes, come a whole layer of tiles later: with planes of 512^2 points the product moves
/// about 20 MB in between and the planes are gone from L2. So the layer is cut into groups of
/// `group` consecutive tiles, and t runs over a group's tiles of every layer before the next
/// group: t = q - first + width * l + span * g, where g is q's group, `first` its first tile,
/// `width` its tiles (`group`, or fewer in the last group) and `span` the tiles of a full group
/// (group x layers). A tile's neighbours in z are then at most `group` tiles away; in y they
/// stay next to it except at a group's edge lines. With group = layer, the plain order.
struct TileWalk {
  unsigned layer = 1;                  // tiles per layer
  unsigned group = 1;                  // tiles of a layer per group, 1 to layer
  unsigned span = 1;                   // tiles of a full group: group x layers
  FastDiv by_span, by_group, by_last;  // division by span, group and the last group's width

  /// Tile t's place: q (its tile in the layer) and l (its layer).
  SLUICE_FAST_DIV_HD void place(unsigned t, unsigned& q, unsigned& l) const {
    const unsigned g = by_span(t);
    const unsigned r = t - g * span;
    const unsigned first = g * group;
    const bool full = layer - first >= group;
    const unsigned width = full ? group : layer - first;
    l = full ? by_group(r) : by_last(r);
    q = first + (r - l * width);
  }

  /// Whether the tiles are taken in more than one group (else the plain order).
  SLUICE_FAST_DIV_HD bool grouped() const { return group < layer; }
};

/// The walk over `layers` layers of `layer` tiles in groups of `group` tiles (0 or more than
/// `layer`, or a single layer: one group, the plain order). layer x layers must stay below 2^31.
inline TileWalk tile_walk(unsigned layer, unsigned layers, unsigned group) {
  TileWalk w;
  w.layer = std::max(1u, layer);
  w.group = group == 0 || group > w.layer || layers <= 1 ? w.layer : group;
  w.span = w.group * std::max(1u, layers);
  w.by_span = FastDiv(w.span);
  w.by_group = FastDiv(w.group);
  w.by_last = FastDiv(w.layer - (w.layer - 1) / w.group * w.group);
  return w;
}

/// The tiles per group for `points` points of each plane (0 or less: one group), given the
/// tiles' points of a plane (`tile_points`) and the plane's x lines of `nx` points: at least
/// kTileGroupMinLines lines, rounded up to whole tiles and to a multiple of `align` (a tile
/// row's tiles, where tiles are 2D, so that groups hold whole rows of tiles). 0: one group.
inline unsigned tile_group(std::int64_t points, std::int64_t nx, unsigned tile_points,
                           unsigned align) {
  if (points <= 0 || tile_points == 0) return 0;
  points = std::max(points, kTileGroupMinLines * nx);
  std::int64_t g = (points + tile_points - 1) / tile_points;
  const std::int64_t a = std::max(1u, align);
  g = (g + a - 1) / a * a;
  return g >= std::int64_t{0x7fffffff} ? 0u : static_cast<unsigned>(g);
}

}  // namespace sluice::detail::cuda
