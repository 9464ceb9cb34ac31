// Async TFQMR blocks of small matrix-free problems (up to 4096 points) in one thread block of
// 1024 threads, the vectors on chip for the whole block: x, u and q in the registers of the
// threads that own their elements (the fused steps' chunks), the ones the stencil products read
// at neighbours or write point by point (t, r, p, v, and rp) and d in shared memory (in
// registers too, d made ptxas spill 170 bytes at the 64 registers of 1024 threads).
//
// Bit-identical to sync mode: each iteration's five operations (fused_kernel<tf_qt>,
// stencil_kernel with the residual epilogue and r'r, fused_kernel<tf_dx> with r'rp,
// fused_kernel<tf_uqp>, stencil_kernel with store_dot and v'rp) form every element and every
// sum as when launched one by one, their step blocks played by the units of small_steps.cuh (see
// cg_small.cu), and the solver logic (tf_m, tf_rho, tf_s of ksp_logic.hpp) runs on the same sums
// in the same order. An iteration, each phase ending in a block barrier:
//   (Q) q = u - a v, t = u + q on each owner's elements;
//   (R) r -= a K t and the direction units' r'r sums (a warp's two units reduced together);
//   (M) warp 0: r'r's total and tf_m (the quasi-minimal steps' scalars, convergence tests and
//       history), whose results for the x steps its lane 0 copies aside (XStep); meanwhile every
//       warp forms its update units' r'rp sums (tf_dx's sum reads neither d nor x, only r after
//       (R) and rp), a warp's units reduced together (warp_sums_spread);
//   (X) warp 0: r'rp's total and tf_rho (b, the next rho); meanwhile every warp takes the d and
//       x steps with tf_m's scalars from the copy (tf_rho changes the state under them);
//   (U) u = r + b q, q = q + b p, p = u + b q;
//   (V) v = K p and the units' v'rp sums;
//   (S) warp 0: tf_s (a).
// The logic runs once per block on its one copy of the state in shared memory, two of its three
// steps behind the other warps' work. The version before ran it in every warp on a copy per warp
// (five barriers an iteration, but the step totals and the logic 32 times per multiprocessor):
// the small CG kernel's phase after its update sums fell from 5.35 to 1.05 us per iteration on
// an H100 when it made the same change (docs/bench/issue26.md). Built with --fmad=false like
// la_kernels.cu.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernel_preload.hpp"
#include "la/cuda/small_rule.hpp"
#include "la/cuda/small_steps.cuh"
#include "la/cuda/tf_small.hpp"
#include "la/kernel_math.hpp"
#include "la/ksp_logic.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::cuda {
namespace {

namespace m = la_math;
namespace logic = ksp_logic;
using namespace small_steps;  // NOLINT: the shared pieces of the small kernels

constexpr int kThreads = 1024;
constexpr int kMaxUnitsPerWarp = 4;  // x, u and q of 4 units of 32 elements per warp
constexpr std::int64_t kMaxRows = kThreads / 32 * kMaxUnitsPerWarp * 32;

struct TfArgs {
  LaTfBlockArgs a;
  Geometry g;  // tiles: the stencil products'; chunks: the fused steps'
};

/// What the d and x steps read of the state after tf_m (fused_elem<tf_dx>'s scalars and
/// tf_steps), copied by warp 0 before tf_rho changes the state.
struct XStep {
  int stop;   // tf_m's: 2 ends the block before the x steps
  int steps;  // quasi-minimal steps applied to x (tf_steps)
  double e0, c0, e1, c1;
};

/// A stencil product of the block over the units d0..d1 (lane `lane`'s points): `y = l (c A in)`
/// with in(j) = xs x[j], each point's value handed to `epilogue(i, value)`, which returns its
/// term of the product's sum; each unit's sum goes to S[unit]. stencil_kernel's arithmetic. The
/// units go two at a time through one copy of the code (a rolled loop), their sums reduced
/// together (warp_sums_spread: unit u + lane / 16's total in each lane; a unit past d1 sums
/// zeros, unpublished).
template <LaStencilKind K, class Epilogue>
__device__ void product(const Geometry& g, const LaMatvecArgs& mv, const double* x, unsigned d0,
                        unsigned d1, int lane, double* S, const Epilogue& epilogue) {
  const LaStencil& s = mv.A.stencil;
  const double xs = mv.x_scale, rc = mv.right.c, lc = mv.left.c;
  const auto in = [&](int j) { return xs * x[j]; };
  for (unsigned u = d0; u < d1; u += 2) {
    double acc[2] = {0, 0};
    const int units = d1 - u < 2 ? 1 : 2;  // the same in every lane
#pragma unroll 1
    for (int h = 0; h < units; ++h) {
      const unsigned uh = u + static_cast<unsigned>(h);
      const Origin o = tile_origin(g, uh / kStepWarps);
      const int T = static_cast<int>(uh % kStepWarps) * 32 + lane;
      // Row by row: stencil_kernel forms both rows' products before their epilogues, but no
      // epilogue writes what a product reads, so the values and the sum's order are the same.
      double sum = 0;
#pragma unroll(K == LaStencilKind::d3p27 ? 1 : kRows)
      for (int r = 0; r < kRows; ++r) {
        const Point q = tile_point(g, o, T, r);
        if (q.i < 0) continue;
        const double v = rc * (s.neighbor * m::stencil_neighbors<K>(s, in, q.ix, q.iy, q.iz, q.i,
                                                                    g.nx, g.nx * g.ny) +
                               s.center * in(q.i));
        sum += epilogue(q.i, lc * v);
      }
      if (h == 0) {
        acc[0] = sum;
      } else {
        acc[1] = sum;
      }
    }
    const double total = warp_sums_spread(acc);
    const unsigned uh = u + static_cast<unsigned>(spread_sum_of(lane, 2));
    if (uh < d1 && lane % 16 == 0) S[uh] = total;
  }
}

template <LaStencilKind K, int UPW>
__global__ void __launch_bounds__(kThreads, 1) tf_small_kernel(const __grid_constant__ TfArgs ta) {
  stream_order_prologue();
  extern __shared__ double smem[];
  // The block's one copy of the state: warp 0's lane 0 runs the solver logic on it.
  __shared__ unsigned long long words[kWords];
  __shared__ XStep xstep;
  const Geometry& g = ta.g;
  const LaTfBlockArgs& a = ta.a;
  const int n = g.n;
  const int t = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  const int lane = t % 32;
  // t, r, p, v, rp and d in shared memory, then the units' sums of the three reductions.
  double* const T = smem;
  double* const R = T + n;
  double* const P = R + n;
  double* const V = P + n;
  double* const RP = V + n;
  double* const D = RP + n;
  double* const Sres = D + n;
  double* const Sdx = Sres + g.dir_units;
  double* const Sv = Sdx + g.upd_units;

  const auto* from = reinterpret_cast<const unsigned long long*>(a.v.sums.state);
  // Stopped before this block: every operation of it is a no-op. Every thread reads that, so
  // none reaches a barrier.
  if (reinterpret_cast<const LaKspState*>(from)->stop != 0) {
    if (t < 32) {
      store_state(a.mirror, from, lane, 32);
      if (lane == 0 && a.running != nullptr) *a.running = 0;
    }
    return;
  }
  for (int k = t; k < kWords; k += threads) words[k] = from[k];
  LaKspState& st = *reinterpret_cast<LaKspState*>(words);
  const unsigned warps = static_cast<unsigned>(threads / 32);
  const unsigned pw = static_cast<unsigned>(t / 32);
  const unsigned d0 = first_of(g.dir_units, warps, pw), d1 = first_of(g.dir_units, warps, pw + 1);
  const unsigned u0 = first_of(g.upd_units, warps, pw), u1 = first_of(g.upd_units, warps, pw + 1);
  const auto element = [&](int k) {
    const unsigned u = u0 + static_cast<unsigned>(k);
    return u < u1 ? update_element(g, u, lane) : n;
  };
  double x[UPW], uu[UPW], q[UPW];
  for (int k = 0; k < UPW; ++k) {
    x[k] = uu[k] = q[k] = 0;
    if (const int j = element(k); j < n) {
      x[k] = a.dx.x[j];
      uu[k] = a.qt.u[j];
      q[k] = a.qt.q[j];
    }
  }
  for (int j = t; j < n; j += threads) {
    T[j] = a.qt.t[j];
    R[j] = a.residual.y[j];
    P[j] = a.uqp.p[j];
    V[j] = a.qt.v[j];
    RP[j] = a.dx.rp[j];
    D[j] = a.dx.d[j];
  }
  __syncthreads();

  for (int it = 0; it < a.iterations; ++it) {
    // (Q) q = u - a v, t = u + q (fused_elem<tf_qt>)
    const double al = st.a;
    for (int k = 0; k < UPW; ++k) {
      if (const int j = element(k); j < n) {
        const double qq = uu[k] - al * V[j];
        q[k] = qq;
        T[j] = uu[k] + qq;
      }
    }
    __syncthreads();
    // (R) r -= a K t with r'r's unit sums (stencil_kernel, LaEpilogue::residual)
    product<K>(g, a.residual, T, d0, d1, lane, Sres, [&](int i, double v) {
      const double r = R[i] - al * v;
      R[i] = r;
      return r * r;
    });
    __syncthreads();
    // (M) tf_m in warp 0; r'rp's unit sums (fused_kernel<tf_dx>'s) in every warp
    if (t < 32) {
      finish_in_warp0<1>(Sres, g.tiles, LaFinalize::tf_m, st, t);
      if (t == 0) xstep = {st.stop, logic::tf_steps(&st, 2), st.eta0, st.cf0, st.eta1, st.cf1};
    }
    {
      double acc[UPW];
      for (int k = 0; k < UPW; ++k) {
        acc[k] = 0;
        if (const int j = element(k); j < n) acc[k] += R[j] * RP[j];
      }
      // A lane holds unit u0 + spread_sum_of(lane, UPW)'s total (a unit past u1 sums zeros,
      // unpublished); the first lane of each holds publishes it.
      const double total = warp_sums_spread(acc);
      const unsigned u = u0 + static_cast<unsigned>(spread_sum_of(lane, UPW));
      if (u < u1 && lane % (32 / UPW) == 0) Sdx[u] = total;
    }
    __syncthreads();
    const XStep xs = xstep;
    if (xs.stop == 2) break;  // tf_dx runs while stop is 0 or 1 (its quasi-minimal steps)
    // (X) tf_rho in warp 0; the d and x steps (fused_elem<tf_dx>) in every warp
    if (t < 32) finish_in_warp0<1>(Sdx, g.chunks, LaFinalize::tf_rho, st, t);
    for (int k = 0; k < UPW; ++k) {
      if (const int j = element(k); j < n) {
        double dd = uu[k] + xs.c0 * D[j];
        double xx = x[k] + xs.e0 * dd;
        if (xs.steps > 1) {
          dd = q[k] + xs.c1 * dd;
          xx = xx + xs.e1 * dd;
        }
        D[j] = dd;
        x[k] = xx;
      }
    }
    __syncthreads();
    if (st.stop != 0) break;
    // (U) u = r + b q, q = q + b p, p = u + b q (fused_elem<tf_uqp>)
    const double b = st.b;
    for (int k = 0; k < UPW; ++k) {
      if (const int j = element(k); j < n) {
        const double un = R[j] + b * q[k];
        const double qn = q[k] + b * P[j];
        uu[k] = un;
        q[k] = qn;
        P[j] = un + b * qn;
      }
    }
    __syncthreads();
    // (V) v = K p with v'rp's unit sums (stencil_kernel, LaEpilogue::store_dot)
    product<K>(g, a.v, P, d0, d1, lane, Sv, [&](int i, double v) {
      V[i] = v;
      return v * RP[i];
    });
    __syncthreads();
    // (S) tf_s in warp 0, then a block barrier hands `a` to the block
    if (!finish_block<1>(Sv, g.tiles, LaFinalize::tf_s, st, t)) break;
  }

  // Every vector as the operations launched one by one leave it, each element by its owner.
  for (int k = 0; k < UPW; ++k) {
    if (const int j = element(k); j < n) {
      a.dx.x[j] = x[k];
      a.dx.d[j] = D[j];
      a.qt.u[j] = uu[k];
      a.qt.q[j] = q[k];
      a.qt.t[j] = T[j];
      a.residual.y[j] = R[j];
      a.uqp.p[j] = P[j];
      a.qt.v[j] = V[j];
    }
  }
  if (t < 32) {
    store_state(a.v.sums.state, words, lane, 32);
    store_state(a.mirror, words, lane, 32);  // pinned host memory, or null
    if (lane == 0 && a.running != nullptr) *a.running = st.stop == 0 ? 1 : 0;
  }
}

using Kernel = void (*)(TfArgs);

template <int UPW>
Kernel kernel_for(LaStencilKind kind) {
  return m::with_stencil_kind(
      kind, [](auto k) -> Kernel { return tf_small_kernel<decltype(k)::value, UPW>; });
}

/// Whether `s` is the state's scalar at byte `offset` of `st`, read as is.
bool is_state_scalar(const LaScalar& s, const LaKspState* st, std::size_t offset) {
  return s.num == reinterpret_cast<const double*>(reinterpret_cast<const char*>(st) + offset) &&
         s.den == nullptr && s.factor == 1.0;
}

/// Why `a` does not fit the kernel, or empty.
std::string misfit(const LaTfBlockArgs& a, const TfSmallSteps& steps) {
  const LaMatvecArgs &res = a.residual, &v = a.v;
  const LaKspState* st = v.sums.state;
  const LaStencil& s = res.A.stencil;
  const std::int64_t rows = s.nx * s.ny * s.nz;
  if (!res.A.is_stencil || !v.A.is_stencil) return "not a matrix-free stencil";
  if (rows > kMaxRows) {
    return std::to_string(rows) + " points, more than " + std::to_string(kMaxRows);
  }
  if (v.A.stencil.kind != s.kind || v.A.stencil.nx != s.nx || v.A.stencil.ny != s.ny ||
      v.A.stencil.nz != s.nz || v.A.stencil.center != s.center ||
      v.A.stencil.neighbor != s.neighbor) {
    return "the two products' stencils differ";
  }
  for (const LaMatvecArgs* mv : {&res, &v}) {
    if (mv->left.v != nullptr || mv->right.v != nullptr || mv->x2 != nullptr ||
        mv->x_out != nullptr) {
      return "a product with a vector scaling or a second input";
    }
  }
  if (res.epilogue != LaEpilogue::residual || v.epilogue != LaEpilogue::store_dot) {
    return "not TFQMR's products";
  }
  if (a.qt.op != LaFusedOp::tf_qt || a.dx.op != LaFusedOp::tf_dx || a.uqp.op != LaFusedOp::tf_uqp) {
    return "not TFQMR's steps";
  }
  if (res.x != a.qt.t || res.y != a.dx.r || res.y != a.uqp.r || v.x != a.uqp.p || v.y != a.qt.v ||
      v.z != a.dx.rp || a.dx.u != a.qt.u || a.uqp.u != a.qt.u || a.dx.q != a.qt.q ||
      a.uqp.q != a.qt.q || a.dx.n != static_cast<std::size_t>(rows)) {
    return "the operations' vectors are not one iteration's";
  }
  if (st == nullptr || res.sums.state != st || a.qt.sums.state != st || a.dx.sums.state != st ||
      a.uqp.sums.state != st || res.sums.finalize != LaFinalize::tf_m ||
      a.dx.sums.finalize != LaFinalize::tf_rho || v.sums.finalize != LaFinalize::tf_s) {
    return "not on one async state";
  }
  using S = LaKspState;
  if (!is_state_scalar(a.qt.s[0], st, offsetof(S, a)) ||
      !is_state_scalar(res.a, st, offsetof(S, a)) ||
      !is_state_scalar(a.dx.s[0], st, offsetof(S, eta0)) ||
      !is_state_scalar(a.dx.s[1], st, offsetof(S, cf0)) ||
      !is_state_scalar(a.dx.s[2], st, offsetof(S, eta1)) ||
      !is_state_scalar(a.dx.s[3], st, offsetof(S, cf1)) ||
      !is_state_scalar(a.uqp.s[0], st, offsetof(S, b))) {
    return "a scalar not read from the state";
  }
  if (steps.residual_blocks != steps.tiles || steps.v_blocks != steps.tiles ||
      steps.dx_blocks != steps.chunks) {
    return "the operations' blocks take more than one tile or chunk each";
  }
  return {};
}

// Every kernel of this file, loaded ahead where one process drives several GPUs
// (backends/cuda/kernel_preload.hpp).
SLUICE_CUDA_KERNEL_FILE(tf_small_kernel<LaStencilKind::d2p5, 1>);

}  // namespace

