// The cuda backend's la kernels (see la_kernels.hpp). What one element computes comes from
// src/la/kernel_math.hpp and the solvers' scalar logic from src/la/ksp_logic.hpp, shared with the
// host backend; this file holds the interface, and the headers it includes its parts, in order:
// shapes.cuh (constants, per-context scratch), reduce.cuh (reductions), kernels.cuh (the
// element-wise, fused and stencil kernels), cg_block.cuh (the cooperative CG block), launch.cuh
// (launch shapes and switches) and sparse.cuh (cuSPARSE). One translation unit: the kernels are
// templates instantiated where the interface launches them. The small kernels are cg_small.cu
// and tf_small.cu.
//
// Built without FMA contraction (--fmad=false on the cuda module, cmake/SluiceRounding.cmake):
// the solver logic runs here in async mode and on the host in sync mode, and the two must round
// alike (the host never contracts a*b+c either).
//
// Reductions are deterministic: a block's threads accumulate in a fixed order, blocks combine
// through shuffles in a fixed shape, and the last block (found with an atomic ticket) adds the
// blocks' partials in block order. The launch shape depends only on the length, the kernel and
// the device, so a result is the same on every run.
//
// Launch shapes: grids are as large as the device keeps resident at once (its occupancy for the
// kernel, queried once), never more. Blocks that do not fit in one wave would run in a second,
// mostly empty one; and a reduction's partials stay few.

#include "backends/cuda/kernel_preload.hpp"
#include "la/cuda/cg_block.cuh"
#include "la/cuda/kernels.cuh"
#include "la/cuda/launch.cuh"
#include "la/cuda/reduce.cuh"
#include "la/cuda/shapes.cuh"
#include "la/cuda/sparse.cuh"
#include "la/cuda/zwalk.cuh"

namespace sluice::detail::cuda {
namespace {

// ---- the interface ------------------------------------------------------------------------------

class CudaLaKernels final : public LaKernels {
 public:
  void vector(Stream& stream, const LaVecArgs& args, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la vector operation");
    run_on(s, op, [&](cudaStream_t st) {
      auto& sc = scratch_for(s, st, op);
      const unsigned grid = grid_for(vec_kernel, blocks_of(args.n), kBlock, false, s, sc, op);
      launch(vec_kernel, grid, kBlock, st, op, args);
      check_launch(op);
    });
  }

  void reduce(Stream& stream, const LaReduceArgs& args, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la reduction");
    run_on(s, op, [&](cudaStream_t st) {
      auto& sc = scratch_for(s, st, op);
      const Reducer red{sc.partials, sc.counter};
      const unsigned grid =
          grid_for(reduce_kernel, reduction_blocks(args.n, sc), kBlock, true, s, sc, op);
      launch(reduce_kernel, grid, kBlock, st, op, args, red);
      check_launch(op);
    });
  }

  void fused(Stream& stream, const LaFusedArgs& args, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la solver step");
    run_on(s, op, [&](cudaStream_t st) {
      auto& sc = scratch_for(s, st, op);
      const Reducer red{sc.partials, sc.counter};
      m::with_fused_op(args.op, [&](auto o) {
        constexpr LaFusedOp kOp = decltype(o)::value;
        auto* kernel = fused_kernel<kOp>;
        const bool sums = m::fused_sums(kOp) > 0;
        const unsigned grid =
            grid_for(kernel, sums ? reduction_blocks(args.n, sc) : blocks_of(args.n), kBlock, sums,
                     s, sc, op);
        launch(kernel, grid, kBlock, st, op, args, red);
      });
      check_launch(op);
    });
  }

