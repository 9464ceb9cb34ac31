#include "la/host/la_kernels.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <vector>

#include "backends/host/host_parallel.hpp"
#include "la/host/csr.hpp"
#include "la/host/fused.hpp"
#include "la/host/lanes.hpp"
#include "la/host/simd.hpp"
#include "la/host/stencil.hpp"
#include "la/kernel_math.hpp"
#include "la/ksp_logic.hpp"

namespace sluice::detail::host {
namespace {

namespace m = la_math;
using Sums = std::array<double, m::kMaxSums>;

// Elements (or matrix rows) per chunk. Reductions sum within a chunk in four lanes
// (lanes.hpp) and then the chunks' partial sums in chunk order, so a result depends on the
// length only, never on how many threads took part (tests/la/la_reference.hpp,
// SumOrder::host_chunks, sums the same way). Small enough that both cores share a loop of 2e3
// elements (the pool's hand-off costs well under a microsecond when its threads spin): a CG
// iteration at 1e4 nonzeros runs on two cores.
constexpr std::size_t kChunk = 1024;

std::size_t chunks_of(std::size_t n) {
  return (n + kChunk - 1) / kChunk;
}

/// Loops of fewer chunks than this run on the calling worker alone (SLUICE_HOST_SERIAL_CHUNKS
/// overrides it, for measurements): below it the pool's fork-join, and the other core reading
/// lines the last loop left in this core's cache, cost more than the second core gains. On the
/// 2-core development machine loops of 2 and 3 chunks (up to 3072 elements) ran 1.1 to 1.6
/// times faster alone (CG and TFQMR at 1331 to 2025 rows, docs/bench/la.md "Results (host)"); from
/// 5 chunks the second core won as often as it lost, its timings bimodal.
std::size_t serial_chunks() {
  static const std::size_t value = [] {
    const char* env = std::getenv("SLUICE_HOST_SERIAL_CHUNKS");
    return env != nullptr ? static_cast<std::size_t>(std::strtoull(env, nullptr, 10))
                          : std::size_t{4};
  }();
  return value;
}

/// Runs `body(lo, hi, acc)` over [0, n) in chunks, combining each chunk's `acc` (nsums values,
/// started at `identity`) in chunk order, whichever thread ran it. A small loop runs on the
/// calling worker alone (serial_chunks); larger ones on the pool too, whose threads wait for
/// work spinning (spin_wait.hpp).
template <class Body>
Sums chunked(std::size_t n, m::Combine combine, double identity, Body&& body) {
  Sums total;
  total.fill(identity);
  const std::size_t chunks = chunks_of(n);
  if (chunks <= 1) {
    body(std::size_t{0}, n, total.data());
    return total;
  }
  auto add = [&](const Sums& p) {
    for (int k = 0; k < m::kMaxSums; ++k) total[k] = m::combine(combine, total[k], p[k]);
  };
  auto run = [&](std::size_t c, Sums& p) {
    p.fill(identity);
    body(c * kChunk, std::min(n, (c + 1) * kChunk), p.data());
  };
  if (chunks < serial_chunks()) {
    // Each chunk's sums added as it finishes, in the same order: no partials to allocate.
    Sums p;
    for (std::size_t c = 0; c < chunks; ++c) {
      run(c, p);
      add(p);
    }
    return total;
  }
  std::vector<Sums> partial(chunks);
  auto run_chunk = [&](std::size_t c) { run(c, partial[c]); };
  parallel_chunks(chunks, run_chunk);
  for (const auto& p : partial) add(p);
  return total;
}

/// Stores the sums and runs the solver logic on them.
void finish(const LaSums& sums, const Sums& values, int count) {
  if (sums.out != nullptr) {
    for (int k = 0; k < count; ++k) sums.out[k] = values[k];
  }
  if (sums.state != nullptr) ksp_logic::finalize(sums.finalize, *sums.state, values.data());
}

std::size_t rows_of(const LaOperator& A) {
  return static_cast<std::size_t>(A.is_stencil ? A.stencil.nx * A.stencil.ny * A.stencil.nz
                                               : A.csr.rows);
}

/// A matrix-vector product, run by the calling thread and the pool.
void run_matvec(const LaMatvecArgs& a) {
  if (!ksp_logic::guard_runs(a.sums.state, false)) return;
  const double scalar = m::value(a.a);
  const std::size_t n = rows_of(a.A);
  Sums sums;
  if (a.A.is_stencil) {
    const HostIsa isa = host_isa();
    const bool stream = stream_stores_for(n) && stream_aligned(a.y, a.x_out);
    sums = m::with_stencil_kind(a.A.stencil.kind, [&](auto kind) {
      return with_fixed_input(a, [&](const auto& in) {
        return chunked(n, m::Combine::sum, 0.0, [&](std::size_t lo, std::size_t hi, double* acc) {
          acc[0] += stencil_rows<decltype(kind)::value>(a, in, scalar, lo, hi, isa, stream);
        });
      });
    });
  } else if (csr_forms_input_first(a)) {
    const auto in = m::input_of(a);
    (void)chunked(n, m::Combine::sum, 0.0,
                  [&](std::size_t lo, std::size_t hi, double*) { csr_form_input(a, in, lo, hi); });
    const LaMatvecArgs direct = csr_after_forming(a);
    sums = chunked(n, m::Combine::sum, 0.0, [&](std::size_t lo, std::size_t hi, double* acc) {
      acc[0] += csr_rows_direct(direct, a.right.c, scalar, lo, hi);
    });
  } else if (csr_input_is_direct(a)) {
    sums = chunked(n, m::Combine::sum, 0.0, [&](std::size_t lo, std::size_t hi, double* acc) {
      acc[0] += csr_rows_direct(a, a.right.c, scalar, lo, hi);
    });
  } else {
    const auto in = m::input_of(a);
    sums = chunked(n, m::Combine::sum, 0.0, [&](std::size_t lo, std::size_t hi, double* acc) {
      acc[0] += csr_rows(a, in, scalar, lo, hi);
    });
  }
  finish(a.sums, sums, m::matvec_sums(a.epilogue));
}

/// A fused solver step, run by the calling thread and the pool.
void run_fused(const LaFusedArgs& f) {
  const bool dx = f.op == LaFusedOp::tf_dx;
  if (!ksp_logic::guard_runs(f.sums.state, dx)) return;
  const int steps = ksp_logic::tf_steps(f.sums.state, f.steps);
  double s[4];
  for (int k = 0; k < 4; ++k) s[k] = m::value(f.s[k]);
  const bool stream =
      stream_stores_for(f.n) && stream_aligned(f.x, f.r, f.z, f.p, f.w, f.u, f.q, f.t, f.d, f.rp);
  const auto sums = m::with_fused_op(f.op, [&](auto o) {
    const auto chunk = fused_chunk_for<decltype(o)::value>(host_isa(), stream);
    return chunked(f.n, m::Combine::sum, 0.0, [&](std::size_t lo, std::size_t hi, double* acc) {
      chunk(f, s, steps, lo, hi, acc);
    });
  });
  finish(f.sums, sums, m::fused_sums(f.op));
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
                if (c == m::Combine::sum) {  // in lanes, as every host sum
                  Lanes lanes;
                  const LaReduceArgs r = a;
                  over_lanes(lo, lo, hi, lanes, [&](std::size_t i, double* l) SLUICE_LANE_BODY {
                    l[0] += m::reduce_elem(r, i);
                  });
                  acc[0] += lanes.total(0);
                  return;
                }
                double v = acc[0];
                for (std::size_t i = lo; i < hi; ++i) v = m::combine(c, v, m::reduce_elem(a, i));
                acc[0] = v;
              });
          *a.out = m::reduce_result(a, sums[0], a.n);
        },
        op);
  }

  void matvec(Stream& stream, const LaMatvecArgs& args, const OpInfo& op) override {
    stream.host_task([a = args] { run_matvec(a); }, op);
  }

  void fused(Stream& stream, const LaFusedArgs& args, const OpInfo& op) override {
    stream.host_task([f = args] { run_fused(f); }, op);
  }

  // A block as one host task: its steps follow each other on the worker without a hand-off
  // through the queue, as the cuda backend runs a block as one cooperative kernel.
  void cg_block(Stream& stream, const LaCgBlockArgs& args, const OpInfo& op) override {
    // The set-up's state travels by value: the caller's copy may go once this returns.
    const bool setup = args.initial != nullptr;
    const LaKspState initial = setup ? *args.initial : LaKspState{};
    stream.host_task(
        [a = args, setup, initial] {
          if (setup) {
            *a.direction.sums.state = initial;
            run_fused(a.init);
          }
          LaMatvecArgs direction;
          LaFusedArgs update;
          for (std::int32_t k = 0; k < a.iterations; ++k) {
            cg_block_step(a, k, direction, update);
            run_matvec(direction);
            run_fused(update);
          }
          if (a.mirror != nullptr) *a.mirror = *a.direction.sums.state;
          if (a.running != nullptr) *a.running = a.direction.sums.state->stop == 0 ? 1 : 0;
        },
        op);
  }

  // A TFQMR block as one host task too: eight operations per iteration were as many hand-offs
  // through the context's queue (about 0.3 us each beside kernels of a fraction of a us at
  // small sizes, docs/la.md "Results (host)").
  void tf_block(Stream& stream, const LaTfBlockArgs& args, const OpInfo& op) override {
    stream.host_task(
        [a = args] {
          for (std::int32_t k = 0; k < a.iterations; ++k) {
            run_fused(a.qt);
            run_matvec(a.residual);
            run_fused(a.dx);
            run_fused(a.uqp);
            run_matvec(a.v);
          }
          if (a.mirror != nullptr) *a.mirror = *a.v.sums.state;
          if (a.running != nullptr) *a.running = a.v.sums.state->stop == 0 ? 1 : 0;
        },
        op);
  }

  void set_state(Stream& stream, LaKspState* dst, const LaKspState& value,
                 const OpInfo& op) override {
    stream.host_task([dst, value] { *dst = value; }, op);
  }

  void running(Stream& stream, const LaKspState* state, std::int32_t* flag, LaKspState* mirror,
               const OpInfo& op) override {
    stream.host_task(
        [state, flag, mirror] {
          *flag = state->stop == 0 ? 1 : 0;
          if (mirror != nullptr) *mirror = *state;
        },
        op);
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
