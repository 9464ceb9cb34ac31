// The host's fused solver steps (src/la/host/fused.hpp), four elements at a time, against the
// per-element arithmetic of kernel_math.hpp (la_math::fused_elem): the same bits for every step,
// argument form (vector or constant preconditioner, z stored or not, norm type, tf_dx's steps)
// and chunk, with every instruction set the CPU runs (baseline x86-64 and AVX2), randomized.

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "la/host/fused.hpp"

namespace sluice::test {
namespace {

namespace m = detail::la_math;
using detail::LaFusedArgs;
using detail::LaFusedOp;
namespace h = detail::host;

std::vector<h::HostIsa> isas() {
  std::vector<h::HostIsa> v{h::HostIsa::baseline};
  if (h::host_cpu_has_avx2()) v.push_back(h::HostIsa::avx2);
  return v;
}

/// Element by element through fused_elem, the sums in the host's lanes (element k of the chunk
/// [lo, hi) in lane k % 4; lanes.hpp).
template <LaFusedOp Op>
void reference_chunk(const LaFusedArgs& f, const double* s, int steps, std::size_t lo,
                     std::size_t hi, double* acc) {
  double lane[4][m::kMaxSums] = {};
  for (std::size_t i = lo; i < hi; ++i) m::fused_elem<Op>(f, s, steps, i, lane[(i - lo) % 4]);
  for (int k = 0; k < m::kMaxSums; ++k)
    acc[k] = (lane[0][k] + lane[1][k]) + (lane[2][k] + lane[3][k]);
}

TEST(HostFusedSteps, SameBitsAsPerElementCode) {
  std::mt19937_64 rng(1818);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::uniform_real_distribution<double> value(-2.0, 2.0);
  const LaFusedOp ops[] = {LaFusedOp::rhs_norm, LaFusedOp::cg_init, LaFusedOp::cg_update,
                           LaFusedOp::tf_init,  LaFusedOp::tf_qt,   LaFusedOp::tf_dx,
                           LaFusedOp::tf_uqp,   LaFusedOp::unwind,  LaFusedOp::cg1_update};
  constexpr int kVectors = 12;  // x r z p w u q t d rp v b
  for (int trial = 0; trial < 400; ++trial) {
    const auto n = static_cast<std::size_t>(1 + pick(trial % 4 == 0 ? 3000 : 40));
    std::vector<std::vector<double>> init(kVectors, std::vector<double>(n));
    for (auto& v : init) {
      for (auto& e : v) e = value(rng);
      if (pick(4) == 0) v[0] = -0.0;  // signed zeros must survive as they did
    }
    std::vector<double> pc(n);
    for (auto& e : pc) e = value(rng);
    const LaFusedOp op = ops[pick(static_cast<int>(std::size(ops)))];
    const bool pc_vector = pick(2) == 0, has_z = pick(2) == 0, has_b = pick(2) == 0;
    const auto norm_type = static_cast<std::int32_t>(pick(3));
    const int steps = 1 + pick(2);
    const double s[4] = {value(rng), value(rng), value(rng), value(rng)};
    const std::size_t lo = pick(3) == 0 ? 0 : static_cast<std::size_t>(pick(static_cast<int>(n)));
    const std::size_t hi = lo + static_cast<std::size_t>(pick(static_cast<int>(n - lo) + 1));

    auto args = [&](std::vector<std::vector<double>>& v) {
      LaFusedArgs f;
      f.op = op;
      f.n = n;
      double** slots[] = {&f.x, &f.r, &f.z, &f.p, &f.w, &f.u, &f.q, &f.t, &f.d, &f.rp, &f.v};
      for (int k = 0; k < 11; ++k) *slots[k] = v[static_cast<std::size_t>(k)].data();
      if (!has_z) f.z = nullptr;
      f.b = has_b || op == LaFusedOp::rhs_norm ? v[11].data() : nullptr;
      if (pc_vector) {
        f.pc.v = pc.data();
      } else {
        f.pc.c = 0.25;
      }
      f.norm_type = norm_type;
      return f;
    };
    auto ref = init;
    double sums_ref[m::kMaxSums];
    m::with_fused_op(op, [&](auto o) {
      reference_chunk<decltype(o)::value>(args(ref), s, steps, lo, hi, sums_ref);
    });
    // Streaming stores (simd.hpp: put) need the vectors 16-byte aligned at `lo`, as a chunk of
    // 1024 elements of a 256-byte aligned buffer is.
    std::vector<std::pair<h::HostIsa, bool>> variants;
    for (const auto isa : isas()) {
      variants.emplace_back(isa, false);
      if (lo % 2 == 0) variants.emplace_back(isa, true);
    }
    for (const auto& [isa, stream] : variants) {
      auto mine = init;
      double sums[m::kMaxSums] = {0, 0, 0};
      m::with_fused_op(op, [&](auto o) {
        h::fused_chunk_for<decltype(o)::value>(isa, stream)(args(mine), s, steps, lo, hi, sums);
      });
      SCOPED_TRACE(testing::Message() << "trial " << trial << " isa " << h::host_isa_name(isa)
                                      << " stream " << stream << " op " << static_cast<int>(op)
                                      << " n " << n << " rows [" << lo << ", " << hi << ")");
      for (int k = 0; k < m::fused_sums(op); ++k) {
        ASSERT_EQ(std::bit_cast<std::uint64_t>(sums_ref[k]), std::bit_cast<std::uint64_t>(sums[k]))
            << "sum " << k;
      }
      for (int v = 0; v < kVectors; ++v) {
        for (std::size_t i = 0; i < n; ++i) {
          ASSERT_EQ(std::bit_cast<std::uint64_t>(ref[v][i]),
                    std::bit_cast<std::uint64_t>(mine[v][i]))
              << "vector " << v << " [" << i << "]";
        }
      }
    }
  }
}

}  // namespace
}  // namespace sluice::test