  void matvec(Stream& stream, const LaMatvecArgs& args, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la matrix-vector product");
    const bool sums = m::matvec_sums(args.epilogue) > 0;
    if (args.A.is_stencil) {
      const bool cg_direction = is_cg_direction(args);
      if (cg_direction && cg_zwalk(args.A.stencil, op)) {
        zwalk_matvec(s, args, op);
        return;
      }
      const Tiles tiles = tiles_for(args.A.stencil, op, cg_direction);
      run_on(s, op, [&](cudaStream_t stream_) {
        auto& sc = scratch_for(s, stream_, op);
        const Reducer red{sc.partials, sc.counter};
        auto with_kernel = [&](auto&& fn) {
          if (!cg_direction) return with_stencil_kernel(args, sums, fn);
          return m::with_stencil_kind(args.A.stencil.kind, [&](auto kind) {
            return fn(cg_direction_kernel<decltype(kind)::value>);
          });
        };
        with_kernel([&](auto* kernel) {
          const unsigned grid =
              cg_direction
                  ? cg_direction_grid(args.A.stencil, tiles, s, sc, op, args.spare_sms)
                  : grid_for(kernel, tiles.count, kStencilThreads, sums, s, sc, op, args.spare_sms);
          launch(kernel, grid, dim3(tiles.width, kStencilThreads / tiles.width), stream_, op, args,
                 red, tiles);
        });
        check_launch(op);
      });
      return;
    }
    const auto& A = args.A.csr;
    const auto n = static_cast<std::size_t>(A.rows);
    const bool identity_right = args.right.v == nullptr && args.right.c == 1.0;
    const bool direct_input =
        identity_right && args.x2 == nullptr && args.x_out == nullptr && args.x_scale == 1.0;
    const bool plain = args.epilogue == LaEpilogue::store && direct_input &&
                       args.left.v == nullptr && args.left.c == 1.0 && args.sums.state == nullptr;
    run_on(s, op, [&](cudaStream_t st) {
      auto& sc = scratch_for(s, st, op);
      const Reducer red{sc.partials, sc.counter};
      if (plain) {  // y = A x: cuSPARSE straight into y
        spmv(s, sc, A, args.x, args.y, op);
        return;
      }
      ensure_temps(s, sc, std::max<std::size_t>(n, static_cast<std::size_t>(A.cols)), op);
      const double* in = args.x;
      if (!direct_input) {
        const auto cols = static_cast<std::size_t>(A.cols);
        const unsigned grid = grid_for(input_kernel, blocks_of(cols), kBlock, false, s, sc, op);
        launch(input_kernel, grid, kBlock, st, op, args, sc.temp[0], cols);
        check_launch(op);
        in = sc.temp[0];
      }
      spmv(s, sc, A, in, sc.temp[1], op);
      auto* kernel = sums ? csr_epilogue_kernel<1> : csr_epilogue_kernel<0>;
      const unsigned grid =
          grid_for(kernel, sums ? reduction_blocks(n, sc) : blocks_of(n), kBlock, sums, s, sc, op);
      launch(kernel, grid, kBlock, st, op, args, sc.temp[1], red);
      check_launch(op);
    });
  }

  /// CG's 3D direction product as a z walk (zwalk.cuh): chunks along z sized so that the
  /// items fill the grid the device keeps resident (less `spare_sms`).
  static void zwalk_matvec(CudaStream& s, const LaMatvecArgs& args, const OpInfo& op) {
    const LaStencil& st = args.A.stencil;
    run_on(s, op, [&](cudaStream_t stream_) {
      auto& sc = scratch_for(s, stream_, op);
      const Reducer red{sc.partials, sc.counter};
      m::with_stencil_kind(st.kind, [&](auto kind) {
        constexpr LaStencilKind kKind = decltype(kind)::value;
        if constexpr (kKind == LaStencilKind::d3p7 || kKind == LaStencilKind::d3p27) {
          auto* kernel = cg_zwalk_kernel<kKind>;
          const unsigned cap = grid_for(kernel, std::size_t{kMaxBlocks}, kStencilThreads, true, s,
                                        sc, op, args.spare_sms);
          const ZWalk walk = zwalk(st.nx, st.ny, st.nz, cap);
          launch(kernel, std::min(cap, walk.count), dim3(kZwalkWidth, kZwalkLines), stream_, op,
                 args, red, walk);
        }
      });
      check_launch(op);
    });
  }

  void cg_block(Stream& stream, const LaCgBlockArgs& args, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la CG iterations");
    if (args.iterations <= 0) return;
    if (!fits_cg_block(args, op) || !cooperative(s.device(), op)) {
      LaKernels::cg_block(stream, args, op);
      return;
    }
    const LaStencil& stencil = args.direction.A.stencil;
    CgBlockShape shape;
    shape.tiles = tiles_for(stencil, op, true);
    shape.chunks = blocks_of(args.update.n);
    run_on(s, op, [&](cudaStream_t st) {
      auto& sc = scratch_for(s, st, op);
      m::with_stencil_kind(stencil.kind, [&](auto kind) {
        constexpr LaStencilKind kKind = decltype(kind)::value;
        shape.dir_blocks = cg_direction_grid(stencil, shape.tiles, s, sc, op);
        shape.upd_blocks = grid_for(fused_kernel<LaFusedOp::cg_update>,
                                    reduction_blocks(args.update.n, sc), kBlock, true, s, sc, op);
        const unsigned init_grid =
            args.initial == nullptr
                ? 0u
                : grid_for(fused_kernel<LaFusedOp::cg_init>, reduction_blocks(args.init.n, sc),
                           kBlock, true, s, sc, op);
        // Small problems: one block or cluster with the vectors on chip (cg_small.cu).
        // (It reproduces the plain order of the tiles: never grouped at its sizes by default.)
        if (!shape.tiles.walk.grouped() &&
            cg_small_block(args, small_steps(shape, init_grid), s.device(), st, op)) {
          return;
        }
        if (args.initial != nullptr) {  // the set-up first, as set_state and fused issue it
          launch(set_state_kernel, 1, 32, st, op, *args.initial, args.direction.sums.state);
          launch(fused_kernel<LaFusedOp::cg_init>, init_grid, kBlock, st, op, args.init,
                 Reducer{sc.partials, sc.counter});
        }
        auto* kernel = cg_block_kernel<kKind>;
        // Resident at once (a cooperative launch must be), and no more than the steps' grids
        // need: a block past them would only wait at the barriers. It hosts every block of the
        // direction product: cg_direction_grid caps that at this kernel's residency.
        // (Any grid gives the same sums: blocks loop over the steps' blocks. Fewer blocks do
        // not make a small solve faster: on an H100, CG at 64^2 took 5.7 us per iteration with
        // 8 to 128 blocks, more with fewer; the two step ends cost that, not the work.)
        const unsigned grid =
            grid_for(kernel, std::max<std::size_t>(shape.dir_blocks, (shape.upd_blocks + 1) / 2),
                     kStencilThreads, false, s, sc, op);
        cudaLaunchAttribute cooperative{};
        cooperative.id = cudaLaunchAttributeCooperative;
        cooperative.val.cooperative = 1;
        launch_as(&cooperative, kernel, grid,
                  dim3(shape.tiles.width, kStencilThreads / shape.tiles.width), st, op, args,
                  sc.partials, shape);
      });
      check_launch(op);
    });
  }

