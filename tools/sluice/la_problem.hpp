#pragma once
// What `sluice solve` and `sluice bench` share: building a problem (a stencil or a Matrix Market
// file, its right-hand side), timing solves the way reference 000 §4.1 does, and the byte counts
// of one iteration of sluice's fused kernels.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sluice/la.hpp"

namespace sluice::cli {
using namespace sluice::la;  // NOLINT: the la layer is what these commands drive

struct Problem {
  Mat A;
  std::string description;  // e.g. "2d5 1024x1024 matrix-free" or the file name
  std::optional<Stencil> stencil;
  std::array<std::int64_t, 3> grid{0, 0, 0};
};

/// A stencil on an n^2 or n^3 grid, matrix-free or assembled.
[[nodiscard]] Problem stencil_problem(const Context& ctx, Stencil kind, std::int64_t n,
                                      bool matrix_free);
/// A Matrix Market file.
[[nodiscard]] Problem file_problem(const Context& ctx, const std::string& path);
/// Reads a right-hand side: whitespace-separated numbers, optionally a Matrix Market array
/// (banner, comments and the size line are skipped). Throws Error naming the file.
[[nodiscard]] std::vector<double> read_vector_file(const std::string& path, std::size_t n);

/// Seconds of one solve, end to end: the context idle before, and synchronized after
/// (reference 000, Listing 13).
struct Timing {
  std::vector<double> seconds;
  [[nodiscard]] double min() const;
  [[nodiscard]] double median() const;
};

/// Times one solve: `ctx` synchronized before the clock starts and before it stops.
double time_solve(Ksp& ksp, const Vec& b, Vec& x, const Context& ctx, KspResult& result);

/// Bytes one iteration of sluice's kernels reads and writes (each vector element read or written
/// once per kernel; neighbours of a stencil or CSR column gather counted once), the
/// "memory-bandwidth floor" of the goals divided by the bandwidth.
[[nodiscard]] double bytes_per_iteration(const Mat& A, KspType type, PcType pc);
/// Bytes a solve from a zero guess moves before its first iteration (its setup passes).
[[nodiscard]] double setup_bytes(const Mat& A, KspType type, PcType pc);

/// The grid size n that gives a stencil about `nnz` stored entries.
[[nodiscard]] std::int64_t grid_for_nnz(Stencil kind, double nnz);

}  // namespace sluice::cli
