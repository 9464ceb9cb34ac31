#pragma once
// Launch shapes (grids as large as the device keeps resident), the switches that
// choose kernels, and the launch helpers.
// Part of one translation unit: src/la/cuda/la_kernels.cu includes it (and says how the
// kernels work).

#include "la/cuda/cg_block.cuh"
#include "la/cuda/zwalk.cuh"

namespace sluice::detail::cuda {
namespace {

// ---- launch shapes ------------------------------------------------------------------------------

/// Blocks for `work` blocks' worth of work: no more than the device keeps resident for `kernel`
/// on all but `spare` of its multiprocessors (a reduction: nor than the partials buffer holds).
template <class Kernel>
unsigned grid_for(Kernel* kernel, std::size_t work, int threads, bool reduction, CudaStream& s,
                  const Scratch& sc, const OpInfo& op, int spare = 0) {
  std::size_t cap = static_cast<std::size_t>(std::max(1, sc.sms - std::max(0, spare))) *
                    resident_blocks(reinterpret_cast<const void*>(kernel), threads, s.device(), op);
  if (reduction) cap = std::min<std::size_t>(cap, kMaxBlocks);
  return static_cast<unsigned>(std::clamp<std::size_t>(work, 1, cap));
}

/// Points along x of a stencil tile: 32 in 2D; 128 in 3D unless 64 or 32 pads x less (measured
/// on an H200, 2D 5-point at 2e7 points: 500 us per CG iteration with 32, 514 with 128 or 256;
/// 3D 7-point at 1.4e7: 390 with 32, 371 with 128 or 256, while 256 is slower below 1e7
/// points). SLUICE_CUDA_TILE_X (32, 64, 128 or 256) overrides, to measure the choice again.
unsigned tile_width(bool three, std::int64_t nx) {
  static const unsigned forced = [] {
    const char* v = std::getenv("SLUICE_CUDA_TILE_X");
    const unsigned w = v != nullptr ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : 0u;
    return w == 32 || w == 64 || w == 128 || w == 256 ? w : 0u;
  }();
  if (forced != 0) return forced;
  if (!three) return 32u;
  // 3D: the widest of 128, 64, 32 that pads x least (a tile's threads past nx idle: at nx = 164,
  // 128 wide tiles leave 36% of them idle and 64 wide 15%; 64 measured 5% faster there).
  unsigned best = 128;
  for (unsigned w : {64u, 32u}) {
    if ((nx + w - 1) / w * w < (nx + best - 1) / best * best) best = w;
  }
  return best;
}

/// Points of each plane per group of tiles (TileWalk): kTileGroupPoints, or
/// SLUICE_CUDA_TILE_GROUP (a number of points; 0: no groups, every plane's tiles in one run, the
/// order before groups), to measure the choice again.
std::int64_t tile_group_points() {
  static const std::int64_t points = [] {
    const char* v = std::getenv("SLUICE_CUDA_TILE_GROUP");
    if (v == nullptr || *v == '\0') return kTileGroupPoints;
    char* end = nullptr;
    const long long p = std::strtoll(v, &end, 10);
    return *end == '\0' && p >= 0 ? static_cast<std::int64_t>(p) : kTileGroupPoints;
  }();
  return points;
}

/// Calls `fn(kernel)` with the stencil kernel for product `a`: its kind, with or without its
/// sum, and its input's form.
template <class Fn>
void with_stencil_kernel(const LaMatvecArgs& a, bool sums, Fn&& fn) {
  using K = LaStencilKind;
  auto pick_input = [&](auto kind, auto ns) {
    constexpr K kKind = decltype(kind)::value;
    constexpr int kSums = decltype(ns)::value;
    if (a.right.v != nullptr) return fn(stencil_kernel<kKind, kSums, m::MatvecInput>);
    if (a.x2 != nullptr) return fn(stencil_kernel<kKind, kSums, m::ConstantRightInput<true>>);
    return fn(stencil_kernel<kKind, kSums, m::ConstantRightInput<false>>);
  };
  auto pick_sums = [&](auto kind) {
    if (sums) return pick_input(kind, std::integral_constant<int, 1>{});
    return pick_input(kind, std::integral_constant<int, 0>{});
  };
  m::with_stencil_kind(a.A.stencil.kind, pick_sums);
}

/// Whether the switch `name` (an environment variable, for measurements) is on: unless "0".
bool switched_on(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::string(v) != "0";
}

/// Whether CG's direction product has its own kernel (cg_direction_kernel);
/// SLUICE_CUDA_CG_KERNELS=0 runs it through the generic stencil kernel (to measure the gain).
bool cg_kernels() {
  static const bool on = switched_on("SLUICE_CUDA_CG_KERNELS");
  return on;
}

/// Whether a product is CG's direction product (p = z + b p; w = A p; p'w), which has a
/// kernel of its own.
bool is_cg_direction(const LaMatvecArgs& a) {
  return a.A.is_stencil && a.x2 != nullptr && a.right.v == nullptr && a.left.v == nullptr &&
         a.left.c == 1.0 && a.epilogue == LaEpilogue::store_dot && a.x_out != nullptr &&
         a.z == a.x_out && cg_kernels();
}

/// Whether CG's direction product over `st` runs as a z walk (cg_zwalk_kernel): by
/// SLUICE_CUDA_ZWALK (off, on, or auto by size: zwalk.hpp), read at every product so that one
/// process can compare both; any other value is an error.
bool cg_zwalk(const LaStencil& st, const OpInfo& op) {
  // The cooperative CG block reproduces the plain direction kernel: auto never picks the z walk
  // for a grid it takes (cg_blocks_for), so sync, async and graph modes use the same kernel.
  static_assert(kCgBlockMaxRows <= kZwalkAutoRows);
  const char* v = std::getenv("SLUICE_CUDA_ZWALK");
  const auto mode = zwalk_mode(v);
  if (!mode) {
    throw Error(
        Errc::invalid_argument,
        std::string("SLUICE_CUDA_ZWALK is '") + v + "': set it to off, on or auto (or unset it)",
        op.where);
  }
  return zwalk_picks(*mode, st);
}

/// Whether CG's 3D 7-point direction product takes its points along z (cg_direction_columns);
/// SLUICE_CUDA_CG_COLUMNS=0 takes them along y as the other products do (to measure it).
bool cg_columns() {
  static const bool on = switched_on("SLUICE_CUDA_CG_COLUMNS");
  return on;
}

/// The tiles of a stencil product over `st`; `cg_direction`: of CG's direction product, whose
/// 3D 7-point form takes its points along z (cg_direction_columns).
Tiles tiles_for(const LaStencil& st, const OpInfo& op, bool cg_direction = false) {
  Tiles tiles;
  const bool columns = cg_direction && st.kind == LaStencilKind::d3p7 && cg_columns() &&
                       (kRowsPerThread + 1) * st.nx * st.ny <= std::int64_t{0x7fffffff};
  if (columns) {
    // Flat: at nx = 113, x lines padded to 128 left 12% of the threads idle, and the 3249 tiles
    // took 7 rounds of the 528 blocks of an H200 against 2850 in 6 flat. Measured on an H200
    // with cg_block_kernel's step-end prefetch: 35.3 against 35.5 us per iteration at 113^3,
    // 96.3 against 98.4 at 163^3; the step kernels at 243^3 320.7 against 317.1 (the division
    // by nx). Without that prefetch, flat tiles made cg_block_kernel spill (11% slower).
    tiles.width = kStencilThreads;
    tiles.height = 1;
    tiles.depth = kRowsPerThread;
    tiles.tx = static_cast<unsigned>((st.nx * st.ny + kStencilThreads - 1) / kStencilThreads);
    tiles.ty = 1;
    tiles.by_nx = FastDiv(static_cast<std::uint32_t>(st.nx));
  } else {
    tiles.width =
        tile_width(st.kind == LaStencilKind::d3p7 || st.kind == LaStencilKind::d3p27, st.nx);
    tiles.height = kStencilThreads / tiles.width * kRowsPerThread;
    tiles.tx = static_cast<unsigned>((st.nx + tiles.width - 1) / tiles.width);
    tiles.ty = static_cast<unsigned>((st.ny + tiles.height - 1) / tiles.height);
  }
  const std::int64_t count =
      std::int64_t{tiles.tx} * tiles.ty * ((st.nz + tiles.depth - 1) / tiles.depth);
  if (count > std::int64_t{0x7fffffff} || st.nx * st.ny > std::int64_t{0x7fffffff}) {
    throw Error(Errc::invalid_argument,
                "cuda: stencil grid " + std::to_string(st.nx) + " x " + std::to_string(st.ny) +
                    " x " + std::to_string(st.nz) +
                    " too large for one product (at most 2^31 - 1 points per plane)",
                op.where);
  }
  tiles.count = static_cast<unsigned>(count);
  tiles.by_tx = FastDiv(tiles.tx);
  // Groups of whole rows of tiles where tiles are 2D (flat tiles: any run of a plane's tiles).
  const unsigned group = tile_group(tile_group_points(), st.nx, tiles.width * tiles.height,
                                    tiles.depth == 1 ? tiles.tx : 1u);
  tiles.walk = tile_walk(tiles.tx * tiles.ty,
                         static_cast<unsigned>((st.nz + tiles.depth - 1) / tiles.depth), group);
  return tiles;
}

/// Whether async CG iterations run as one cooperative kernel per block of iterations
/// (cg_block_kernel); SLUICE_CUDA_CG_BLOCKS=0 issues each step as its own kernel (to measure it).
bool cg_blocks() {
  static const bool on = switched_on("SLUICE_CUDA_CG_BLOCKS");
  return on;
}

/// Whether CG on a stencil of `rows` points runs its async iterations in blocks of one kernel
/// (cg_block_kernel). Up to kCgBlockMaxRows: above, an iteration moves so many bytes that the
/// kernel boundaries cost little, and the direction product on its own kernel's occupancy
/// (5 blocks per multiprocessor where cg_block_kernel holds 4) streams faster.
bool cg_blocks_for(std::int64_t rows) {
  return cg_blocks() && rows <= kCgBlockMaxRows;
}

/// Whether `device` can launch cooperative kernels (queried once per device).
bool cooperative(int device, const OpInfo& op) {
  static std::mutex mutex;
  static auto* cache = new std::map<int, bool>;  // never destroyed
  std::lock_guard lock(mutex);
  auto it = cache->find(device);
  if (it == cache->end()) {
    int v = 0;
    cuda_check(cudaDeviceGetAttribute(&v, cudaDevAttrCooperativeLaunch, device),
               "cudaDeviceGetAttribute", op);
    it = cache->emplace(device, v != 0).first;
  }
  return it->second;
}

/// Whether `s` is the device state's scalar at byte `offset` of `st`, read as is.
bool is_state_scalar(const LaScalar& s, const LaKspState* st, std::size_t offset) {
  return s.num == reinterpret_cast<const double*>(reinterpret_cast<const char*>(st) + offset) &&
         s.den == nullptr && s.factor == 1.0;
}

/// Whether a block of CG iterations fits cg_block_kernel: a stencil's direction product with its
/// own kernel, a constant preconditioner (z not stored), both steps on the async state and their
/// scalars b and a read from it.
bool fits_cg_block(const LaCgBlockArgs& a, const OpInfo& op) {
  LaMatvecArgs m;
  LaFusedArgs f;
  cg_block_step(a, 0, m, f);
  const LaKspState* st = m.sums.state;
  const std::int64_t rows = m.A.stencil.nx * m.A.stencil.ny * m.A.stencil.nz;
  // A z walk (SLUICE_CUDA_ZWALK=on) has no cooperative form: the steps go one by one.
  return is_cg_direction(m) && cg_blocks_for(rows) && !cg_zwalk(m.A.stencil, op) && st != nullptr &&
         f.sums.state == st && m.sums.finalize == LaFinalize::cg_dpi &&
         f.sums.finalize == LaFinalize::cg_iter && f.op == LaFusedOp::cg_update &&
         f.pc.v == nullptr && f.z == nullptr && f.w == m.y &&
         f.n == static_cast<std::size_t>(rows) &&
         is_state_scalar(m.x2_scale, st, offsetof(LaKspState, b)) &&
         is_state_scalar(f.s[0], st, offsetof(LaKspState, a));
}

std::size_t blocks_of(std::size_t n) {
  return (n + kBlock - 1) / kBlock;
}

/// Blocks' worth of work for a 1D reduction of n elements: two elements per thread, as long as
/// that leaves two blocks per multiprocessor (grid_for caps it at the resident blocks). Half the
/// blocks, half the partials and tickets the last block waits for: on an H200, a CG iteration
/// at 2e5 rows took 14.3 us against 16.1 with one element per thread (3D 7-point at 1.4e5
/// rows: 14.4 against 15.6), while at 6e4 rows halving the blocks was 1 to 2% slower.
std::size_t reduction_blocks(std::size_t n, const Scratch& sc) {
  const std::size_t one = blocks_of(n), two = blocks_of((n + 1) / 2);
  return two >= 2 * static_cast<std::size_t>(sc.sms) ? two : one;
}

/// The grid of CG's direction product in both of its forms, cg_direction_kernel and the first
/// step of cg_block_kernel (their sums must be the same, so sync mode takes the block kernel's
/// shape wherever async mode uses it): what both keep resident at once.
unsigned cg_direction_grid(const LaStencil& st, const Tiles& tiles, CudaStream& s,
                           const Scratch& sc, const OpInfo& op, int spare = 0) {
  return m::with_stencil_kind(st.kind, [&](auto k) {
    constexpr LaStencilKind kKind = decltype(k)::value;
    const unsigned own =
        grid_for(cg_direction_kernel<kKind>, tiles.count, kStencilThreads, true, s, sc, op, spare);
    if (!cg_blocks_for(st.nx * st.ny * st.nz)) return own;
    return std::min(own, grid_for(cg_block_kernel<kKind>, tiles.count, kStencilThreads, true, s, sc,
                                  op, spare));
  });
}

void check_launch(const OpInfo& op) {
  cuda_check(cudaGetLastError(), "kernel launch", op);
}

/// Whether kernels are launched with programmatic stream serialization (see
/// stream_order_prologue); SLUICE_CUDA_PDL=0 turns it off (to measure what it gains).
bool use_pdl() {
  static const bool on = switched_on("SLUICE_CUDA_PDL");
  return on;
}

/// kernel<<<grid, block, 0, stream>>>(args...) with launch attribute `attribute`, or none.
template <class... Params, class... Args>
void launch_as(cudaLaunchAttribute* attribute, void (*kernel)(Params...), dim3 grid, dim3 block,
               cudaStream_t stream, const OpInfo& op, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = attribute != nullptr ? 1 : 0;
  cuda_check(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), "cudaLaunchKernelEx",
             op);
}

/// kernel<<<grid, block, 0, stream>>>(args...), with programmatic stream serialization allowed.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, const OpInfo& op,
            Args&&... args) {
  cudaLaunchAttribute pdl{};
  pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl.val.programmaticStreamSerializationAllowed = 1;
  launch_as(use_pdl() ? &pdl : nullptr, kernel, grid, block, stream, op,
            std::forward<Args>(args)...);
}

/// Runs `f(stream)` as the operation `op` on `s` (the device current, the op recorded for fault
/// reports).
template <class F>
void run_on(CudaStream& s, const OpInfo& op, F&& f) {
  auto call = [](void* state, CUstream_st* stream) { (*static_cast<F*>(state))(stream); };
  s.run_user(call, static_cast<void*>(&f), op);
}

}  // namespace
}  // namespace sluice::detail::cuda
