// Mat: assembly from triplets and rows, Matrix Market input (good and malformed), matrix-free
// stencils against their assembled CSR, mult, multadd, diagonal.

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "backend_param.hpp"
#include "la/mat.hpp"
#include "la_reference.hpp"
#include "sluice/la.hpp"

namespace sluice::test {
namespace {

using namespace sluice::la;  // NOLINT: the layer under test

class MatTest : public BackendTest {
 protected:
  /// Writes `text` into a fresh file and returns its path.
  std::string write_file(const std::string& name, const std::string& text) {
    const auto dir = std::filesystem::temp_directory_path() / "sluice_mat_test";
    std::filesystem::create_directories(dir);
    const auto path = (dir / (name + "_" + GetParam() + ".mtx")).string();
    std::ofstream(path) << text;
    return path;
  }

  /// The message of the Error that reading `text` throws (fails the test if none).
  std::string mm_error(const std::string& name, const std::string& text) {
    auto ctx = make_context();
    const auto path = write_file(name, text);
    try {
      (void)Mat::read_matrix_market(ctx, path);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << "the message names no file: " << msg;
      return msg;
    }
    ADD_FAILURE() << name << ": no error";
    return {};
  }
};

TEST_P(MatTest, TripletsAreSortedAndDuplicatesSummed) {
  auto ctx = make_context();
  const std::vector<Triplet> t = {{2, 1, 5.0}, {0, 0, 1.0}, {0, 2, 2.0}, {2, 1, 0.5},
                                  {1, 1, 3.0}, {0, 0, 1.5}, {2, 2, -1.0}};
  auto A = Mat::from_triplets(ctx, 3, 3, t);
  EXPECT_EQ(A.rows(), 3);
  EXPECT_EQ(A.nnz(), 5);
  const auto h = A.to_host();
  EXPECT_EQ(h.row_ptr, (std::vector<std::int32_t>{0, 2, 3, 5}));
  EXPECT_EQ(h.col, (std::vector<std::int32_t>{0, 2, 1, 1, 2}));
  EXPECT_EQ(h.val, (std::vector<double>{2.5, 2.0, 3.0, 5.5, -1.0}));

  Vec x(ctx, std::vector<double>{1, 2, 3}), y(ctx, 3), z(ctx, 3), d(ctx, 3);
  mult(A, x, y);
  EXPECT_EQ(y.to_vector(), (std::vector<double>{8.5, 6.0, 8.0}));
  multadd(A, x, y, z);  // z = y + A x
  EXPECT_EQ(z.to_vector(), (std::vector<double>{17.0, 12.0, 16.0}));
  multadd(A, x, z, z);  // in place
  EXPECT_EQ(z.to_vector(), (std::vector<double>{25.5, 18.0, 24.0}));
  diagonal(A, d);
  EXPECT_EQ(d.to_vector(), (std::vector<double>{2.5, 3.0, -1.0}));

  EXPECT_THROW((void)Mat::from_triplets(ctx, 3, 3, std::vector<Triplet>{{3, 0, 1.0}}), Error);
  EXPECT_THROW(mult(A, x, x), Error);
  Vec four(ctx, 4);
  EXPECT_THROW(mult(A, four, y), Error);
}

TEST_P(MatTest, RowGeneratorBuildsCsr) {
  auto ctx = make_context();
  // A tridiagonal matrix, columns given out of order and with a duplicate.
  auto A = Mat::from_rows(ctx, 5, 5, [](std::int64_t r, const RowAdder& add) {
    if (r + 1 < 5) add(r + 1, -1.0);
    add(r, 1.0);
    if (r > 0) add(r - 1, -1.0);
    add(r, 1.0);
  });
  EXPECT_EQ(A.nnz(), 13);
  Vec x(ctx, std::vector<double>{1, 1, 1, 1, 1}), y(ctx, 5);
  mult(A, x, y);
  EXPECT_EQ(y.to_vector(), (std::vector<double>{1, 0, 0, 0, 1}));
}

TEST_P(MatTest, MatrixMarketVariantsAreRead) {
  auto ctx = make_context();
  auto general =
      Mat::read_matrix_market(ctx, write_file("general",
                                              "%%MatrixMarket matrix coordinate real general\n"
                                              "% a comment\n\n"
                                              "2 3 3\n1 1 1.5\n2 3 -2e1\n1 3 +4\n"));
  EXPECT_EQ(general.rows(), 2);
  EXPECT_EQ(general.cols(), 3);
  EXPECT_EQ(general.to_host().val, (std::vector<double>{1.5, 4.0, -20.0}));

  auto sym = Mat::read_matrix_market(
      ctx, write_file("symmetric",
                      "%%MatrixMarket matrix coordinate integer symmetric\r\n"
                      "3 3 4\r\n1 1 2\r\n2 1 -1\r\n3 2 -1\r\n3 3 2\r\n"));
  EXPECT_EQ(sym.nnz(), 6);
  const auto hs = sym.to_host();
  EXPECT_EQ(hs.row_ptr, (std::vector<std::int32_t>{0, 2, 4, 6}));
  EXPECT_EQ(hs.val, (std::vector<double>{2, -1, -1, -1, -1, 2}));

  auto pattern = Mat::read_matrix_market(
      ctx, write_file("pattern",
                      "%%MatrixMarket matrix coordinate pattern general\n2 2 2\n"
                      "1 2\n2 1\n"));
  EXPECT_EQ(pattern.to_host().val, (std::vector<double>{1.0, 1.0}));
}

TEST_P(MatTest, MalformedMatrixMarketNamesTheLine) {
  struct Case {
    const char* name;
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {"empty", "", "line 1: the file is empty"},
      {"banner", "%%MatrixMarket matrix coordinate real\n1 1 1\n1 1 1\n", "line 1:"},
      {"array", "%%MatrixMarket matrix array real general\n1 1\n1\n", "'array' format"},
      {"complex", "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n",
       "complex is not supported"},
      {"nosize", "%%MatrixMarket matrix coordinate real general\n% only comments\n",
       "before the size line"},
      {"badsize", "%%MatrixMarket matrix coordinate real general\n2 x 1\n1 1 1\n",
       "line 2: cols 'x' is not an integer"},
      {"short", "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 1\n2 2 1\n",
       "after 2 of the 3 entries"},
      {"long", "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n2 2 1\n",
       "line 4: more entries"},
      {"range", "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n",
       "line 3: entry (3, 1) is outside"},
      {"zero", "%%MatrixMarket matrix coordinate real general\n2 2 1\n0 1 1\n",
       "indices are 1-based"},
      {"value", "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 abc\n",
       "line 3: value 'abc' is not a number"},
      {"words", "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1\n",
       "line 3: an entry needs 3 words"},
      {"upper", "%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 2 1\n",
       "above the diagonal"},
      {"square", "%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n1 1 1\n",
       "must be square"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto msg = mm_error(c.name, c.text);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << msg;
  }
  auto ctx = make_context();
  EXPECT_THROW((void)Mat::read_matrix_market(ctx, "/nonexistent/file.mtx"), Error);
}

TEST_P(MatTest, StencilsMatchTheirAssembledCsr) {
  auto ctx = make_context();
  struct Grid {
    Stencil kind;
    std::int64_t nx, ny, nz;
  };
  const Grid grids[] = {{Stencil::d2p5, 37, 23, 1},
                        {Stencil::d2p9, 31, 19, 1},
                        {Stencil::d3p7, 13, 11, 7},
                        {Stencil::d3p27, 9, 8, 10},
                        {Stencil::d2p5, 1, 1, 1},
                        {Stencil::d3p27, 1, 5, 2},
                        {Stencil::d2p5, 400, 300, 1},
                        // Shapes for which a GPU's marching kernels split the marching dimension
                        // (y in 2D, z in 3D) into chunks of several steps: the chunk seams are
                        // where they could go wrong.
                        {Stencil::d2p5, 40, 5000, 1},
                        {Stencil::d3p7, 200, 150, 23},
                        {Stencil::d3p7, 70, 9, 40},
                        // A plane of more tiles than a GPU's group of tiles (135 tiles of
                        // 32 x 16 against 130, src/la/cuda/tile_walk.hpp): tiles taken group by
                        // group through the planes, the last group narrower.
                        {Stencil::d3p7, 130, 420, 3}};
  std::mt19937_64 gen(11);
  std::uniform_real_distribution<double> dist(-1, 1);
  for (const auto& g : grids) {
    // The large shapes are a device's tiling seams; the host's sanitizer runs keep the rest.
    if (under_host_sanitizer() && g.nx * g.ny * g.nz > 100'000) continue;
    SCOPED_TRACE(std::string(to_string(g.kind)) + " " + std::to_string(g.nx) + "x" +
                 std::to_string(g.ny) + "x" + std::to_string(g.nz));
    auto free = Mat::stencil(ctx, g.kind, g.nx, g.ny, g.nz);
    auto csr = Mat::stencil_csr(ctx, g.kind, g.nx, g.ny, g.nz);
    EXPECT_TRUE(free.is_matrix_free());
    EXPECT_FALSE(csr.is_matrix_free());
    EXPECT_EQ(free.nnz(), csr.nnz());
    const auto n = static_cast<std::size_t>(free.rows());
    std::vector<double> hx(n);
    for (auto& v : hx) v = dist(gen);
    Vec x(ctx, hx), y1(ctx, n), y2(ctx, n), d1(ctx, n), d2(ctx, n);
    mult(free, x, y1);
    mult(csr, x, y2);
    const auto r = ref::mult(ref::from_mat(csr), hx);
    const auto a = y1.to_vector(), b = y2.to_vector();
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(a[i], r[i], 1e-12) << i;
      ASSERT_NEAR(b[i], r[i], 1e-12) << i;
    }
    diagonal(free, d1);
    diagonal(csr, d2);
    EXPECT_EQ(d1.to_vector(), d2.to_vector());
    // Symmetric: x'A y == y'A x.
    std::vector<double> hy(n);
    for (auto& v : hy) v = dist(gen);
    Vec yv(ctx, hy), Ay(ctx, n);
    mult(free, yv, Ay);
    EXPECT_NEAR(dot(x, Ay), dot(yv, y1), 1e-10);
  }
  EXPECT_THROW((void)Mat::stencil(ctx, Stencil::d2p5, 0, 4), Error);
  EXPECT_THROW((void)Mat::stencil(ctx, Stencil::d2p5, 4, 4, 2), Error);
  EXPECT_EQ(parse_stencil("3d27"), Stencil::d3p27);
  EXPECT_THROW((void)parse_stencil("2d7"), Error);
}

TEST_P(MatTest, RealMatricesReadAndMultiply) {
  const std::filesystem::path dir = ref::matrix_dir();
  if (dir.empty() || !std::filesystem::exists(dir / "nos4.mtx")) {
    GTEST_SKIP() << "no test matrices at '" << dir.string()
                 << "': set SLUICE_MATRIX_DIR to a copy of ../shared/data/matrices";
  }
  auto ctx = make_context();
  struct Known {
    const char* name;
    std::int64_t rows, nnz;
  };
  const Known known[] = {
      {"bcsstk01", 48, 400},  {"nos4", 100, 594},       {"bcsstk03", 112, 640},
      {"mesh2e1", 306, 2018}, {"plat362", 362, 5786},   {"gr_30_30", 900, 7744},
      {"nos3", 960, 15844},   {"1138_bus", 1138, 4054}, {"bcsstk15", 3948, 117816}};
  for (const auto& k : known) {
    SCOPED_TRACE(k.name);
    auto A = Mat::read_matrix_market(ctx, (dir / (std::string(k.name) + ".mtx")).string());
    EXPECT_EQ(A.rows(), k.rows);
    EXPECT_EQ(A.nnz(), k.nnz);
    const auto n = static_cast<std::size_t>(A.rows());
    std::vector<double> ones(n, 1.0);
    Vec x(ctx, ones), y(ctx, n);
    mult(A, x, y);
    auto csr = ref::from_mat(A);
    const auto r = ref::mult(csr, ones);
    for (auto& v : csr.val) v = std::abs(v);
    // Rounding scales with the row's magnitude, not with its (possibly cancelled) sum: the device
    // sums in another order, so a row summing to ~0 may come out as exactly 0 there.
    const auto magnitude = ref::mult(csr, ones);
    const auto got = y.to_vector();
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(got[i], r[i], 1e-13 * (1 + magnitude[i])) << i;
    }
  }
}

// A stencil whose slowest dimension is open at an end reads the plane beyond it from memory
// beside its vectors (LaStencil::open_lo/hi: a distributed stencil's ghost planes): a block of
// middle planes, its vectors padded with the planes around it, gives exactly the rows of the
// whole grid's product, for every kind (the host's line loop and its per-row code, the cuda
// stencil kernel; CG's fused direction product with open ends runs in the dist GPU tests).
TEST_P(MatTest, OpenStencilEndsReadThePlanesBeside) {
  auto ctx = make_context();
  struct Case {
    Stencil s;
    std::int64_t nx, ny, nz;
  };
  for (const Case& c : {Case{Stencil::d2p5, 11, 9, 1}, Case{Stencil::d2p9, 7, 8, 1},
                        Case{Stencil::d3p7, 9, 6, 7}, Case{Stencil::d3p27, 5, 6, 6}}) {
    SCOPED_TRACE(std::string(to_string(c.s)));
    const bool three = stencil_is_3d(c.s);
    const std::int64_t planes = three ? c.nz : c.ny, P = three ? c.nx * c.ny : c.nx;
    const auto n = static_cast<std::size_t>(c.nx * c.ny * c.nz);
    std::vector<double> xv(n);
    for (std::size_t i = 0; i < n; ++i) xv[i] = 0.25 + static_cast<double>((i * 37) % 101) / 7.0;
    const Mat whole = Mat::stencil(ctx, c.s, c.nx, c.ny, c.nz);
    Vec x(ctx, xv), y(ctx, n);
    mult(whole, x, y);
    const auto want = y.to_vector();
    // Blocks [first, first + count) of planes: open where planes lie beyond them.
    for (auto [first, count] :
         {std::pair<std::int64_t, std::int64_t>{1, planes - 2}, {0, 1}, {planes - 1, 1}, {2, 3}}) {
      const bool lo = first > 0, hi = first + count < planes;
      auto impl = std::make_shared<Mat::Impl>(ctx);
      const Mat::Impl& base = *whole.impl();
      impl->rows = impl->cols = count * P;
      impl->is_stencil = true;
      impl->kind = base.kind;
      impl->stencil = base.stencil;
      impl->stencil.open_lo = lo;
      impl->stencil.open_hi = hi;
      (three ? impl->stencil.nz : impl->stencil.ny) = count;
      const Mat block(std::move(impl));
      const auto rows = static_cast<std::size_t>(count * P),
                 at = static_cast<std::size_t>(first * P);
      const std::size_t before = lo ? static_cast<std::size_t>(P) : 0,
                        after = hi ? static_cast<std::size_t>(P) : 0;
      // The block's input with the planes around it, as a distributed vector keeps them.
      Vec xb(ctx, rows, before, after), yb(ctx, rows);
      sluice::copy(ctx, std::span<double>(xb.buffer().data(), rows + before + after),
                   std::span<const double>(xv.data() + at - before, rows + before + after));
      mult(block, xb, yb);
      const auto got = yb.to_vector();
      for (std::size_t i = 0; i < rows; ++i) {
        ASSERT_EQ(got[i], want[at + i])
            << "planes [" << first << ", " << first + count << ") row " << i;
      }
    }
  }
}

SLUICE_INSTANTIATE_BACKENDS(MatTest);

}  // namespace
}  // namespace sluice::test
