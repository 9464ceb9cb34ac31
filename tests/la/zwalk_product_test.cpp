// CG's direction product on 3D stencils (p_new = xs z + b p; w = A p_new; p_new'w) as the cuda
// backend's z walk (src/la/cuda/zwalk.cuh) and as its plain kernel (SLUICE_CUDA_ZWALK=on and
// off): p_new and w bit for bit the same, and both (and the dot) the host reference's within
// rounding, on every shape the walk can pick (tiles cut by the grid's edges, chunks cut by its
// last plane, grids smaller than a tile, planes of more tiles than the grid has blocks) and on
// the dist layer's forms (open ends reading ghost planes, one-plane boundary passes, spare
// multiprocessors). Then CG with the walk on: sync, async and graph modes bit for bit. On the
// host backend (no walk) the same products and solves are checked against the reference.

#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/context_impl.hpp"
#include "deps/issue.hpp"
#include "ksp_test_fixture.hpp"
#include "scoped_env.hpp"
#include "sluice/ext/la_kernels.hpp"

namespace sluice::test {
namespace {

using detail::LaEpilogue;
using detail::LaMatvecArgs;
using detail::LaStencil;
using detail::LaStencilKind;

using sluice::test::ScopedEnv;

struct Shape {
  LaStencilKind kind;
  std::int64_t nx, ny, nz;
  bool open_lo = false, open_hi = false;
  int spare_sms = 0;
};

std::string label(const Shape& s) {
  return std::string(s.kind == LaStencilKind::d3p7 ? "3d7 " : "3d27 ") + std::to_string(s.nx) +
         "x" + std::to_string(s.ny) + "x" + std::to_string(s.nz) + (s.open_lo ? " open_lo" : "") +
         (s.open_hi ? " open_hi" : "") +
         (s.spare_sms > 0 ? " spare " + std::to_string(s.spare_sms) : "");
}

constexpr double kXs = 0.75, kBeta = -0.625, kRc = 1.25, kCenter = 6.5, kNeighbor = -1.0;
constexpr double kSentinel = 12345.0;  // the outputs' ghost planes: never written

/// The product's outputs over the grid with a ghost plane on each side (the inputs' layout).
struct Outputs {
  std::vector<double> p_new, w;
  double dot = 0;
};

/// The host's reference, row by row (the terms in kernel_math's order; the dot in row order).
Outputs reference(const Shape& s, const std::vector<double>& z, const std::vector<double>& p) {
  const std::int64_t P = s.nx * s.ny, n = P * (s.nz + 2);
  Outputs out{std::vector<double>(static_cast<std::size_t>(n), kSentinel),
              std::vector<double>(static_cast<std::size_t>(n), kSentinel), 0};
  const auto in = [&](std::int64_t x, std::int64_t y, std::int64_t k) {
    const auto j = static_cast<std::size_t>(P + x + s.nx * y + P * k);
    return kXs * z[j] + kBeta * p[j];
  };
  const std::int64_t zlo = s.open_lo ? -1 : 0, zhi = s.open_hi ? s.nz + 1 : s.nz;
  for (std::int64_t k = 0; k < s.nz; ++k) {
    for (std::int64_t y = 0; y < s.ny; ++y) {
      for (std::int64_t x = 0; x < s.nx; ++x) {
        double a = 0;
        if (s.kind == LaStencilKind::d3p7) {
          if (k > zlo) a += in(x, y, k - 1);
          if (y > 0) a += in(x, y - 1, k);
          if (x > 0) a += in(x - 1, y, k);
          if (x + 1 < s.nx) a += in(x + 1, y, k);
          if (y + 1 < s.ny) a += in(x, y + 1, k);
          if (k + 1 < zhi) a += in(x, y, k + 1);
        } else {
          for (int dz = -1; dz <= 1; ++dz) {
            if (k + dz < zlo || k + dz >= zhi) continue;
            for (int dy = -1; dy <= 1; ++dy) {
              if (y + dy < 0 || y + dy >= s.ny) continue;
              if (x > 0) a += in(x - 1, y + dy, k + dz);
              if (dz != 0 || dy != 0) a += in(x, y + dy, k + dz);
              if (x + 1 < s.nx) a += in(x + 1, y + dy, k + dz);
            }
          }
        }
        const double c = in(x, y, k);
        const double v = kRc * (kNeighbor * a + kCenter * c);
        const auto i = static_cast<std::size_t>(P + x + s.nx * y + P * k);
        out.p_new[i] = c;
        out.w[i] = v;
        out.dot += v * c;
      }
    }
  }
  return out;
}

/// One direction product through the backend's LaKernels, as la's CG (and the dist layer's
/// passes, on a rank's planes between its ghost planes) issues it.
Outputs product(const Context& ctx, const Shape& s, const std::vector<double>& hz,
                const std::vector<double>& hp) {
  using namespace sluice::detail;  // la's kernel argument types
  const auto P = static_cast<std::size_t>(s.nx * s.ny);
  const std::vector<double> sentinel(hz.size(), kSentinel);
  sluice::la::Vec z(ctx, hz), p(ctx, hp), p_new(ctx, sentinel), w(ctx, sentinel), dot(ctx, 1);
  AccessList acc;
  LaMatvecArgs m;
  m.A.is_stencil = true;
  m.A.stencil.kind = s.kind;
  m.A.stencil.open_lo = s.open_lo;
  m.A.stencil.open_hi = s.open_hi;
  m.A.stencil.nx = s.nx;
  m.A.stencil.ny = s.ny;
  m.A.stencil.nz = s.nz;
  m.A.stencil.center = kCenter;
  m.A.stencil.neighbor = kNeighbor;
  m.x = acc.read(z) + P;
  m.x_scale = kXs;
  m.x2 = acc.read(p) + P;
  m.x2_scale.value = kBeta;
  m.x_out = acc.write(p_new) + P;
  m.right.c = kRc;
  m.epilogue = LaEpilogue::store_dot;
  m.y = acc.write(w) + P;
  m.z = m.x_out;
  m.sums.out = acc.write(dot);
  m.spare_sms = s.spare_sms;
  auto& k = ctx.impl().extension<LaKernels>(std::source_location::current());
  issue_tracked(ctx.impl(), acc, "direction product", std::source_location::current(),
                [&](Stream& st, const OpInfo& op) { k.matvec(st, m, op); });
  return {p_new.to_vector(), w.to_vector(), dot.to_vector()[0]};
}

/// What differs between `got` and the reference (empty: nothing): the ghost planes untouched,
/// elsewhere the values within rounding, the dot within the rounding of its terms' sum.
std::string mismatch(const Outputs& got, const Outputs& expect) {
  double scale = 0;
  for (std::size_t i = 0; i < expect.w.size(); ++i) {
    const bool ghost = expect.w[i] == kSentinel;
    if (ghost && (got.p_new[i] != kSentinel || got.w[i] != kSentinel)) {
      return "a ghost plane written at " + std::to_string(i);
    }
    if (ghost) continue;
    scale += std::abs(expect.w[i] * expect.p_new[i]);
    if (std::abs(got.p_new[i] - expect.p_new[i]) > 1e-15 * (1 + std::abs(expect.p_new[i])) ||
        std::abs(got.w[i] - expect.w[i]) > 1e-13 * (1 + std::abs(expect.w[i]))) {
      return "at " + std::to_string(i) + ": p_new " + std::to_string(got.p_new[i]) + " against " +
             std::to_string(expect.p_new[i]) + ", w " + std::to_string(got.w[i]) + " against " +
             std::to_string(expect.w[i]);
    }
  }
  if (std::abs(got.dot - expect.dot) > 1e-13 * (1 + scale)) {
    return "dot " + std::to_string(got.dot) + " against " + std::to_string(expect.dot);
  }
  return "";
}

class ZwalkProductTest : public KspTest {};

TEST_P(ZwalkProductTest, SameBitsWithAndWithoutTheWalk) {
  using K = LaStencilKind;
  std::vector<Shape> shapes;
  for (const K kind : {K::d3p7, K::d3p27}) {
    const Shape some[] = {
        {kind, 3, 5, 7},                  // smaller than a tile: one item
        {kind, 1, 1, 1},                  // one point
        {kind, 37, 21, 29},               // tiles cut by x and y; 3 chunks of 10 (H100), the last 9
        {kind, 70, 9, 41},                // a tile row cut by y; 5 chunks of 9, the last 5
        {kind, 200, 150, 23},             // 70 tiles, 2 chunks of 12, the last 11
        {kind, 33, 17, 8},                // one point past a tile in x and y; one chunk of 8
        {kind, 37, 21, 29, true},         // the dist layer's forms: a ghost plane below,
        {kind, 37, 21, 29, false, true},  // above,
        {kind, 64, 40, 19, true, true, 8},  // both, with multiprocessors left free;
        {kind, 45, 33, 1, true, true},      // a boundary pass: one plane between two ghosts
        {kind, 45, 33, 1, true, false},
        {kind, 45, 33, 2, false, true, 200},  // more spare than there are: one multiprocessor
    };
    shapes.insert(shapes.end(), std::begin(some), std::end(some));
  }
  // A plane of more tiles (665) than an H100's or H200's grid holds: blocks take several (not
  // under the sanitizers, host or compute-sanitizer: the same code at more cost).
  if (!under_host_sanitizer() && std::getenv("SLUICE_UNDER_SANITIZER") == nullptr) {
    shapes.push_back({K::d3p7, 1100, 300, 3});
  }
  auto ctx = make_context();
  std::mt19937_64 gen(29);
  std::uniform_real_distribution<double> dist(-1, 1);
  for (const auto& s : shapes) {
    // The host sanitizers (no walk there): the small shapes cover the same host code.
    if (under_host_sanitizer() && s.nx * s.ny * s.nz > 100'000) continue;
    SCOPED_TRACE(label(s));
    const auto n = static_cast<std::size_t>(s.nx * s.ny * (s.nz + 2));
    std::vector<double> hz(n), hp(n);
    for (auto& v : hz) v = dist(gen);
    for (auto& v : hp) v = dist(gen);
    const auto expect = reference(s, hz, hp);
    Outputs got[2];
    const char* modes[2] = {"off", "on"};
    const int runs = is_host() ? 1 : 2;  // the host has no walk: one run
    for (int m = 0; m < runs; ++m) {
      SCOPED_TRACE(std::string("SLUICE_CUDA_ZWALK=") + modes[m]);
      {
        ScopedEnv env("SLUICE_CUDA_ZWALK", modes[m]);
        got[m] = product(ctx, s, hz, hp);
      }
      EXPECT_EQ(mismatch(got[m], expect), "");
    }
    if (runs == 2) {
      // The walk changes where a point is formed, not how: the same bits (the dot is summed in
      // another order).
      EXPECT_EQ(got[1].p_new, got[0].p_new);
      EXPECT_EQ(got[1].w, got[0].w);
    }
  }
}

TEST_P(ZwalkProductTest, CgModesAgreeWithTheWalkOn) {
  // With the walk on, async CG runs its steps one by one (no cooperative block): sync, async
  // and graph modes give the same bits, and a solution whose true residual meets rtol.
  ScopedEnv env("SLUICE_CUDA_ZWALK", "on");
  auto ctx = make_context();
  struct Case {
    Stencil kind;
    std::int64_t nx, ny, nz;
  };
  const bool small = under_host_sanitizer();  // the same code paths at less cost
  const Case cases[] = {{Stencil::d3p7, 37, 21, small ? 9 : 29},
                        {Stencil::d3p27, 19, 13, small ? 9 : 17}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(to_string(c.kind)));
    auto A = Mat::stencil(ctx, c.kind, c.nx, c.ny, c.nz);
    const auto csr = ref::from_mat(Mat::stencil_csr(ctx, c.kind, c.nx, c.ny, c.nz));
    const auto n = static_cast<std::size_t>(A.rows());
    std::vector<double> hb(n);
    std::mt19937_64 gen(n);
    std::uniform_real_distribution<double> dist(-1, 1);
    for (auto& v : hb) v = dist(gen);
    Vec b(ctx, hb);
    KspOptions o{.rtol = 1e-8, .max_it = 400, .check_every = 4, .history = true};
    KspResult r[3];
    std::vector<double> x_of[3];
    for (int m = 0; m < modes(); ++m) {
      o.mode = kModes[m];
      Vec x(ctx, n);
      r[m] = Ksp(A, o).solve(b, x);
      x_of[m] = x.to_vector();
    }
    EXPECT_TRUE(r[0].converged()) << to_string(r[0].reason);
    for (int m = 1; m < modes(); ++m) {
      SCOPED_TRACE(to_string(kModes[m]));
      EXPECT_EQ(r[m].iterations, r[0].iterations);
      EXPECT_EQ(r[m].history, r[0].history);
      EXPECT_EQ(x_of[m], x_of[0]);
    }
    const auto ax = ref::mult(csr, x_of[0]);
    double res = 0, bb = 0;
    for (std::size_t i = 0; i < n; ++i) {
      res += (hb[i] - ax[i]) * (hb[i] - ax[i]);
      bb += hb[i] * hb[i];
    }
    EXPECT_LT(std::sqrt(res / bb), 1e-6);
  }
}

TEST_P(ZwalkProductTest, UnknownSwitchValueIsAnError) {
  if (is_host()) GTEST_SKIP() << "SLUICE_CUDA_ZWALK is the cuda backend's switch";
  ScopedEnv env("SLUICE_CUDA_ZWALK", "sometimes");
  auto ctx = make_context();
  try {
    (void)product(ctx, {LaStencilKind::d3p7, 8, 8, 8}, std::vector<double>(640, 1.0),
                  std::vector<double>(640, 1.0));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SLUICE_CUDA_ZWALK"), std::string::npos) << e.what();
  }
  ctx.synchronize();
}

SLUICE_INSTANTIATE_BACKENDS(ZwalkProductTest);

}  // namespace
}  // namespace sluice::test
