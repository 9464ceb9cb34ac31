#pragma once
// Mat's shared state, and host-side CSR assembly.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "la/la_common.hpp"

namespace sluice {
namespace la {

struct Mat::Impl {
  explicit Impl(Context c) : ctx(std::move(c)) {}
  Context ctx;
  std::int64_t rows = 0, cols = 0, nnz = 0;
  bool is_stencil = false;
  Stencil kind = Stencil::d2p5;
  detail::LaStencil stencil;
  DeviceBuffer<std::int32_t> row_ptr, col;
  DeviceBuffer<double> val;
  std::shared_ptr<void> prepared;  // the backend's data for this matrix (LaKernels::prepare)

  /// The operator for a kernel, its arrays marked as read in `acc`.
  [[nodiscard]] detail::LaOperator op(detail::AccessList& acc) const;
};

}  // namespace la

namespace detail::la {

using sluice::la::Mat;
using sluice::la::Triplet;

/// CSR on the host, rows sorted by column, no duplicates.
struct HostCsr {
  std::int64_t rows = 0, cols = 0;
  std::vector<std::int32_t> row_ptr{0}, col;
  std::vector<double> val;

  /// Appends one row given as unsorted (col, value) pairs, summing repeated columns.
  void add_row(std::vector<std::pair<std::int64_t, double>>& entries, std::source_location loc);
};

/// Uploads `csr` on ctx as a Mat (waits for the upload).
[[nodiscard]] std::shared_ptr<Mat::Impl> make_csr(const Context& ctx, HostCsr csr,
                                                  std::source_location loc);

/// CSR from triplets (duplicates summed); throws for an index out of range.
[[nodiscard]] HostCsr csr_from_triplets(std::int64_t rows, std::int64_t cols,
                                        std::span<const Triplet> entries, std::source_location loc);

/// Reads a Matrix Market file into host CSR; throws Error naming the file and line.
[[nodiscard]] HostCsr read_matrix_market(const std::string& path, std::source_location loc);

}  // namespace detail::la
}  // namespace sluice
