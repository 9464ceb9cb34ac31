// Mat: CSR assembly from triplets and row generators, matrix-free stencils, mult, multadd,
// diagonal (sluice/la.hpp).

#include "la/mat.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <limits>
#include <numeric>

#include "sluice/event.hpp"

namespace sluice {
namespace la {

using detail::AccessList;
using detail::issue_tracked;
using detail::LaEpilogue;
using detail::LaMatvecArgs;
using detail::LaOperator;
using detail::LaStencilKind;
using detail::la::check_device;
using detail::la::check_sizes;
using detail::la::check_vec;
using detail::la::kernels;

namespace {

constexpr std::int64_t kMaxIndex = std::numeric_limits<std::int32_t>::max();

const Mat::Impl& impl_of(const Mat& A, std::string_view what, std::source_location loc) {
  if (!A.valid()) {
    throw Error(Errc::invalid_state,
                std::string(what) +
                    ": the Mat is empty; build it with Mat::from_triplets, "
                    "from_rows, read_matrix_market or stencil",
                loc);
  }
  return *A.impl();
}

LaStencilKind la_kind(Stencil s) {
  switch (s) {
    case Stencil::d2p5:
      return LaStencilKind::d2p5;
    case Stencil::d2p9:
      return LaStencilKind::d2p9;
    case Stencil::d3p7:
      return LaStencilKind::d3p7;
    case Stencil::d3p27:
      return LaStencilKind::d3p27;
  }
  return LaStencilKind::d2p5;
}

/// The neighbour offsets of a stencil (the centre excluded).
std::vector<std::array<int, 3>> neighbours(Stencil s) {
  std::vector<std::array<int, 3>> out;
  const bool three = stencil_is_3d(s);
  const bool box = s == Stencil::d2p9 || s == Stencil::d3p27;
  for (int dz = three ? -1 : 0; dz <= (three ? 1 : 0); ++dz) {
    for (int dy = -1; dy <= 1; ++dy) {
      for (int dx = -1; dx <= 1; ++dx) {
        const int away = std::abs(dx) + std::abs(dy) + std::abs(dz);
        if (away == 0 || (!box && away > 1)) continue;
        out.push_back({dx, dy, dz});
      }
    }
  }
  return out;
}

void check_grid(Stencil kind, std::int64_t nx, std::int64_t ny, std::int64_t nz,
                std::source_location loc) {
  if (nx < 1 || ny < 1 || nz < 1 || (!stencil_is_3d(kind) && nz != 1)) {
    throw Error(Errc::invalid_argument,
                "stencil grid " + std::to_string(nx) + " x " + std::to_string(ny) + " x " +
                    std::to_string(nz) + " is invalid for " + std::string(to_string(kind)) +
                    ": every extent must be at least 1, and nz 1 for a 2D stencil",
                loc);
  }
  if (nx > kMaxIndex / ny || nx * ny > kMaxIndex / nz) {
    throw Error(Errc::invalid_argument,
                "stencil grid of " + std::to_string(nx) + " x " + std::to_string(ny) + " x " +
                    std::to_string(nz) + " points exceeds 2^31 - 1 rows",
                loc);
  }
}

std::int64_t stencil_nnz(Stencil kind, std::int64_t nx, std::int64_t ny, std::int64_t nz) {
  std::int64_t nnz = nx * ny * nz;
  for (const auto& d : neighbours(kind)) {
    nnz += std::max<std::int64_t>(0, nx - std::abs(d[0])) *
           std::max<std::int64_t>(0, ny - std::abs(d[1])) *
           std::max<std::int64_t>(0, nz - std::abs(d[2]));
  }
  return nnz;
}

}  // namespace

// ---- stencil names ------------------------------------------------------------------------------

Stencil parse_stencil(std::string_view name) {
  if (name == "2d5") return Stencil::d2p5;
  if (name == "2d9") return Stencil::d2p9;
  if (name == "3d7") return Stencil::d3p7;
  if (name == "3d27") return Stencil::d3p27;
  throw Error(Errc::invalid_argument,
              "unknown stencil '" + std::string(name) + "'; use 2d5, 2d9, 3d7 or 3d27");
}

std::string_view to_string(Stencil s) noexcept {
  switch (s) {
    case Stencil::d2p5:
      return "2d5";
    case Stencil::d2p9:
      return "2d9";
    case Stencil::d3p7:
      return "3d7";
    case Stencil::d3p27:
      return "3d27";
  }
  return "?";
}

int stencil_points(Stencil s) noexcept {
  switch (s) {
    case Stencil::d2p5:
      return 5;
    case Stencil::d2p9:
      return 9;
    case Stencil::d3p7:
      return 7;
    case Stencil::d3p27:
      return 27;
  }
  return 0;
}

bool stencil_is_3d(Stencil s) noexcept {
  return s == Stencil::d3p7 || s == Stencil::d3p27;
}

// ---- Impl and host CSR -------------------------------------------------------------------------

LaOperator Mat::Impl::op(AccessList& acc) const {
  LaOperator o;
  o.is_stencil = is_stencil;
  o.stencil = stencil;
  o.csr.rows = rows;
  o.csr.cols = cols;
  o.csr.nnz = nnz;
  o.csr.row_ptr = acc.read(row_ptr);
  o.csr.col = acc.read(col);
  o.csr.val = acc.read(val);
  o.csr.prepared = prepared.get();
  return o;
}

}  // namespace la
namespace detail::la {

void HostCsr::add_row(std::vector<std::pair<std::int64_t, double>>& entries,
                      std::source_location loc) {
  const auto row = static_cast<std::int64_t>(row_ptr.size()) - 1;
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const auto [c, v] = entries[k];
    if (c < 0 || c >= cols) {
      throw Error(Errc::invalid_argument,
                  "entry (" + std::to_string(row) + ", " + std::to_string(c) + ") is outside the " +
                      std::to_string(rows) + " x " + std::to_string(cols) +
                      " matrix (indices are 0-based)",
                  loc);
    }
    if (k > 0 && entries[k - 1].first == c) {
      val.back() += v;  // duplicates are summed, in the order given
      continue;
    }
    col.push_back(static_cast<std::int32_t>(c));
    val.push_back(v);
  }
  if (col.size() > static_cast<std::size_t>(sluice::la::kMaxIndex)) {
    throw Error(Errc::invalid_argument, "more than 2^31 - 1 stored entries: not supported", loc);
  }
  row_ptr.push_back(static_cast<std::int32_t>(col.size()));
  entries.clear();
}

std::shared_ptr<Mat::Impl> make_csr(const Context& ctx, HostCsr csr, std::source_location loc) {
  auto impl = std::make_shared<Mat::Impl>(ctx);
  impl->rows = csr.rows;
  impl->cols = csr.cols;
  impl->nnz = static_cast<std::int64_t>(csr.col.size());
  impl->row_ptr = DeviceBuffer<std::int32_t>(ctx, csr.row_ptr.size(), loc);
  impl->col = DeviceBuffer<std::int32_t>(ctx, csr.col.size(), loc);
  impl->val = DeviceBuffer<double>(ctx, csr.val.size(), loc);
  upload(ctx, impl->row_ptr, std::span<const std::int32_t>(csr.row_ptr), loc);
  upload(ctx, impl->col, std::span<const std::int32_t>(csr.col), loc);
  upload(ctx, impl->val, std::span<const double>(csr.val), loc);
  AccessList described;  // `prepare` describes the arrays to the backend; it issues no work
  impl->prepared = kernels(ctx, loc).prepare(impl->op(described).csr);
  return impl;
}

}  // namespace detail::la
namespace la {

// ---- construction ------------------------------------------------------------------------------

namespace {

void check_shape(std::int64_t rows, std::int64_t cols, std::source_location loc) {
  if (rows < 0 || cols < 0 || rows > kMaxIndex || cols > kMaxIndex) {
    throw Error(Errc::invalid_argument,
                "matrix of " + std::to_string(rows) + " x " + std::to_string(cols) +
                    " is invalid: sizes must lie in [0, 2^31 - 1]",
                loc);
  }
}

}  // namespace

}  // namespace la
namespace detail::la {

HostCsr csr_from_triplets(std::int64_t rows, std::int64_t cols, std::span<const Triplet> entries,
                          std::source_location loc) {
  sluice::la::check_shape(rows, cols, loc);
  // Counting sort by row, then each row sorted by column (stable: duplicates summed in order).
  std::vector<std::int64_t> count(static_cast<std::size_t>(rows) + 1, 0);
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const auto& e = entries[k];
    if (e.row < 0 || e.row >= rows || e.col < 0 || e.col >= cols) {
      throw Error(Errc::invalid_argument,
                  "triplet " + std::to_string(k) + " (" + std::to_string(e.row) + ", " +
                      std::to_string(e.col) + ") is outside the " + std::to_string(rows) + " x " +
                      std::to_string(cols) + " matrix (indices are 0-based)",
                  loc);
    }
    ++count[static_cast<std::size_t>(e.row) + 1];
  }
  std::partial_sum(count.begin(), count.end(), count.begin());
  std::vector<std::size_t> order(entries.size());
  {
    auto next = count;
    for (std::size_t k = 0; k < entries.size(); ++k) {
      order[static_cast<std::size_t>(next[static_cast<std::size_t>(entries[k].row)]++)] = k;
    }
  }
  HostCsr csr;
  csr.rows = rows;
  csr.cols = cols;
  csr.row_ptr.reserve(static_cast<std::size_t>(rows) + 1);
  csr.col.reserve(entries.size());
  csr.val.reserve(entries.size());
  std::vector<std::pair<std::int64_t, double>> row;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (auto k = count[static_cast<std::size_t>(r)]; k < count[static_cast<std::size_t>(r) + 1];
         ++k) {
      const auto& e = entries[order[static_cast<std::size_t>(k)]];
      row.emplace_back(e.col, e.value);
    }
    csr.add_row(row, loc);
  }
  return csr;
}

}  // namespace detail::la
namespace la {

Mat Mat::from_triplets(const Context& ctx, std::int64_t rows, std::int64_t cols,
                       std::span<const Triplet> entries, std::source_location loc) {
  return Mat(
      detail::la::make_csr(ctx, detail::la::csr_from_triplets(rows, cols, entries, loc), loc));
}

Mat Mat::from_rows(const Context& ctx, std::int64_t rows, std::int64_t cols,
                   const std::function<void(std::int64_t, const RowAdder&)>& g,
                   std::source_location loc) {
  check_shape(rows, cols, loc);
  detail::la::HostCsr csr;
  csr.rows = rows;
  csr.cols = cols;
  csr.row_ptr.reserve(static_cast<std::size_t>(rows) + 1);
  std::vector<std::pair<std::int64_t, double>> row;
  const RowAdder add = [&](std::int64_t c, double v) { row.emplace_back(c, v); };
  for (std::int64_t r = 0; r < rows; ++r) {
    g(r, add);
    csr.add_row(row, loc);
  }
  return Mat(detail::la::make_csr(ctx, std::move(csr), loc));
}

Mat Mat::read_matrix_market(const Context& ctx, const std::string& path, std::source_location loc) {
  return Mat(detail::la::make_csr(ctx, detail::la::read_matrix_market(path, loc), loc));
}

Mat Mat::stencil(const Context& ctx, Stencil kind, std::int64_t nx, std::int64_t ny,
                 std::int64_t nz, std::source_location loc) {
  check_grid(kind, nx, ny, nz, loc);
  (void)kernels(ctx, loc);
  auto impl = std::make_shared<Impl>(ctx);
  impl->rows = impl->cols = nx * ny * nz;
  impl->nnz = stencil_nnz(kind, nx, ny, nz);
  impl->is_stencil = true;
  impl->kind = kind;
  impl->stencil.kind = la_kind(kind);
  impl->stencil.nx = nx;
  impl->stencil.ny = ny;
  impl->stencil.nz = nz;
  impl->stencil.center = static_cast<double>(stencil_points(kind) - 1);
  impl->stencil.neighbor = -1.0;
  return Mat(std::move(impl));
}

Mat Mat::stencil_csr(const Context& ctx, Stencil kind, std::int64_t nx, std::int64_t ny,
                     std::int64_t nz, std::source_location loc) {
  check_grid(kind, nx, ny, nz, loc);
  const auto nnz = stencil_nnz(kind, nx, ny, nz);
  if (nnz > kMaxIndex) {
    throw Error(Errc::invalid_argument,
                "the assembled stencil would have " + std::to_string(nnz) +
                    " entries, more than 2^31 - 1; use the matrix-free Mat::stencil",
                loc);
  }
  // Rows straight into CSR: the neighbour offsets in ascending index order, centre included.
  auto offsets = neighbours(kind);
  offsets.push_back({0, 0, 0});
  std::sort(offsets.begin(), offsets.end(), [&](const auto& a, const auto& b) {
    return (a[2] * ny + a[1]) * nx + a[0] < (b[2] * ny + b[1]) * nx + b[0];
  });
  detail::la::HostCsr csr;
  csr.rows = csr.cols = nx * ny * nz;
  csr.row_ptr.reserve(static_cast<std::size_t>(csr.rows) + 1);
  csr.col.reserve(static_cast<std::size_t>(nnz));
  csr.val.reserve(static_cast<std::size_t>(nnz));
  const double center = static_cast<double>(stencil_points(kind) - 1);
  for (std::int64_t iz = 0; iz < nz; ++iz) {
    for (std::int64_t iy = 0; iy < ny; ++iy) {
      for (std::int64_t ix = 0; ix < nx; ++ix) {
        for (const auto& d : offsets) {
          const auto jx = ix + d[0], jy = iy + d[1], jz = iz + d[2];
          if (jx < 0 || jx >= nx || jy < 0 || jy >= ny || jz < 0 || jz >= nz) continue;
          csr.col.push_back(static_cast<std::int32_t>((jz * ny + jy) * nx + jx));
          csr.val.push_back(d == std::array<int, 3>{0, 0, 0} ? center : -1.0);
        }
        csr.row_ptr.push_back(static_cast<std::int32_t>(csr.col.size()));
      }
    }
  }
  return Mat(detail::la::make_csr(ctx, std::move(csr), loc));
}

// ---- queries -----------------------------------------------------------------------------------

std::int64_t Mat::rows() const noexcept {
  return impl_ ? impl_->rows : 0;
}
std::int64_t Mat::cols() const noexcept {
  return impl_ ? impl_->cols : 0;
}
std::int64_t Mat::nnz() const noexcept {
  return impl_ ? impl_->nnz : 0;
}
bool Mat::is_matrix_free() const noexcept {
  return impl_ && impl_->is_stencil;
}
const Context& Mat::context() const {
  return impl_of(*this, "Mat::context", {}).ctx;
}
const Device& Mat::device() const {
  return context().device();
}

Stencil Mat::stencil_kind() const {
  const auto& m = impl_of(*this, "Mat::stencil_kind", {});
  if (!m.is_stencil) throw Error(Errc::invalid_state, "Mat::stencil_kind: the Mat is CSR");
  return m.kind;
}

std::array<std::int64_t, 3> Mat::grid() const {
  const auto& m = impl_of(*this, "Mat::grid", {});
  if (!m.is_stencil) return {m.rows, 1, 1};
  return {m.stencil.nx, m.stencil.ny, m.stencil.nz};
}

Mat::HostCsr Mat::to_host(std::source_location loc) const {
  const auto& m = impl_of(*this, "Mat::to_host", loc);
  HostCsr out;
  if (m.is_stencil) return out;
  out.row_ptr.resize(m.row_ptr.size());
  out.col.resize(m.col.size());
  out.val.resize(m.val.size());
  if (!out.row_ptr.empty()) sluice::copy(m.ctx, out.row_ptr, m.row_ptr, loc);
  if (!out.col.empty()) sluice::copy(m.ctx, out.col, m.col, loc);
  if (!out.val.empty()) sluice::copy(m.ctx, out.val, m.val, loc);
  Event done;  // the copies into pageable memory are untracked: wait for them by an event
  done.record(m.ctx, loc);
  done.synchronize(loc);
  return out;
}

// ---- operations ---------------------------------------------------------------------------------

namespace {

void matvec(const Mat& A, const Vec& x, const Vec* add, Vec& y, LaEpilogue epilogue,
            const Context& ctx, std::string_view what, std::source_location loc) {
  const auto& m = impl_of(A, what, loc);
  check_vec(x, what, loc);
  check_vec(y, what, loc);
  check_device(ctx, m.ctx.device(), what, loc);
  check_device(ctx, x.device(), what, loc);
  check_device(ctx, y.device(), what, loc);
  check_sizes(static_cast<std::size_t>(m.cols), x.size(), what, loc);
  check_sizes(static_cast<std::size_t>(m.rows), y.size(), what, loc);
  if (x.object_id() == y.object_id() && !x.empty()) {
    throw Error(Errc::invalid_argument,
                std::string(what) +
                    ": x and y are the same vector; the product needs another "
                    "vector for its result",
                loc);
  }
  if (add != nullptr) {
    check_vec(*add, what, loc);
    check_device(ctx, add->device(), what, loc);
    check_sizes(y.size(), add->size(), what, loc);
  }
  if (y.empty()) return;
  AccessList acc;
  LaMatvecArgs args;
  args.A = m.op(acc);
  args.x = acc.read(x);
  args.epilogue = epilogue;
  args.y = acc.write(y);
  args.z = add != nullptr ? acc.read(*add) : nullptr;
  auto& k = kernels(ctx, loc);
  issue_tracked(ctx.impl(), acc, what, loc,
                [&](Stream& s, const OpInfo& info) { k.matvec(s, args, info); });
}

}  // namespace

void mult(const Mat& A, const Vec& x, Vec& y, std::source_location loc) {
  mult(A, x, y, y.context(), loc);
}
void mult(const Mat& A, const Vec& x, Vec& y, const Context& ctx, std::source_location loc) {
  matvec(A, x, nullptr, y, LaEpilogue::store, ctx, "MatMult", loc);
}
void multadd(const Mat& A, const Vec& x, const Vec& y, Vec& z, std::source_location loc) {
  multadd(A, x, y, z, z.context(), loc);
}
void multadd(const Mat& A, const Vec& x, const Vec& y, Vec& z, const Context& ctx,
             std::source_location loc) {
  matvec(A, x, &y, z, LaEpilogue::add, ctx, "MatMultAdd", loc);
}
void diagonal(const Mat& A, Vec& d, std::source_location loc) {
  diagonal(A, d, d.context(), loc);
}
void diagonal(const Mat& A, Vec& d, const Context& ctx, std::source_location loc) {
  const auto& m = impl_of(A, "MatGetDiagonal", loc);
  check_vec(d, "MatGetDiagonal", loc);
  check_device(ctx, m.ctx.device(), "MatGetDiagonal", loc);
  check_device(ctx, d.device(), "MatGetDiagonal", loc);
  check_sizes(static_cast<std::size_t>(m.rows), d.size(), "MatGetDiagonal", loc);
  if (d.empty()) return;
  AccessList acc;
  const auto op = m.op(acc);
  double* out = acc.write(d);
  auto& k = kernels(ctx, loc);
  issue_tracked(ctx.impl(), acc, "MatGetDiagonal", loc,
                [&](Stream& s, const OpInfo& info) { k.diagonal(s, op, out, info); });
}

}  // namespace la
}  // namespace sluice
