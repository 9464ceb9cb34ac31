#pragma once
// The per-element arithmetic of the la kernels, written once for every backend: the host backend
// calls these functions from its loops, the cuda backend from its kernels (nvcc compiles this
// file as host+device code). Loops, reductions across threads and launch shapes are each
// backend's own; what one element computes is decided here, so both backends agree to rounding.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "sluice/ext/la_kernels.hpp"

#if defined(__CUDACC__)
#define SLUICE_HD __host__ __device__ __forceinline__
#else
#define SLUICE_HD inline
#endif

namespace sluice::detail::la_math {

/// Sums a kernel may produce (the most any operation needs).
inline constexpr int kMaxSums = 3;

SLUICE_HD double value(const LaScalar& s) {
  double v = s.num != nullptr ? *s.num : s.value;
  if (s.den != nullptr) v /= *s.den;
  return s.factor * v;
}

SLUICE_HD double diag(const LaDiag& d, std::size_t i) {
  return d.v != nullptr ? d.v[i] : d.c;
}

SLUICE_HD double abs(double x) {
  return x < 0 ? -x : x;
}

/// How the partial results of a reduction combine.
enum class Combine : std::uint8_t { sum, max, min };

SLUICE_HD Combine combine_of(LaReduceOp op) {
  switch (op) {
    case LaReduceOp::norminf:
    case LaReduceOp::max:
      return Combine::max;
    case LaReduceOp::min:
      return Combine::min;
    case LaReduceOp::dot:
    case LaReduceOp::norm1:
    case LaReduceOp::norm2:
    case LaReduceOp::sum:
      return Combine::sum;
  }
  return Combine::sum;
}

SLUICE_HD double infinity() {
  // by its bits: std::numeric_limits is not callable from device code without relaxed constexpr
  const std::uint64_t bits = 0x7ff0000000000000ull;
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

SLUICE_HD double identity_of(Combine c) {
  switch (c) {
    case Combine::max:
      return -infinity();
    case Combine::min:
      return infinity();
    case Combine::sum:
      return 0.0;
  }
  return 0.0;
}

SLUICE_HD double combine(Combine c, double a, double b) {
  switch (c) {
    case Combine::max:
      return a < b ? b : a;
    case Combine::min:
      return b < a ? b : a;
    case Combine::sum:
      return a + b;
  }
  return a + b;
}

/// One element's contribution to a reduction.
SLUICE_HD double reduce_elem(const LaReduceArgs& a, std::size_t i) {
  switch (a.op) {
    case LaReduceOp::dot:
      return a.x[i] * a.y[i];
    case LaReduceOp::norm1:
      return abs(a.x[i]);
    case LaReduceOp::norm2:
      return a.x[i] * a.x[i];
    case LaReduceOp::norminf:
      return abs(a.x[i]);
    case LaReduceOp::sum:
    case LaReduceOp::max:
    case LaReduceOp::min:
      return a.x[i];
  }
  return a.x[i];
}

/// The reduction's result from the combined contributions.
SLUICE_HD double reduce_result(const LaReduceArgs& a, double combined, std::size_t n) {
  if (a.op == LaReduceOp::norm2) return ::sqrt(combined);
  if (a.op == LaReduceOp::norminf && n == 0) return 0.0;
  return combined;
}

/// y[i] of an element-wise operation; `alpha` and `beta` already evaluated.
SLUICE_HD void vec_elem(const LaVecArgs& a, double alpha, double beta, std::size_t i) {
  double* y = a.y;
  switch (a.op) {
    case LaVecOp::set:
      y[i] = alpha;
      break;
    case LaVecOp::copy:
      y[i] = a.x[i];
      break;
    case LaVecOp::scale:
      y[i] = alpha * y[i];
      break;
    case LaVecOp::axpy:
      y[i] = y[i] + alpha * a.x[i];
      break;
    case LaVecOp::aypx:
      y[i] = a.x[i] + alpha * y[i];
      break;
    case LaVecOp::axpby:
      y[i] = alpha * a.x[i] + beta * y[i];
      break;
    case LaVecOp::waxpy:
      y[i] = alpha * a.x[i] + a.w[i];
      break;
    case LaVecOp::mult:
      y[i] = a.x[i] * a.w[i];
      break;
    case LaVecOp::divide:
      y[i] = a.x[i] / a.w[i];
      break;
    case LaVecOp::reciprocal_or_one:
      y[i] = a.x[i] == 0.0 ? 1.0 : 1.0 / a.x[i];
      break;
  }
}

/// The input of a product: xs * x[j] + s * x2[j] (or xs * x[j]), then scaled by `right`.
struct MatvecInput {
  const double* x;
  const double* x2;
  double s;
  LaDiag right;
  double xs = 1;

  /// The unscaled input element (what x_out stores).
  SLUICE_HD double raw(std::int64_t j) const {
    return x2 != nullptr ? xs * x[j] + s * x2[j] : xs * x[j];
  }
  SLUICE_HD double operator()(std::int64_t j) const {
    return right.v != nullptr ? right.v[j] * raw(j) : raw(j);
  }
  /// The constant right scaling a product applies to its sum (1 where `right` is a vector).
  SLUICE_HD double right_scale() const { return right.v != nullptr ? 1.0 : right.c; }
};

/// MatvecInput where `right` is a constant (no vector) and x2's presence is known: the same
/// values with fewer registers, for a GPU's stencil kernels.
template <bool X2>
struct ConstantRightInput {
  const double* x;
  const double* x2;
  double s;
  double c;
  double xs = 1;

  SLUICE_HD double raw(std::int64_t j) const {
    if constexpr (X2) {
      return xs * x[j] + s * x2[j];
    } else {
      return xs * x[j];
    }
  }
  SLUICE_HD double operator()(std::int64_t j) const { return raw(j); }
  SLUICE_HD double right_scale() const { return c; }
};

/// (A (right .* input))_i for row i of a CSR matrix.
SLUICE_HD double csr_row(const LaCsr& A, const MatvecInput& in, std::int64_t i) {
  double acc = 0;
  const std::int32_t end = A.row_ptr[i + 1];
  if (in.right.v == nullptr && in.x2 == nullptr && in.xs == 1.0) {
    for (std::int32_t k = A.row_ptr[i]; k < end; ++k) acc += A.val[k] * in.x[A.col[k]];
    return in.right.c == 1.0 ? acc : in.right.c * acc;
  }
  for (std::int32_t k = A.row_ptr[i]; k < end; ++k) acc += A.val[k] * in(A.col[k]);
  return in.right.v != nullptr || in.right.c == 1.0 ? acc : in.right.c * acc;
}

/// The sum of the neighbours of grid point (ix, iy, iz) = row i of a stencil of kind K, in a
/// fixed order (z, then y, then x ascending); sy and sz are the strides of y and z. I is the
/// index type: 64-bit on the host, 32-bit offsets from a plane in a GPU's CG kernel.
template <LaStencilKind K, class I, class In>
SLUICE_HD double stencil_neighbors(const LaStencil& s, const In& in, I ix, I iy, I iz, I i, I sy,
                                   I sz) {
  const auto nx = static_cast<I>(s.nx), ny = static_cast<I>(s.ny), nz = static_cast<I>(s.nz);
  // The slowest dimension's low and high ends may be open (LaStencil): its first plane has a
  // neighbour below it, its last one above it.
  const I lo = s.open_lo ? I(-1) : I(0);
  double acc = 0;
  if constexpr (K == LaStencilKind::d2p5) {
    const I hi = s.open_hi ? ny + 1 : ny;
    if (iy > lo) acc += in(i - sy);
    if (ix > 0) acc += in(i - 1);
    if (ix + 1 < nx) acc += in(i + 1);
    if (iy + 1 < hi) acc += in(i + sy);
  } else if constexpr (K == LaStencilKind::d3p7) {
    const I hi = s.open_hi ? nz + 1 : nz;
    if (iz > lo) acc += in(i - sz);
    if (iy > 0) acc += in(i - sy);
    if (ix > 0) acc += in(i - 1);
    if (ix + 1 < nx) acc += in(i + 1);
    if (iy + 1 < ny) acc += in(i + sy);
    if (iz + 1 < hi) acc += in(i + sz);
  } else {
    constexpr bool three = K == LaStencilKind::d3p27;
    // The open ends: of z in 3D, of y in 2D.
    const I zlo = three ? lo : I(0), zhi = three && s.open_hi ? nz + 1 : nz;
    const I ylo = three ? I(0) : lo, yhi = !three && s.open_hi ? ny + 1 : ny;
    for (int dz = three ? -1 : 0; dz <= (three ? 1 : 0); ++dz) {
      if (iz + dz < zlo || iz + dz >= zhi) continue;
      for (int dy = -1; dy <= 1; ++dy) {
        if (iy + dy < ylo || iy + dy >= yhi) continue;
        const I base = i + dz * sz + dy * sy;
        if (ix > 0) acc += in(base - 1);
        if (dz != 0 || dy != 0) acc += in(base);
        if (ix + 1 < nx) acc += in(base + 1);
      }
    }
  }
  return acc;
}

/// (A (right .* input))_i for the grid point (ix, iy, iz) = row i of a stencil of kind K: the
/// neighbours' sum, the centre term added last.
template <LaStencilKind K, class In>
SLUICE_HD double stencil_row(const LaStencil& s, const In& in, std::int64_t ix, std::int64_t iy,
                             std::int64_t iz, std::int64_t i) {
  const double acc = stencil_neighbors<K>(s, in, ix, iy, iz, i, s.nx, s.nx * s.ny);
  return in.right_scale() * (s.neighbor * acc + s.center * in(i));
}

/// stencil_row for a kind known at run time.
SLUICE_HD double stencil_row(const LaStencil& s, const MatvecInput& in, std::int64_t ix,
                             std::int64_t iy, std::int64_t iz, std::int64_t i) {
  switch (s.kind) {
    case LaStencilKind::d2p5:
      return stencil_row<LaStencilKind::d2p5>(s, in, ix, iy, iz, i);
    case LaStencilKind::d2p9:
      return stencil_row<LaStencilKind::d2p9>(s, in, ix, iy, iz, i);
    case LaStencilKind::d3p7:
      return stencil_row<LaStencilKind::d3p7>(s, in, ix, iy, iz, i);
    case LaStencilKind::d3p27:
      return stencil_row<LaStencilKind::d3p27>(s, in, ix, iy, iz, i);
  }
  return 0;
}

/// The epilogue of a matrix-vector product at row i: `v` is (A (right .* x))_i; writes y and
/// returns the row's contribution to sum0. `a` is already evaluated.
SLUICE_HD double epilogue(const LaMatvecArgs& m, double v, double a, std::size_t i) {
  v = diag(m.left, i) * v;
  switch (m.epilogue) {
    case LaEpilogue::store:
      m.y[i] = v;
      return 0;
    case LaEpilogue::add:
      m.y[i] = v + m.z[i];
      return 0;
    case LaEpilogue::sub:
      m.y[i] = m.z[i] - v;
      return 0;
    case LaEpilogue::store_dot:
      m.y[i] = v;
      return v * m.z[i];
    case LaEpilogue::residual: {
      const double r = m.y[i] - a * v;
      m.y[i] = r;
      return r * r;
    }
  }
  return 0;
}

/// The input of product `m` (its scalar evaluated: once per thread).
SLUICE_HD MatvecInput input_of(const LaMatvecArgs& m) {
  return {m.x, m.x2, m.x2 != nullptr ? value(m.x2_scale) : 0.0, m.right, m.x_scale};
}

/// Row i's epilogue after storing its input element where the product asks for it.
template <class In>
SLUICE_HD double finish_row(const LaMatvecArgs& m, const In& in, double v, double a,
                            std::size_t i) {
  if (m.x_out != nullptr) m.x_out[i] = in.raw(static_cast<std::int64_t>(i));
  return epilogue(m, v, a, i);
}

/// Number of sums a fused operation produces.
SLUICE_HD constexpr int fused_sums(LaFusedOp op) {
  switch (op) {
    case LaFusedOp::rhs_norm:
      return 3;
    case LaFusedOp::cg_init:
    case LaFusedOp::cg_update:
    case LaFusedOp::tf_init:
    case LaFusedOp::cg1_update:
      return 2;
    case LaFusedOp::tf_dx:
      return 1;
    case LaFusedOp::tf_qt:
    case LaFusedOp::tf_uqp:
    case LaFusedOp::unwind:
      return 0;
  }
  return 0;
}

SLUICE_HD int matvec_sums(LaEpilogue e) {
  return e == LaEpilogue::store_dot || e == LaEpilogue::residual ? 1 : 0;
}

/// CG's update at one element from its values: x += a p, r -= a w, z = pc r, with the norm's
/// term (by norm type) added to acc[0] and z'r to acc[1].
struct CgUpdated {
  double x, r, z;
};
SLUICE_HD CgUpdated cg_update_at(double x, double p, double r, double w, double a, double pc,
                                 std::int32_t norm_type, double* acc) {
  CgUpdated u;
  u.x = x + a * p;
  u.r = r - a * w;
  u.z = pc * u.r;
  acc[0] += norm_type == 1 ? u.z * u.z : norm_type == 2 ? u.r * u.r : 0.0;
  acc[1] += u.z * u.r;
  return u;
}

/// One element of the fused solver step Op. `s` holds the operation's scalars, already
/// evaluated; `steps` is tf_dx's number of steps; contributions are added to `acc`.
template <LaFusedOp Op>
SLUICE_HD void fused_elem(const LaFusedArgs& f, const double* s, int steps, std::size_t i,
                          double* acc) {
  switch (Op) {
    case LaFusedOp::rhs_norm: {
      const double b = f.b[i];
      const double t = diag(f.pc, i) * b;
      acc[0] += t * t;
      acc[1] += b * t;
      acc[2] += b * b;
      break;
    }
    case LaFusedOp::cg_init: {
      // From a zero guess (b given) the same pass sets x = 0 and r = b; either way it zeroes the
      // direction p, so that the first p = z + b p is z whatever p held.
      const double r = f.b != nullptr ? f.b[i] : f.r[i];
      if (f.b != nullptr) {
        f.x[i] = 0;
        f.r[i] = r;
      }
      f.p[i] = 0;
      if (f.w != nullptr) f.w[i] = 0;  // single-reduction CG: the first w = s + 0 w
      const double z = diag(f.pc, i) * r;
      if (f.z != nullptr) f.z[i] = z;
      acc[0] += f.norm_type == 1 ? z * z : f.norm_type == 2 ? r * r : 0.0;
      acc[1] += z * r;
      break;
    }
    case LaFusedOp::cg_update: {
      const auto u =
          cg_update_at(f.x[i], f.p[i], f.r[i], f.w[i], s[0], diag(f.pc, i), f.norm_type, acc);
      f.x[i] = u.x;
      f.r[i] = u.r;
      if (f.z != nullptr) f.z[i] = u.z;
      break;
    }
    case LaFusedOp::tf_init: {
      const double r = diag(f.pc, i) * f.r[i];
      f.r[i] = r;
      f.rp[i] = r;
      f.u[i] = r;
      f.p[i] = r;
      f.d[i] = 0;
      acc[0] += r * r;
      acc[1] += r * r;
      break;
    }
    case LaFusedOp::tf_qt: {
      const double u = f.u[i];
      const double q = u - s[0] * f.v[i];
      f.q[i] = q;
      f.t[i] = u + q;
      break;
    }
    case LaFusedOp::tf_dx: {
      double d = f.u[i] + s[1] * f.d[i];
      double x = f.x[i] + s[0] * d;
      if (steps > 1) {
        d = f.q[i] + s[3] * d;
        x = x + s[2] * d;
      }
      f.d[i] = d;
      f.x[i] = x;
      acc[0] += f.r[i] * f.rp[i];
      break;
    }
    case LaFusedOp::tf_uqp: {
      const double u = f.r[i] + s[0] * f.q[i];
      const double q = f.q[i] + s[0] * f.p[i];
      f.u[i] = u;
      f.q[i] = q;
      f.p[i] = u + s[0] * q;
      break;
    }
    case LaFusedOp::unwind:
      f.x[i] = f.x[i] + diag(f.pc, i) * f.t[i];
      break;
    case LaFusedOp::cg1_update: {
      // z = B r as stored before (the same bits), so z is only written here.
      const double pc = diag(f.pc, i);
      const double p = pc * f.r[i] + s[1] * f.p[i];
      const double w = f.v[i] + s[1] * f.w[i];
      f.p[i] = p;
      f.w[i] = w;
      f.x[i] = f.x[i] + s[0] * p;
      const double r = f.r[i] - s[0] * w;
      f.r[i] = r;
      const double z = pc * r;
      if (f.z != nullptr) f.z[i] = z;
      acc[0] += f.norm_type == 1 ? z * z : f.norm_type == 2 ? r * r : 0.0;
      acc[1] += z * r;
      break;
    }
  }
}

/// Calls `fn(std::integral_constant<E, v>{})` for the v among `First, Rest...` equal to `e` (the
/// last if none is): code specialized at compile time for a value known at run time.
template <auto First, auto... Rest, class Fn>
inline decltype(auto) with_value(decltype(First) e, Fn&& fn) {
  if constexpr (sizeof...(Rest) == 0) {
    return fn(std::integral_constant<decltype(First), First>{});
  } else {
    if (e == First) return fn(std::integral_constant<decltype(First), First>{});
    return with_value<Rest...>(e, static_cast<Fn&&>(fn));
  }
}

/// A fused step's code specialized for its operation (fewer registers on a GPU, no per-element
/// branch on the host).
template <class Fn>
inline decltype(auto) with_fused_op(LaFusedOp op, Fn&& fn) {
  using O = LaFusedOp;
  return with_value<O::rhs_norm, O::cg_init, O::cg_update, O::tf_init, O::tf_qt, O::tf_dx,
                    O::tf_uqp, O::cg1_update, O::unwind>(op, static_cast<Fn&&>(fn));
}

/// A stencil product's code specialized for its stencil.
template <class Fn>
inline decltype(auto) with_stencil_kind(LaStencilKind kind, Fn&& fn) {
  using K = LaStencilKind;
  return with_value<K::d2p5, K::d2p9, K::d3p7, K::d3p27>(kind, static_cast<Fn&&>(fn));
}

}  // namespace sluice::detail::la_math
