// The host's line-at-a-time stencil products (src/la/host/stencil.hpp) against the
// per-row arithmetic of kernel_math.hpp: the same bits for every stencil, input form, epilogue,
// grid shape and row range (one chunk), with every instruction set the CPU runs (baseline x86-64
// and AVX2, src/la/host/simd.hpp), randomized.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "la/host/stencil.hpp"

namespace sluice::test {
namespace {

namespace m = detail::la_math;
using detail::LaEpilogue;
using detail::LaMatvecArgs;
using detail::LaStencil;
using detail::LaStencilKind;

/// Row by row through MatvecInput and stencil_row, the sum in the host's lanes (row k of the
/// chunk [lo, hi) in lane k % 4; lanes.hpp).
double reference_rows(const LaMatvecArgs& a, double scalar, std::size_t lo, std::size_t hi) {
  const auto in = m::input_of(a);
  const auto& s = a.A.stencil;
  double lane[4] = {0, 0, 0, 0};
  for (std::size_t i = lo; i < hi; ++i) {
    const auto j = static_cast<std::int64_t>(i);
    const double v = m::stencil_row(s, in, j % s.nx, (j / s.nx) % s.ny, j / (s.nx * s.ny), j);
    lane[(i - lo) % 4] += m::finish_row(a, in, v, scalar, i);
  }
  return (lane[0] + lane[1]) + (lane[2] + lane[3]);
}

double fixed_rows(const LaMatvecArgs& a, double scalar, std::size_t lo, std::size_t hi,
                  detail::host::HostIsa isa, bool stream) {
  return m::with_stencil_kind(a.A.stencil.kind, [&](auto kind) {
    return detail::host::with_fixed_input(a, [&](const auto& in) {
      return detail::host::stencil_rows<decltype(kind)::value>(a, in, scalar, lo, hi, isa, stream);
    });
  });
}

/// The instruction sets this CPU runs (simd.hpp): the baseline build always.
std::vector<detail::host::HostIsa> isas() {
  std::vector<detail::host::HostIsa> v{detail::host::HostIsa::baseline};
  if (detail::host::host_cpu_has_avx2()) v.push_back(detail::host::HostIsa::avx2);
  return v;
}

/// Each instruction set with regular stores, and with streaming stores where allowed.
std::vector<std::pair<detail::host::HostIsa, bool>> variants(bool can_stream) {
  std::vector<std::pair<detail::host::HostIsa, bool>> v;
  for (const auto isa : isas()) {
    v.emplace_back(isa, false);
    if (can_stream) v.emplace_back(isa, true);
  }
  return v;
}

TEST(HostStencilRows, SameBitsAsPerRowCode) {
  std::mt19937_64 rng(18);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::uniform_real_distribution<double> value(-2.0, 2.0);
  const LaStencilKind kinds[] = {LaStencilKind::d2p5, LaStencilKind::d2p9, LaStencilKind::d3p7,
                                 LaStencilKind::d3p27};
  const LaEpilogue epilogues[] = {LaEpilogue::store, LaEpilogue::add, LaEpilogue::sub,
                                  LaEpilogue::store_dot, LaEpilogue::residual};
  for (int trial = 0; trial < 250; ++trial) {
    LaStencil s;
    s.kind = kinds[pick(4)];
    const bool three = s.kind == LaStencilKind::d3p7 || s.kind == LaStencilKind::d3p27;
    // Lines longer than a piece (kPiece) too, and lines of one or two points.
    s.nx = 1 + pick(trial % 5 == 0 ? 1200 : 40);
    s.ny = 1 + pick(three ? 12 : 60);
    s.nz = three ? 1 + pick(12) : 1;
    s.center = 6;
    s.neighbor = -1;
    const auto n = static_cast<std::size_t>(s.nx * s.ny * s.nz);
    auto random_vector = [&] {
      std::vector<double> v(n);
      for (auto& e : v) e = value(rng);
      if (n > 0 && pick(4) == 0) v[0] = -0.0;  // signed zeros must survive as they did
      return v;
    };
    const auto x = random_vector(), x2 = random_vector(), right = random_vector(),
               left = random_vector(), z = random_vector(), y0 = random_vector();
    LaMatvecArgs a;
    a.A.is_stencil = true;
    a.A.stencil = s;
    a.x = x.data();
    a.x_scale = pick(2) == 0 ? 1.0 : 0.25;
    if (pick(2) == 0) {
      a.x2 = x2.data();
      a.x2_scale.value = value(rng);
    }
    if (pick(2) == 0) {
      a.right.v = right.data();
    } else {
      a.right.c = pick(2) == 0 ? 1.0 : 0.5;
    }
    if (pick(2) == 0) {
      a.left.v = left.data();
    } else {
      a.left.c = 1.0 / 6.0;
    }
    a.epilogue = epilogues[pick(5)];
    a.z = z.data();
    const bool out = pick(2) == 0;
    // CG's direction product reads the input it stores (z = x_out), through a register.
    const bool z_is_out = out && pick(3) == 0;
    const double scalar = value(rng);

    const std::size_t lo = pick(3) == 0 ? 0 : static_cast<std::size_t>(pick(static_cast<int>(n)));
    const std::size_t hi = lo + static_cast<std::size_t>(pick(static_cast<int>(n - lo) + 1));
    std::vector<double> y_ref = y0, y_new = y0, out_ref(n, 7.0), out_new(n, 7.0);
    a.y = y_ref.data();
    a.x_out = out ? out_ref.data() : nullptr;
    if (z_is_out) a.z = a.x_out;
    const double sum_ref = reference_rows(a, scalar, lo, hi);
    // Streaming stores (simd.hpp: put) need the streamed vectors 16-byte aligned at `lo`, as a
    // chunk of 1024 elements of a 256-byte aligned buffer is.
    const bool can_stream = lo % 2 == 0;
    for (const auto& [isa, stream] : variants(can_stream)) {
      y_new = y0;
      std::fill(out_new.begin(), out_new.end(), 7.0);
      a.y = y_new.data();
      a.x_out = out ? out_new.data() : nullptr;
      if (z_is_out) a.z = a.x_out;
      const double sum_new = fixed_rows(a, scalar, lo, hi, isa, stream);

      SCOPED_TRACE(testing::Message()
                   << "trial " << trial << " isa " << detail::host::host_isa_name(isa) << " stream "
                   << stream << " z_is_out " << z_is_out << " kind " << static_cast<int>(s.kind)
                   << " grid " << s.nx << "x" << s.ny << "x" << s.nz << " rows [" << lo << ", "
                   << hi << ")");
      ASSERT_EQ(std::bit_cast<std::uint64_t>(sum_ref), std::bit_cast<std::uint64_t>(sum_new));
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::bit_cast<std::uint64_t>(y_ref[i]), std::bit_cast<std::uint64_t>(y_new[i]))
            << "y[" << i << "]";
        ASSERT_EQ(std::bit_cast<std::uint64_t>(out_ref[i]),
                  std::bit_cast<std::uint64_t>(out_new[i]))
            << "x_out[" << i << "]";
      }
    }
  }
}

}  // namespace
}  // namespace sluice::test
