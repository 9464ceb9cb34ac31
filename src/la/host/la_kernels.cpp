#include "la/host/la_kernels.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include "backends/host/host_parallel.hpp"
#include "la/kernel_math.hpp"
#include "la/ksp_logic.hpp"

namespace sluice::detail::host {
namespace {

namespace m = la_math;
using Sums = std::array<double, m::kMaxSums>;

// Elements (or matrix rows) per chunk. Reductions sum within a chunk in index order and then the
// chunks' partial sums in chunk order, so a result depends on the length only, never on how
// many threads took part.
constexpr std::size_t kChunk = 16384;

std::size_t chunks_of(std::size_t n) {
  return (n + kChunk - 1) / kChunk;
}

/// Runs `body(lo, hi, acc)` over [0, n) in chunks, combining each chunk's `acc` (nsums values,
/// started at `identity`) in chunk order. Small loops run on the calling worker alone.
template <class Body>
Sums chunked(std::size_t n, m::Combine combine, double identity, Body&& body) {
  Sums total;
  total.fill(identity);
  const std::size_t chunks = chunks_of(n);
  if (chunks <= 1) {
    body(std::size_t{0}, n, total.data());
    return total;
  }
  std::vector<Sums> partial(chunks);
  auto run = [&](std::size_t c) {
    partial[c].fill(identity);
    body(c * kChunk, std::min(n, (c + 1) * kChunk), partial[c].data());
  };
  if (chunks <= 2) {
    for (std::size_t c = 0; c < chunks; ++c) run(c);
  } else {
    parallel_chunks(chunks, run);
  }
  for (const auto& p : partial) {
    for (int k = 0; k < m::kMaxSums; ++k) total[k] = m::combine(combine, total[k], p[k]);
  }
  return total;
}

/// Stores the sums and runs the solver logic on them.
void finish(const LaSums& sums, const Sums& values, int count) {
  if (sums.out != nullptr) {
    for (int k = 0; k < count; ++k) sums.out[k] = values[k];
  }
  if (sums.state != nullptr) ksp_logic::finalize(sums.finalize, *sums.state, values.data());
}

/// Rows [lo, hi) of a matrix-vector product; returns the epilogue's sum.
double matvec_rows(const LaMatvecArgs& a, const m::MatvecInput& in, double scalar, std::size_t lo,
                   std::size_t hi) {
  double acc = 0;
  if (!a.A.is_stencil) {
    for (std::size_t i = lo; i < hi; ++i) {
      const double v = m::csr_row(a.A.csr, in, static_cast<std::int64_t>(i));
      acc += m::finish_row(a, in, v, scalar, i);
    }
    return acc;
  }
  const auto& s = a.A.stencil;
  const auto first = static_cast<std::int64_t>(lo);
  std::int64_t ix = first % s.nx;
  std::int64_t iy = (first / s.nx) % s.ny;
  std::int64_t iz = first / (s.nx * s.ny);
  for (std::size_t i = lo; i < hi; ++i) {
    const double v = m::stencil_row(s, in, ix, iy, iz, static_cast<std::int64_t>(i));
    acc += m::finish_row(a, in, v, scalar, i);
    if (++ix == s.nx) {
      ix = 0;
      if (++iy == s.ny) {
        iy = 0;
        ++iz;
      }
    }
  }
  return acc;
}

std::size_t rows_of(const LaOperator& A) {
  return static_cast<std::size_t>(A.is_stencil ? A.stencil.nx * A.stencil.ny * A.stencil.nz
                                               : A.csr.rows);
}

class HostLaKernels final : public LaKernels {
 public:
  void vector(Stream& stream, const LaVecArgs& args, const OpInfo& op) override {
    stream.host_task(
        [a = args] {
          const double alpha = m::value(a.alpha);
          const double beta = m::value(a.beta);
          chunked(a.n, m::Combine::sum, 0.0, [&](std::size_t lo, std::size_t hi, double*) {
            for (std::size_t i = lo; i < hi; ++i) m::vec_elem(a, alpha, beta, i);
          });
        },
        op);
  }

  void reduce(Stream& stream, const LaReduceArgs& args, const OpInfo& op) override {
    stream.host_task(
        [a = args] {
          const auto c = m::combine_of(a.op);
          const auto sums =
              chunked(a.n, c, m::identity_of(c), [&](std::size_t lo, std::size_t hi, double* acc) {
                double v = acc[0];
                for (std::size_t i = lo; i < hi; ++i) v = m::combine(c, v, m::reduce_elem(a, i));
                acc[0] = v;
              });
          *a.out = m::reduce_result(a, sums[0], a.n);
        },
        op);
  }

  void matvec(Stream& stream, const LaMatvecArgs& args, const OpInfo& op) override {
    stream.host_task(
        [a = args] {
          if (!ksp_logic::guard_runs(a.sums.state, false)) return;
          const double scalar = m::value(a.a);
          const auto in = m::input_of(a);
          const auto sums = chunked(rows_of(a.A), m::Combine::sum, 0.0,
                                    [&](std::size_t lo, std::size_t hi, double* acc) {
                                      acc[0] += matvec_rows(a, in, scalar, lo, hi);
                                    });
          finish(a.sums, sums, m::matvec_sums(a.epilogue));
        },
        op);
  }

  void fused(Stream& stream, const LaFusedArgs& args, const OpInfo& op) override {
    stream.host_task(
        [f = args] {
          const bool dx = f.op == LaFusedOp::tf_dx;
          if (!ksp_logic::guard_runs(f.sums.state, dx)) return;
          const int steps = ksp_logic::tf_steps(f.sums.state, f.steps);
          double s[4];
          for (int k = 0; k < 4; ++k) s[k] = m::value(f.s[k]);
          const auto sums = m::with_fused_op(f.op, [&](auto o) {
            return chunked(f.n, m::Combine::sum, 0.0,
                           [&](std::size_t lo, std::size_t hi, double* acc) {
                             for (std::size_t i = lo; i < hi; ++i) {
                               m::fused_elem<decltype(o)::value>(f, s, steps, i, acc);
                             }
                           });
          });
          finish(f.sums, sums, m::fused_sums(f.op));
        },
        op);
  }

  void set_state(Stream& stream, LaKspState* dst, const LaKspState& value,
                 const OpInfo& op) override {
    stream.host_task([dst, value] { *dst = value; }, op);
  }

  void diagonal(Stream& stream, const LaOperator& A, double* out, const OpInfo& op) override {
    stream.host_task(
        [A, out] {
          const std::size_t n = rows_of(A);
          chunked(n, m::Combine::sum, 0.0, [&](std::size_t lo, std::size_t hi, double*) {
            for (std::size_t i = lo; i < hi; ++i) {
              if (A.is_stencil) {
                out[i] = A.stencil.center;
                continue;
              }
              double d = 0;
              for (std::int32_t k = A.csr.row_ptr[i]; k < A.csr.row_ptr[i + 1]; ++k) {
                if (A.csr.col[k] == static_cast<std::int32_t>(i)) d += A.csr.val[k];
              }
              out[i] = d;
            }
          });
        },
        op);
  }
};

}  // namespace

LaKernels& la_kernels() {
  static HostLaKernels kernels;
  return kernels;
}

}  // namespace sluice::detail::host