bool tf_small_block(const LaTfBlockArgs& args, const TfSmallSteps& steps, int device,
                    CUstream_st* stream, const OpInfo& op) {
  // Read at every block (tests change it); a bad word is an Error before anything is issued.
  const TfMode mode = tf_mode_from(std::getenv("SLUICE_CUDA_TF_SMALL"), op);
  const bool require = mode.require;
  const LaStencil& rs = args.residual.A.stencil;
  if (!tf_small_wanted(mode, rs.kind, rs.nx * rs.ny * rs.nz)) return false;  // off, or the rule
  std::string why = misfit(args, steps);
  const DeviceLimits d = limits_of(device, op);
  if (why.empty() && d.major < 9) why = "the device is older than sm_90";
  Geometry g;
  const LaStencil& s = args.residual.A.stencil;
  g.nx = static_cast<int>(s.nx);
  g.ny = static_cast<int>(s.ny);
  g.nz = static_cast<int>(s.nz);
  g.n = static_cast<int>(s.nx * s.ny * s.nz);
  g.width = steps.tile_width;
  g.wshift = log2_if_pow2(steps.tile_width);
  g.height = steps.tile_height;
  g.depth = 1;
  g.tx = steps.tiles_x;
  g.ty = steps.tiles_y;
  g.tiles = steps.tiles;
  g.chunks = static_cast<unsigned>(steps.chunks);
  g.dir_units = g.tiles * kStepWarps;
  g.upd_units = g.chunks * kStepWarps;
  const unsigned upw = (g.upd_units + kThreads / 32 - 1) / (kThreads / 32);
  const std::size_t bytes =
      sizeof(double) * (6 * static_cast<std::size_t>(g.n) + 2 * g.dir_units + g.upd_units);
  const Kernel kernel = upw <= 1   ? kernel_for<1>(s.kind)
                        : upw <= 2 ? kernel_for<2>(s.kind)
                                   : kernel_for<4>(s.kind);
  if (why.empty() && bytes > prepare_kernel(reinterpret_cast<const void*>(kernel), device, d, op)) {
    why = std::to_string(bytes) + " bytes of shared memory";
  }
  if (!why.empty()) {
    if (require) {
      throw Error(Errc::invalid_state,
                  "cuda: the small TFQMR kernel does not take this block (SLUICE_CUDA_TF_SMALL "
                  "contains 'require'): " +
                      why,
                  op.where);
    }
    return false;
  }
  TfArgs ta;
  ta.a = args;
  ta.g = g;
  cudaLaunchAttribute pdl{};
  pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl.val.programmaticStreamSerializationAllowed = 1;
  static const bool use_pdl = [] {
    const char* v = std::getenv("SLUICE_CUDA_PDL");
    return v == nullptr || std::string(v) != "0";
  }();
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(1);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = bytes;
  config.stream = stream;
  config.attrs = use_pdl ? &pdl : nullptr;
  config.numAttrs = use_pdl ? 1 : 0;
  check(cudaLaunchKernelEx(&config, kernel, ta), "cudaLaunchKernelEx", op.where);
  check(cudaGetLastError(), "kernel launch", op.where);
  return true;
}

}  // namespace sluice::detail::cuda
