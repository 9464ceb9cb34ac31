#pragma once
/// @file
/// The plain argument types of the `la` layer's backend kernels (`LaKernels` in
/// sluice/ext/la_kernels.hpp). Internal: include sluice/la.hpp or sluice/ext/la_kernels.hpp
/// instead.
///
/// Plain C++17 with no dependency on the rest of sluice, so that nvcc compiles it in any mode.
/// Every pointer here is a device address (pinned host memory where a comment says so); the
/// kernels never dereference one on the issuing thread.

// Private: only sluice's public headers include this file (they define
// SLUICE_IMPL_PUBLIC_INCLUDE around the include, as Kokkos does for its internals).
#ifndef SLUICE_IMPL_PUBLIC_INCLUDE
#error \
    "sluice/detail/la_format.hpp is internal to sluice and may change without notice: include <sluice/ext/la_kernels.hpp> (backend authors) instead"
#endif

#include <cstddef>
#include <cstdint>

namespace sluice::detail {

/// A scalar operand of a kernel: `factor * (num ? *num : value) / (den ? *den : 1)`, evaluated
/// by the kernel when it runs. A host value travels inside the launch; a device value (a
/// `Managed`, or a solver's device state) is read where it lies, so that `beta / betaold` needs
/// no launch of its own.
struct LaScalar {
  double value = 0;
  const double* num = nullptr;
  const double* den = nullptr;
  double factor = 1;
};

/// A diagonal scaling: `v[i]` where `v` is set, else the constant `c` (1: the identity). Jacobi
/// preconditioners are the inverse diagonal; a stencil's is a constant.
struct LaDiag {
  const double* v = nullptr;
  double c = 1;
};

/// Element-wise vector operations (PETSc's names; `y` is the output).
enum class LaVecOp : std::uint8_t {
  set,                ///< y = alpha
  copy,               ///< y = x
  scale,              ///< y = alpha * y
  axpy,               ///< y = y + alpha * x
  aypx,               ///< y = x + alpha * y
  axpby,              ///< y = alpha * x + beta * y
  waxpy,              ///< y = alpha * x + w
  mult,               ///< y = x .* w
  divide,             ///< y = x ./ w
  reciprocal_or_one,  ///< y = 1 / x, and 1 where x == 0 (PCJACOBI's rule for zero diagonals)
};

struct LaVecArgs {
  LaVecOp op = LaVecOp::set;
  std::size_t n = 0;
  double* y = nullptr;
  const double* x = nullptr;
  const double* w = nullptr;
  LaScalar alpha;
  LaScalar beta;
};

/// Reductions; the result is one double written to `out` (device memory, or pinned host memory
/// that the device can write).
enum class LaReduceOp : std::uint8_t {
  dot,      ///< sum x[i] * y[i]
  norm1,    ///< sum |x[i]|
  norm2,    ///< sqrt(sum x[i]^2)
  norminf,  ///< max |x[i]| (0 for an empty vector)
  sum,      ///< sum x[i]
  max,      ///< max x[i] (-inf for an empty vector)
  min,      ///< min x[i] (+inf for an empty vector)
};

struct LaReduceArgs {
  LaReduceOp op = LaReduceOp::dot;
  std::size_t n = 0;
  const double* x = nullptr;
  const double* y = nullptr;
  double* out = nullptr;
};

/// Matrix-free Laplacians with Dirichlet boundaries: `center * u[i] + neighbor * sum u[j]` over
/// the stencil's neighbours that lie inside the grid (x fastest, then y, then z).
enum class LaStencilKind : std::uint8_t {
  d2p5,   ///< 2D, 5 points (the 4 edge neighbours)
  d2p9,   ///< 2D, 9 points (edges and corners)
  d3p7,   ///< 3D, 7 points (the 6 face neighbours)
  d3p27,  ///< 3D, 27 points (faces, edges and corners)
};

/// The grid's slowest dimension (z in 3D, y in 2D) may be *open* at either end: then the plane
/// beyond that end lies in memory right beside the grid (before the first point, after the last)
/// and holds neighbours, as a distributed stencil's ghost planes do (sluice/dist.hpp); a closed
/// end is the Dirichlet boundary.
struct LaStencil {
  LaStencilKind kind = LaStencilKind::d2p5;
  bool open_lo = false;  ///< the plane before the first is there (neighbours of the first plane)
  bool open_hi = false;  ///< the plane after the last is there
  std::int64_t nx = 0, ny = 1, nz = 1;
  double center = 0;
  double neighbor = 0;
};

/// A CSR matrix (sorted column indices, no duplicates). `prepared` is what the backend's
/// `LaKernels::prepare` made for it (e.g. a cuSPARSE descriptor), or null.
struct LaCsr {
  std::int64_t rows = 0, cols = 0, nnz = 0;
  const std::int32_t* row_ptr = nullptr;
  const std::int32_t* col = nullptr;
  const double* val = nullptr;
  const void* prepared = nullptr;
};

struct LaOperator {
  bool is_stencil = false;
  LaCsr csr;
  LaStencil stencil;
};

/// The device state of one Krylov solve (src/la/ksp_logic.hpp defines it). Kernels given one
/// are guarded: they do nothing once the solve stopped, and their reductions end in `finalize`.
struct LaKspState;

/// What happens with a kernel's sums once the last of them is known.
enum class LaFinalize : std::uint8_t {
  none,
  rhs_norm,  ///< the norm of the right-hand side (nonzero initial guess): KSPConvergedDefault
  cg_init,   ///< CG before the loop: initial norm, convergence test 0, beta
  cg_dpi,    ///< CG after w = A p: the indefinite-matrix test, alpha
  cg_iter,   ///< CG after the update: norm, convergence test, beta, the next loop top
  tf_init,   ///< TFQMR before the loop: initial norm, convergence test 0, rho
  tf_s,      ///< TFQMR at the loop top: s = v'rp, alpha
  tf_m,      ///< TFQMR after r -= a K(u + q): the two quasi-minimal steps and their tests
  tf_rho,    ///< TFQMR at the loop end: rho, beta, the iteration limit
  // CG with one reduction an iteration (CgVariant::single_reduction): the update's two sums and
  // the product's z's reach the logic together, as sums [norm^2, z'r, z's].
  cg1_init,          ///< before the loop: cg_init's, then delta = z's, p'Ap and alpha
  cg1_iter,          ///< after the update and s = A z: cg_iter's, then delta, p'Ap and alpha
  cg1_stash,         ///< one context: keeps the update's [norm^2, z'r] in the state...
  cg1_init_stashed,  ///< ...and the product's [z's] completes them (cg1_init)
  cg1_iter_stashed,  ///< (cg1_iter)
};

/// Where a kernel's sums go: stored to `out` (sync: pinned host memory read by the host),
/// and/or handed to `finalize` on the device state `state` (async).
struct LaSums {
  double* out = nullptr;
  LaKspState* state = nullptr;
  LaFinalize finalize = LaFinalize::none;
};

/// What a matrix-vector product does with `v = left .* (A (right .* x))`, row by row (x the
/// product's input, see LaMatvecArgs).
enum class LaEpilogue : std::uint8_t {
  store,      ///< y = v
  add,        ///< y = v + z (z may be y)
  sub,        ///< y = z - v (the residual b - A x)
  store_dot,  ///< y = v; sum0 = y'z
  residual,   ///< y = y - a v (y read and written); sum0 = y'y
};

/// The product's input is `x_scale x + x2_scale * x2` when `x2` is set (CG's new direction
/// p = z + b p, formed inside the product instead of in a pass of its own; with a constant
/// preconditioner z = c r is formed there too, from x = r and x_scale = c), else `x_scale x`;
/// where `x_out` is set, row i also stores its input element there (x_out must not be x or x2).
struct LaMatvecArgs {
  LaOperator A;
  const double* x = nullptr;
  double x_scale = 1;
  const double* x2 = nullptr;
  LaScalar x2_scale;
  double* x_out = nullptr;
  LaDiag left;
  LaDiag right;
  LaEpilogue epilogue = LaEpilogue::store;
  double* y = nullptr;
  const double* z = nullptr;
  LaScalar a;
  LaSums sums;
  /// Multiprocessors a stencil product's grid leaves free, for communication that runs beside
  /// it on another stream (the dist layer's ghost exchange): a grid that fills every
  /// multiprocessor keeps the exchange's kernels from starting until it ends.
  std::int32_t spare_sms = 0;
};

/// Fused element-wise steps of the solvers, each one pass over the vectors named (B: `pc`).
enum class LaFusedOp : std::uint8_t {
  rhs_norm,    ///< t = B b: sum0 = t't, sum1 = b't, sum2 = b'b
  cg_init,     ///< (b given: x = 0; r = b); z = B r; p = 0 (and w = 0 if w is set):
               ///< sum0 = (z'z | r'r by norm type), sum1 = z'r
  cg_update,   ///< x += s0 p; r -= s0 w; z = B r: sum0 = (z'z | r'r), sum1 = z'r
  tf_init,     ///< r = B r; rp = r; u = r; p = r; d = 0: sum0 = r'r, sum1 = r'rp
  tf_qt,       ///< q = u - s0 v; t = u + q
  tf_dx,       ///< d = u + s1 d; x += s0 d; then, for the second step, d = q + s3 d;
               ///< x += s2 d: sum0 = r'rp
  tf_uqp,      ///< u = r + s0 q; q = q + s0 p; p = u + s0 q
  unwind,      ///< x = x + B t (right preconditioning: back from the preconditioned variable)
  cg1_update,  ///< single-reduction CG (`v` holds s = A z): p = B r + s1 p; w = v + s1 w;
               ///< x += s0 p; r -= s0 w; z = B r (if z is set): sum0 = (z'z | r'r), sum1 = z'r
};

struct LaFusedArgs {
  LaFusedOp op = LaFusedOp::cg_init;
  std::size_t n = 0;
  double *x = nullptr, *r = nullptr, *z = nullptr, *p = nullptr, *w = nullptr;
  double *u = nullptr, *q = nullptr, *t = nullptr, *d = nullptr, *rp = nullptr, *v = nullptr;
  const double* b = nullptr;
  LaDiag pc;
  LaScalar s[4];
  std::int32_t norm_type = 0;  ///< KspNormType (sluice/la.hpp) as an integer
  std::int32_t steps = 2;      ///< tf_dx without a state: how many of its two steps to apply
  LaSums sums;
};

/// A block of CG iterations in async mode (LaKernels::cg_block): per iteration the direction
/// product (`direction`: p = x_scale x + b p_old formed inside w = A p, with p'w) and then the
/// update (`update`: x += a p, r -= a w, z = B r, with the norm and z'r), each ending in its
/// finalize on the device state. The two direction vectors swap roles every iteration:
/// iteration k reads the old direction from `p[k % 2]` and writes the new one to
/// `p[(k + 1) % 2]` (direction.x2 / direction.x_out = direction.z / update.p, which
/// cg_block_step sets). With an even count a block repeats exactly.
struct LaCgBlockArgs {
  LaMatvecArgs direction;
  LaFusedArgs update;
  double* p[2] = {nullptr, nullptr};
  std::int32_t iterations = 0;
  /// Where the block also leaves the final state (pinned host memory; null: nowhere), so that
  /// the host reads it without a copy of its own after the block.
  LaKspState* mirror = nullptr;
  /// Where the block also leaves 1 if the solve still iterates after it, else 0 (device memory;
  /// null: nowhere): a graph-mode solve's loop condition (LaKernels::running).
  std::int32_t* running = nullptr;
  /// The solve's set-up, run before the iterations when set (the first block of a solve from a
  /// zero guess): the state's initial value (a host address, read when the block is issued: the
  /// value travels with the operation, as LaKernels::set_state's does) and CG's first pass
  /// `init` (LaFusedOp::cg_init from b, ending in its finalize on the state).
  const LaKspState* initial = nullptr;
  LaFusedArgs init;
};

/// A block of TFQMR iterations in async mode (LaKernels::tf_block): per iteration KSPSolve_TFQMR's
/// five operations, each as issued for one iteration (every iteration's are the same: no
/// iteration number in any argument; the kernels take their scalars from the device state).
struct LaTfBlockArgs {
  LaFusedArgs qt;         ///< q = u - a v, t = u + q
  LaMatvecArgs residual;  ///< r -= a K t with r'r (tf_m)
  LaFusedArgs dx;         ///< d and x steps with r'rp (tf_rho)
  LaFusedArgs uqp;        ///< u = r + b q, q = q + b p, p = u + b q
  LaMatvecArgs v;         ///< v = K p with v'rp (tf_s)
  std::int32_t iterations = 0;
  /// Where the block also leaves the final state (pinned host memory; null: nowhere).
  LaKspState* mirror = nullptr;
  /// Where the block also leaves 1 if the solve still iterates after it, else 0 (device memory;
  /// null: nowhere): a graph-mode solve's loop condition.
  std::int32_t* running = nullptr;
};

/// The arguments of iteration k of a CG block.
inline void cg_block_step(const LaCgBlockArgs& a, std::int32_t k, LaMatvecArgs& direction,
                          LaFusedArgs& update) {
  direction = a.direction;
  update = a.update;
  direction.x2 = a.p[k % 2];
  direction.x_out = a.p[(k + 1) % 2];
  direction.z = direction.x_out;
  update.p = direction.x_out;
}

}  // namespace sluice::detail
