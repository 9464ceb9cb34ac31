// The z walk of CG's 3D direction product (src/la/cuda/zwalk.cuh), host and device: which
// products take it, and how its x-y tiles and z chunks are numbered (tests/la/zwalk_test.cpp
// checks it on the host).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>

#include "la/cuda/fast_div.hpp"
#include "sluice/ext/la_kernels.hpp"

namespace sluice::detail::cuda {

/// A z walk's tile: x and y points of a plane (a block of 256 threads, 32 x 8, each thread two
/// points 8 lines apart).
constexpr unsigned kZwalkWidth = 32;
constexpr unsigned kZwalkHeight = 16;
/// A chunk spans at least this many planes (unless the grid has fewer): each chunk reads the
/// plane below and above it besides its own, 2 / depth more than its share.
constexpr unsigned kZwalkMinDepth = 8;
/// SLUICE_CUDA_ZWALK=auto takes the walk for planes of at least this many points (384^2 and up;
/// at 256^2 the flat column tiles already read each input from DRAM about once: 31.0 B per point
/// against 32 on an H100)...
constexpr std::int64_t kZwalkAutoPlane = 131072;
/// ... and grids of more than this many points, where async CG runs its steps as their own
/// kernels (src/la/cuda/launch.cuh: kCgBlockMaxRows, which may not exceed it): the cooperative
/// block reproduces the plain direction kernel, not this one.
constexpr std::int64_t kZwalkAutoRows = 10'000'000;

/// SLUICE_CUDA_ZWALK: off (the plain direction kernel), on (the z walk for every 3D CG direction
/// product; async CG then issues its steps one by one) or auto (the default: by size, see
/// kZwalkAutoPlane).
enum class ZwalkMode : std::uint8_t { off, on, automatic };

/// The mode `value` names ("off", "on", "auto"; null or empty: auto); nullopt if it names none.
inline std::optional<ZwalkMode> zwalk_mode(const char* value) {
  if (value == nullptr) return ZwalkMode::automatic;
  const std::string_view v(value);
  if (v.empty() || v == "auto") return ZwalkMode::automatic;
  if (v == "off" || v == "0") return ZwalkMode::off;
  if (v == "on" || v == "1") return ZwalkMode::on;
  return std::nullopt;
}

/// Whether CG's direction product over `s` takes the z walk in mode `mode`: 3D stencils (7 and
/// 27 points) with at least one plane and planes below 2^31 points.
inline bool zwalk_picks(ZwalkMode mode, const LaStencil& s) {
  const bool three = s.kind == LaStencilKind::d3p7 || s.kind == LaStencilKind::d3p27;
  const std::int64_t plane = s.nx * s.ny;
  if (!three || s.nx < 1 || s.ny < 1 || s.nz < 1 || plane > std::int64_t{0x7fffffff}) return false;
  switch (mode) {
    case ZwalkMode::off:
      return false;
    case ZwalkMode::on:
      return true;
    case ZwalkMode::automatic:
      return plane >= kZwalkAutoPlane && plane * s.nz > kZwalkAutoRows;
  }
  return false;
}

/// A z walk's work items: the tx x ty tiles of a plane (`layer`, numbered x fastest) times
/// `chunks` chunks of `depth` consecutive planes (the last one shorter where depth does not
/// divide nz). Item t is tile t % layer of chunk t / layer; a block takes items blockIdx.x,
/// blockIdx.x + gridDim.x, ...
struct ZWalk {
  unsigned tx = 1, ty = 1;  // tiles along x and y
  unsigned layer = 1;       // tx * ty
  unsigned depth = 1;       // planes of a chunk
  unsigned chunks = 1;      // chunks along z
  unsigned count = 1;       // layer * chunks
  unsigned nz = 1;          // planes of the grid
  FastDiv by_tx, by_layer;

  /// Item t's tile origin (x0, y0) and its planes [z0, z1).
  struct Item {
    unsigned x0, y0, z0, z1;
  };
  SLUICE_FAST_DIV_HD Item item(unsigned t) const {
    const unsigned c = by_layer(t);
    const unsigned q = t - c * layer;
    const unsigned y = by_tx(q);
    const unsigned z0 = c * depth;
    const unsigned z1 = nz - z0 < depth ? nz : z0 + depth;
    return {(q - y * tx) * kZwalkWidth, y * kZwalkHeight, z0, z1};
  }
};

/// The walk over an nx x ny x nz grid (1 to 2^31 - 1 points a plane) for a grid of `blocks`
/// resident blocks. The chunks along z: the count c that minimizes a block's planes,
/// ceil(layer c / blocks) items of ceil(nz / c) + 2 planes each (its own, and the plane below
/// and above), over 1 to nz / kZwalkMinDepth chunks and at most 8 items per block (the
/// fewest on a tie). At 256^3 on 528 blocks: 4 chunks of 64 planes (512 items); at 384^3: 11 of
/// 35 (3168 items, 6 per block, where one chunk would leave 240 blocks idle); at 512^3 one.
inline ZWalk zwalk(std::int64_t nx, std::int64_t ny, std::int64_t nz, unsigned blocks) {
  ZWalk w;
  w.tx = static_cast<unsigned>((std::max<std::int64_t>(nx, 1) + kZwalkWidth - 1) / kZwalkWidth);
  w.ty = static_cast<unsigned>((std::max<std::int64_t>(ny, 1) + kZwalkHeight - 1) / kZwalkHeight);
  w.layer = w.tx * w.ty;
  w.nz = static_cast<unsigned>(std::max<std::int64_t>(nz, 1));
  const std::uint64_t b = std::max(1u, blocks), layer = w.layer;
  const std::uint64_t most =
      std::max<std::uint64_t>(1, std::min<std::uint64_t>(w.nz / kZwalkMinDepth, 8 * b / layer));
  std::uint64_t best = 1, best_cost = ~std::uint64_t{0};
  for (std::uint64_t c = 1; c <= most; ++c) {
    const std::uint64_t cost = (layer * c + b - 1) / b * ((w.nz + c - 1) / c + 2);
    if (cost < best_cost) best = c, best_cost = cost;
  }
  w.depth = static_cast<unsigned>((w.nz + best - 1) / best);
  w.chunks = (w.nz + w.depth - 1) / w.depth;
  w.count = w.layer * w.chunks;
  w.by_tx = FastDiv(w.tx);
  w.by_layer = FastDiv(w.layer);
  return w;
}

}  // namespace sluice::detail::cuda
