// Distributed vectors and products against la on one context holding the whole problem (every
// process builds it): the same values, bit for bit where the arithmetic is the same row by row
// (stencils), within rounding where the row's sum is split (assembled matrices' ghost columns).

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "dist_test_util.hpp"
#include "sluice/dist.hpp"
#include "sluice/error.hpp"

namespace sluice::dist {
namespace {

using test::host_comm;
using test::local_counts;
using test::pattern;

/// This process's part of a whole vector: its local ranks' blocks, concatenated.
std::vector<double> local_part(const Vec& v) {
  std::vector<double> out;
  for (int l = 0; l < v.local_count(); ++l) {
    const auto b = v.local(l).to_vector();
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

std::vector<double> my_rows(const Comm& c, const Layout& layout, const std::vector<double>& whole) {
  const auto first = layout.start(c.rank(0));
  const auto last = layout.end(c.rank(c.local_size() - 1));
  return {whole.begin() + first, whole.begin() + last};
}

TEST(DistVec, LayoutSplitsAsPetsc) {
  const Layout l = Layout::split(3, 10);
  EXPECT_EQ(l.starts(), (std::vector<std::int64_t>{0, 4, 7, 10}));
  EXPECT_EQ(l.owner(3), 0);
  EXPECT_EQ(l.owner(4), 1);
  EXPECT_EQ(l.owner(9), 2);
  EXPECT_THROW((void)l.owner(10), Error);
  const Layout z = Layout::split(4, 2);  // ranks without rows
  EXPECT_EQ(z.owner(1), 1);
  EXPECT_EQ(z.local_size(3), 0);
}

TEST(DistVec, AssignGatherAndReductionsMatchTheHost) {
  for (int L : local_counts()) {
    Comm c = host_comm(L);
    const std::int64_t n = 1000 + 7 * c.size();
    const auto whole = pattern(static_cast<std::size_t>(n), 1.0);
    auto other = pattern(static_cast<std::size_t>(n), -2.0);
    Vec x(c, n), y(c, n);
    x.assign(whole);
    y.assign(other);
    EXPECT_EQ(x.to_vector(), whole);
    EXPECT_EQ(local_part(x), my_rows(c, x.layout(), whole));
    double dot_h = 0, n1 = 0, n2 = 0, ninf = 0, s = 0, mx = -1e300, mn = 1e300;
    for (std::size_t i = 0; i < whole.size(); ++i) {
      dot_h += whole[i] * other[i];
      n1 += std::abs(whole[i]);
      n2 += whole[i] * whole[i];
      ninf = std::max(ninf, std::abs(whole[i]));
      s += whole[i];
      mx = std::max(mx, whole[i]);
      mn = std::min(mn, whole[i]);
    }
    EXPECT_NEAR(dot(x, y), dot_h, 1e-12 * std::abs(dot_h));
    EXPECT_NEAR(norm(x, la::NormType::one), n1, 1e-12 * n1);
    EXPECT_NEAR(norm(x), std::sqrt(n2), 1e-12 * std::sqrt(n2));
    EXPECT_EQ(norm(x, la::NormType::infinity), ninf);
    EXPECT_NEAR(sum(x), s, 1e-12 * std::abs(s));
    EXPECT_EQ(max(x), mx);
    EXPECT_EQ(min(x), mn);
    // Element-wise, and an async dot whose value stays on every rank's device.
    axpy(y, 2.0, x);
    for (std::size_t i = 0; i < other.size(); ++i) other[i] += 2.0 * whole[i];
    EXPECT_EQ(y.to_vector(), other);
    std::vector<Managed<double>> d(static_cast<std::size_t>(L));
    dot(x, y, d);
    axpy(y, d, x);  // y += (x'y) x, with the device values
    double xy = 0;
    for (std::size_t i = 0; i < other.size(); ++i) xy += whole[i] * other[i];
    for (auto& v : d) EXPECT_NEAR(v.value(), xy, 1e-12 * std::abs(xy));
    const auto got = y.to_vector();
    for (std::size_t i = 0; i < other.size(); ++i) {
      EXPECT_NEAR(got[i], other[i] + xy * whole[i], 1e-11 * std::abs(xy * whole[i]) + 1e-12);
    }
  }
}

TEST(DistVec, MismatchedUseIsRefused) {
  Comm c = host_comm(1);
  Vec a(c, 100), b(c, 101);
  EXPECT_THROW(axpy(a, 1.0, b), Error);
  EXPECT_THROW(a.assign(std::vector<double>(99)), Error);
  Vec moved = std::move(a);
  EXPECT_THROW(set(a, 1.0), Error);  // NOLINT(bugprone-use-after-move): the point of the test
}

/// y = A x distributed against la's product of the whole operator.
void check_product(const Comm& c, const Mat& A, const la::Mat& whole, bool exact) {
  const auto n = static_cast<std::size_t>(whole.rows());
  const auto xv = pattern(n, 0.5);
  Vec x = A.create_vec(), y = A.create_vec();
  x.assign(xv);
  mult(A, x, y);
  const Context& ctx = whole.context();
  la::Vec xw(ctx, xv), yw(ctx, n);
  la::mult(whole, xw, yw);
  const auto want = my_rows(c, A.layout(), yw.to_vector());
  const auto got = local_part(y);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (exact) {
      ASSERT_EQ(got[i], want[i]) << "row " << i << " of this process";
    } else {
      ASSERT_NEAR(got[i], want[i], 1e-13 * (1 + std::abs(want[i]))) << "row " << i;
    }
  }
  // A vector made without ghost layers works too (through a copy).
  Vec plain(c, Layout::from_starts(A.layout().starts())), out = A.create_vec();
  plain.assign(xv);
  mult(A, plain, out);
  EXPECT_EQ(local_part(out), got);
}

TEST(DistMat, StencilProductsEqualOneContextsBitForBit) {
  Context ctx(Device{"host", 0});
  for (int L : local_counts()) {
    Comm c = host_comm(L);
    const std::int64_t planes = 3 * c.size() + 1;  // the interior overlaps the exchange
    struct Case {
      la::Stencil s;
      std::int64_t nx, ny, nz;
    };
    for (const Case& k :
         {Case{la::Stencil::d2p5, 9, planes, 1}, Case{la::Stencil::d2p9, 7, planes, 1},
          Case{la::Stencil::d3p7, 6, 5, planes}, Case{la::Stencil::d3p27, 5, 4, planes},
          Case{la::Stencil::d3p7, 4, 3, c.size()}}) {  // one plane each
      SCOPED_TRACE(std::string(la::to_string(k.s)) + " L=" + std::to_string(L));
      const Mat A = Mat::stencil(c, k.s, k.nx, k.ny, k.nz);
      EXPECT_TRUE(A.is_matrix_free());
      const la::Mat whole = la::Mat::stencil(ctx, k.s, k.nx, k.ny, k.nz);
      EXPECT_EQ(A.nnz(), whole.nnz());
      check_product(c, A, whole, true);
    }
  }
}

TEST(DistMat, AssembledProductsEqualOneContexts) {
  Context ctx(Device{"host", 0});
  for (int L : local_counts()) {
    Comm c = host_comm(L);
    for (auto s : {la::Stencil::d2p5, la::Stencil::d3p27}) {
      SCOPED_TRACE(std::string(la::to_string(s)) + " L=" + std::to_string(L));
      const bool three = la::stencil_is_3d(s);
      const Mat A = Mat::stencil_csr(c, s, 7, 6, three ? 5 : 1);
      EXPECT_FALSE(A.is_matrix_free());
      const la::Mat whole = la::Mat::stencil_csr(ctx, s, 7, 6, three ? 5 : 1);
      EXPECT_EQ(A.nnz(), whole.nnz());
      check_product(c, A, whole, false);
    }
    // Triplets given by any process for any row: each entry once, from the process it names.
    const std::int64_t n = 40;
    std::vector<la::Triplet> mine;
    for (std::int64_t i = 0; i < n; ++i) {
      if (i % c.processes() != Environment::process_rank()) continue;
      mine.push_back({i, i, 4.0});
      mine.push_back({i, (i * 7 + 3) % n, -1.0});
      mine.push_back({(i * 5 + 1) % n, i, 0.5});
    }
    std::vector<la::Triplet> all;
    for (std::int64_t i = 0; i < n; ++i) {
      all.push_back({i, i, 4.0});
      all.push_back({i, (i * 7 + 3) % n, -1.0});
      all.push_back({(i * 5 + 1) % n, i, 0.5});
    }
    check_product(c, Mat::from_triplets(c, n, mine), la::Mat::from_triplets(ctx, n, n, all), false);
    // A band with a few long couplings: each rank's ghost columns sit in a few runs of its rows
    // (some bridged over short gaps, some not), which its off-diagonal product visits alone.
    const std::int64_t nb = 1200;
    std::vector<la::Triplet> band, band_mine;
    for (std::int64_t i = 0; i < nb; ++i) {
      std::vector<la::Triplet> row{{i, i, 4.0}};
      if (i > 0) row.push_back({i, i - 1, -1.0});
      if (i + 1 < nb) row.push_back({i, i + 1, -1.0});
      if (i < 5) row.push_back({i, nb - 1 - i, 0.25});
      if (i >= 400 && i < 403) row.push_back({i, (i + 500) % nb, 0.5});
      if (i >= 1000 && i < 1002) row.push_back({i, i - 900, -0.75});
      band.insert(band.end(), row.begin(), row.end());
      if (i % c.processes() == Environment::process_rank()) {
        band_mine.insert(band_mine.end(), row.begin(), row.end());
      }
    }
    check_product(c, Mat::from_triplets(c, nb, band_mine),
                  la::Mat::from_triplets(ctx, nb, nb, band), false);
  }
}

TEST(DistMat, MatrixMarketIsReadOnceAndDistributed) {
  const std::filesystem::path dir = SLUICE_MATRIX_DIR;
  if (!std::filesystem::exists(dir / "nos4.mtx")) GTEST_SKIP() << "no test matrices at " << dir;
  Context ctx(Device{"host", 0});
  for (int L : local_counts()) {
    Comm c = host_comm(L);
    for (const char* name : {"nos4", "bcsstk01"}) {
      const std::string path = (dir / (std::string(name) + ".mtx")).string();
      const Mat A = Mat::read_matrix_market(c, path);
      const la::Mat whole = la::Mat::read_matrix_market(ctx, path);
      EXPECT_EQ(A.rows(), whole.rows());
      EXPECT_EQ(A.nnz(), whole.nnz());
      check_product(c, A, whole, false);
    }
  }
  Comm c = host_comm(1);
  try {
    (void)Mat::read_matrix_market(c, (dir / "missing.mtx").string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.mtx"), std::string::npos) << e.what();
  }
}

TEST(DistMat, TooManyRanksForTheGridIsRefused) {
  Comm c = host_comm(2);
  EXPECT_THROW((void)Mat::stencil(c, la::Stencil::d3p7, 4, 4, c.size() - 1), Error);
}

}  // namespace
}  // namespace sluice::dist