  void tf_block(Stream& stream, const LaTfBlockArgs& args, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la TFQMR iterations");
    bool small = false;
    if (args.iterations > 0 && args.residual.A.is_stencil && args.v.A.is_stencil) {
      // Small problems: one block with the vectors on chip (tf_small.cu), given the shapes the
      // five operations launched one by one would take.
      run_on(s, op, [&](cudaStream_t st) {
        auto& sc = scratch_for(s, st, op);
        const Tiles tiles = tiles_for(args.residual.A.stencil, op);
        TfSmallSteps steps;
        steps.tile_width = tiles.width;
        steps.tile_height = tiles.height;
        steps.tiles_x = tiles.tx;
        steps.tiles_y = tiles.ty;
        steps.tiles = tiles.count;
        with_stencil_kernel(args.residual, true, [&](auto* kernel) {
          steps.residual_blocks = grid_for(kernel, tiles.count, kStencilThreads, true, s, sc, op);
        });
        with_stencil_kernel(args.v, true, [&](auto* kernel) {
          steps.v_blocks = grid_for(kernel, tiles.count, kStencilThreads, true, s, sc, op);
        });
        steps.dx_blocks = grid_for(fused_kernel<LaFusedOp::tf_dx>, reduction_blocks(args.dx.n, sc),
                                   kBlock, true, s, sc, op);
        steps.chunks = blocks_of(args.dx.n);
        small = tiles.depth == 1 && !tiles.walk.grouped() &&
                tf_small_block(args, steps, s.device(), st, op);
      });
    }
    if (!small) LaKernels::tf_block(stream, args, op);
  }

  void set_state(Stream& stream, LaKspState* dst, const LaKspState& value,
                 const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la solver state");
    run_on(s, op, [&](cudaStream_t st) {
      launch(set_state_kernel, 1, 32, st, op, value, dst);
      check_launch(op);
    });
  }

  void running(Stream& stream, const LaKspState* state, std::int32_t* flag, LaKspState* mirror,
               const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la solver running flag");
    run_on(s, op, [&](cudaStream_t st) {
      launch(running_kernel, 1, 32, st, op, state, flag, mirror);
      check_launch(op);
    });
  }

  void diagonal(Stream& stream, const LaOperator& A, double* out, const OpInfo& op) override {
    auto& s = as_cuda_stream(stream, "la diagonal");
    const auto n = static_cast<std::size_t>(
        A.is_stencil ? A.stencil.nx * A.stencil.ny * A.stencil.nz : A.csr.rows);
    run_on(s, op, [&](cudaStream_t st) {
      auto& sc = scratch_for(s, st, op);
      const unsigned grid = grid_for(diagonal_kernel, blocks_of(n), kBlock, false, s, sc, op);
      launch(diagonal_kernel, grid, kBlock, st, op, A, out, n);
      check_launch(op);
    });
  }

  std::shared_ptr<void> prepare(const LaCsr& csr) override {
    auto p = std::make_shared<Prepared>();
    if (csr.nnz == 0) return p;
    const OpInfo op{0, "cusparseCreateCsr", std::source_location::current()};
    sparse_check(cusparseCreateCsr(
                     &p->mat, csr.rows, csr.cols, csr.nnz, const_cast<std::int32_t*>(csr.row_ptr),
                     const_cast<std::int32_t*>(csr.col), const_cast<double*>(csr.val),
                     CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F),
                 "cusparseCreateCsr", op);
    return p;
  }
};

// Every kernel of this file (its headers' templates included) and cuSPARSE's SpMV, loaded
// ahead where one process drives several GPUs (backends/cuda/kernel_preload.hpp).
SLUICE_CUDA_KERNEL_FILE(diagonal_kernel, warm_up_spmv);

}  // namespace

LaKernels& la_kernels() {
  static CudaLaKernels kernels;
  return kernels;
}

}  // namespace sluice::detail::cuda
