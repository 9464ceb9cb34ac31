#include "la_problem.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sluice/error.hpp"

namespace sluice::cli {
using namespace sluice::la;  // NOLINT: the la layer is what these commands drive

Problem stencil_problem(const Context& ctx, Stencil kind, std::int64_t n, bool matrix_free) {
  const bool three = stencil_is_3d(kind);
  Problem p;
  p.stencil = kind;
  p.grid = {n, n, three ? n : 1};
  p.A = matrix_free ? Mat::stencil(ctx, kind, n, n, three ? n : 1)
                    : Mat::stencil_csr(ctx, kind, n, n, three ? n : 1);
  p.description = std::string(to_string(kind)) + " " + std::to_string(n) + "x" + std::to_string(n) +
                  (three ? "x" + std::to_string(n) : "") + (matrix_free ? " matrix-free" : " csr");
  return p;
}

Problem file_problem(const Context& ctx, const std::string& path) {
  Problem p;
  p.A = Mat::read_matrix_market(ctx, path);
  p.grid = {p.A.rows(), 1, 1};
  p.description = std::filesystem::path(path).filename().string() + " csr";
  return p;
}

std::vector<double> read_vector_file(const std::string& path, std::size_t n) {
  std::ifstream in(path);
  if (!in) throw Error(Errc::invalid_argument, "cannot open right-hand side file '" + path + "'");
  std::vector<double> values;
  std::string line;
  std::size_t line_no = 0;
  bool size_line_seen = false;
  bool banner = false;
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1 && line.rfind("%%MatrixMarket", 0) == 0) {
      banner = true;
      continue;
    }
    if (line.empty() || line[0] == '%') continue;
    std::istringstream words(line);
    if (banner && !size_line_seen) {
      size_line_seen = true;  // "rows cols" of a Matrix Market array
      continue;
    }
    std::string w;
    while (words >> w) {
      char* end = nullptr;
      const double v = std::strtod(w.c_str(), &end);
      if (end == w.c_str() || *end != '\0') {
        throw Error(Errc::invalid_argument, "right-hand side file '" + path + "', line " +
                                                std::to_string(line_no) + ": '" + w +
                                                "' is not a number");
      }
      values.push_back(v);
    }
  }
  if (values.size() != n) {
    throw Error(Errc::invalid_argument,
                "right-hand side file '" + path + "' has " + std::to_string(values.size()) +
                    " values; the matrix has " + std::to_string(n) + " rows");
  }
  return values;
}

double Timing::min() const {
  return seconds.empty() ? 0.0 : *std::min_element(seconds.begin(), seconds.end());
}

double Timing::median() const {
  if (seconds.empty()) return 0.0;
  auto s = seconds;
  std::sort(s.begin(), s.end());
  const auto m = s.size() / 2;
  return s.size() % 2 == 1 ? s[m] : 0.5 * (s[m - 1] + s[m]);
}

double time_solve(Ksp& ksp, const Vec& b, Vec& x, const Context& ctx, KspResult& result) {
  ctx.synchronize();
  const auto start = std::chrono::steady_clock::now();
  result = ksp.solve(b, x, ctx);
  ctx.synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double bytes_per_iteration(const Mat& A, KspType type, PcType pc) {
  const auto n = static_cast<double>(A.rows());
  // Vector elements moved per iteration by the fused kernels (see src/la/ksp.cpp):
  //   CG:    p = z + b p inside w = A p, with p'w (4), x += a p; r -= a w; z = B r with sums
  //          (6, and z stored where B is a vector: 7)
  //   TFQMR: q, t (4), r -= a K t (3), d and x steps with r'rp (8), u, q, p (6), v = K p (3)
  const bool z_stored = type == KspType::cg && pc == PcType::jacobi && !A.is_matrix_free();
  double vectors = type == KspType::cg ? (z_stored ? 11 : 10) : 24;
  double extra = 0;
  if (!A.is_matrix_free()) {
    // CSR: values and column indices once per product, row pointers once.
    const double matrix = static_cast<double>(A.nnz()) * 12.0 + (n + 1) * 4.0;
    extra += (type == KspType::cg ? 1 : 2) * matrix;
    if (pc == PcType::jacobi) vectors += type == KspType::cg ? 1 : 2;  // the inverse diagonal
  }
  return vectors * n * 8.0 + extra;
}

double setup_bytes(const Mat& A, KspType type, PcType pc) {
  const auto n = static_cast<double>(A.rows());
  // From a zero guess (src/la/ksp.cpp):
  //   CG:    one pass reading b and writing x = 0, r = b, p = 0 (4; z = B r stored and B read
  //          where B is a vector: 6)
  //   TFQMR: x = 0 (1), r = b (2), the init pass reading r and writing r, rp, u, p, d (6), and
  //          v = K p with v'rp (3, plus the matrix and B twice where they are stored)
  const bool vector_pc = pc == PcType::jacobi && !A.is_matrix_free();
  double vectors = type == KspType::cg ? 4 : 12;
  double extra = 0;
  if (vector_pc) vectors += 2;
  if (type == KspType::tfqmr && !A.is_matrix_free()) {
    extra += static_cast<double>(A.nnz()) * 12.0 + (n + 1) * 4.0;
  }
  return vectors * n * 8.0 + extra;
}

std::int64_t grid_for_nnz(Stencil kind, double nnz) {
  const double per_row = stencil_points(kind);
  const double points = nnz / per_row;
  const double n = stencil_is_3d(kind) ? std::cbrt(points) : std::sqrt(points);
  return std::max<std::int64_t>(2, static_cast<std::int64_t>(std::llround(n)));
}

}  // namespace sluice::cli
