#pragma once
// The host's CSR products, row by row: the general form (any input: la_math::MatvecInput, a
// test per row), and the direct form for an input that is x itself, its epilogue and left
// scaling fixed at compile time. CG's direction product (p = z + b p formed inside the product)
// becomes direct by forming its input in a pass of its own first. Each row's arithmetic is
// kernel_math.hpp's, term for term, and the sums go to the lanes of lanes.hpp: every form gives
// the same bits (tests/host/csr_rows_test.cpp).

#include <cstddef>
#include <cstdint>

#include "la/host/lanes.hpp"
#include "la/kernel_math.hpp"

namespace sluice::detail::host {

/// Rows [lo, hi) (one chunk) of a CSR product; returns the epilogue's sum (in lanes).
inline double csr_rows(const LaMatvecArgs& a, const la_math::MatvecInput& in, double scalar,
                       std::size_t lo, std::size_t hi) {
  Lanes lanes;
  over_lanes(lo, lo, hi, lanes, [&](std::size_t i, double* acc) SLUICE_LANE_BODY {
    const double v = la_math::csr_row(a.A.csr, in, static_cast<std::int64_t>(i));
    acc[0] += la_math::finish_row(a, in, v, scalar, i);
  });
  return lanes.total(0);
}

/// Rows [lo, hi) of a CSR product whose input is x itself (no second vector, no vector scaling,
/// `rc` the constant right scaling), its epilogue E and left scaling known at compile time: the
/// same arithmetic in the same order as csr_rows (csr_row's sum, then finish_row's epilogue, the
/// sums in lanes), without a test per row. The general form took twice as long as a plain CSR
/// loop on one core (650 against 326 us on a 2D 5-point half of 512^2).
template <LaEpilogue E, bool kLeftVector>
double csr_rows_direct(const LaMatvecArgs& a, double rc, double scalar, std::size_t lo,
                       std::size_t hi) {
  const std::int32_t* __restrict rp = a.A.csr.row_ptr;
  const std::int32_t* __restrict col = a.A.csr.col;
  const double* __restrict val = a.A.csr.val;
  const double* x = a.x;
  double* y = a.y;
  const double* z = a.z;
  const double* lv = a.left.v;
  const double lc = a.left.c;
  auto row = [&](std::size_t i) SLUICE_LANE_BODY -> double {
    double acc = 0;
    const std::int32_t end = rp[i + 1];
    for (std::int32_t k = rp[i]; k < end; ++k) acc += val[k] * x[col[k]];
    double v = rc == 1.0 ? acc : rc * acc;
    v = (kLeftVector ? lv[i] : lc) * v;
    if constexpr (E == LaEpilogue::store) {
      y[i] = v;
      return 0;
    } else if constexpr (E == LaEpilogue::add) {
      y[i] = v + z[i];
      return 0;
    } else if constexpr (E == LaEpilogue::sub) {
      y[i] = z[i] - v;
      return 0;
    } else if constexpr (E == LaEpilogue::store_dot) {
      y[i] = v;
      return v * z[i];
    } else {
      const double r = y[i] - scalar * v;
      y[i] = r;
      return r * r;
    }
  };
  double l0 = 0, l1 = 0, l2 = 0, l3 = 0;
  std::size_t i = lo;
  for (; i + 4 <= hi; i += 4) {
    l0 += row(i);
    l1 += row(i + 1);
    l2 += row(i + 2);
    l3 += row(i + 3);
  }
  if (i < hi) l0 += row(i);
  if (i + 1 < hi) l1 += row(i + 1);
  if (i + 2 < hi) l2 += row(i + 2);
  return (l0 + l1) + (l2 + l3);
}

/// csr_rows_direct for the product's epilogue and left scaling.
inline double csr_rows_direct(const LaMatvecArgs& a, double rc, double scalar, std::size_t lo,
                              std::size_t hi) {
  auto with_left = [&]<LaEpilogue E>() {
    return a.left.v != nullptr ? csr_rows_direct<E, true>(a, rc, scalar, lo, hi)
                               : csr_rows_direct<E, false>(a, rc, scalar, lo, hi);
  };
  switch (a.epilogue) {
    case LaEpilogue::store:
      return with_left.template operator()<LaEpilogue::store>();
    case LaEpilogue::add:
      return with_left.template operator()<LaEpilogue::add>();
    case LaEpilogue::sub:
      return with_left.template operator()<LaEpilogue::sub>();
    case LaEpilogue::store_dot:
      return with_left.template operator()<LaEpilogue::store_dot>();
    case LaEpilogue::residual:
      return with_left.template operator()<LaEpilogue::residual>();
  }
  return 0;
}

/// Whether a CSR product's input is x itself (csr_rows_direct).
inline bool csr_input_is_direct(const LaMatvecArgs& a) {
  return a.x2 == nullptr && a.right.v == nullptr && a.x_scale == 1.0 && a.x_out == nullptr;
}

/// Whether a CSR product forms its input in a pass of its own first (x_out = xs x + s x2, then
/// the product of x_out): CG's direction p = z + b p, formed inside the product, costs two loads
/// and three operations at every nonzero instead of one load, where a row's columns read the
/// same elements again (7 times a row on a 3D 7-point matrix: the solve ran 1.4x slower than
/// PETSc's, which forms p in a vector pass). The pass stores what x_out stores anyway, and the
/// product reads the same values: the same bits.
inline bool csr_forms_input_first(const LaMatvecArgs& a) {
  return a.x_out != nullptr && a.right.v == nullptr && (a.x2 != nullptr || a.x_scale != 1.0) &&
         a.A.csr.cols == a.A.csr.rows;
}

/// Rows [lo, hi) of the pass that forms a product's input (csr_forms_input_first): x_out = the
/// raw input, x_scale x + x2_scale x2.
inline void csr_form_input(const LaMatvecArgs& a, const la_math::MatvecInput& in, std::size_t lo,
                           std::size_t hi) {
  for (std::size_t i = lo; i < hi; ++i) a.x_out[i] = in.raw(static_cast<std::int64_t>(i));
}

/// The direct product that follows the forming pass: its input is what the pass stored.
inline LaMatvecArgs csr_after_forming(const LaMatvecArgs& a) {
  LaMatvecArgs direct = a;
  direct.x = a.x_out;
  direct.x_scale = 1;
  direct.x2 = nullptr;
  direct.x_out = nullptr;
  return direct;
}

}  // namespace sluice::detail::host
