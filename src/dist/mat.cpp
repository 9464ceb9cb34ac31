// dist::Mat: matrix-free stencils split along their slowest dimension, and PETSc's MPIAIJ
// assembled from rows, triplets or a Matrix Market file (sluice/dist.hpp).

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "dist/mat_impl.hpp"
#include "dist/serial.hpp"
#include "la/mat.hpp"
#include "sluice/error.hpp"

using namespace sluice::detail;  // la's kernel argument types (sluice/ext/la_kernels.hpp)

namespace sluice::dist {
namespace detail {
namespace {

using sluice::detail::la::HostCsr;

/// Whether a stencil's interior product overlaps its exchange (SLUICE_DIST_OVERLAP=0 turns it
/// off, to measure what it gains).
bool overlap_enabled() {
  static const bool on = [] {
    const char* env = std::getenv("SLUICE_DIST_OVERLAP");
    return env == nullptr || *env != '0';
  }();
  return on;
}

LaStencilKind la_kind(la::Stencil s) {
  switch (s) {
    case la::Stencil::d2p5:
      return LaStencilKind::d2p5;
    case la::Stencil::d2p9:
      return LaStencilKind::d2p9;
    case la::Stencil::d3p7:
      return LaStencilKind::d3p7;
    case la::Stencil::d3p27:
      return LaStencilKind::d3p27;
  }
  return LaStencilKind::d2p5;
}

/// Context on the same device as `ctx` for a rank's exchanges.
Context exchange_context(const Context& ctx) {
  return Context(ContextOptions{.device = ctx.device(), .name = ctx.name() + " exchange"});
}

std::shared_ptr<MatImpl> new_impl(const Comm& comm) {
  auto A = std::make_shared<MatImpl>();
  A->comm = comm;
  return A;
}

/// One local rank's rows with global column indices, split into the diagonal block, the
/// off-diagonal block over the compressed ghost columns, and the ghost columns' owners.
struct SplitRows {
  HostCsr diag, off;
  std::vector<std::int64_t> garray;  // the ghost columns, ascending
};

SplitRows split_rows(const HostCsr& rows, std::int64_t start, std::int64_t end,
                     std::source_location loc) {
  SplitRows out;
  const std::int64_t n = rows.rows;
  for (std::int64_t i = 0; i < n; ++i) {
    for (auto k = rows.row_ptr[static_cast<std::size_t>(i)];
         k < rows.row_ptr[static_cast<std::size_t>(i) + 1]; ++k) {
      const std::int64_t c = rows.col[static_cast<std::size_t>(k)];
      if (c < start || c >= end) out.garray.push_back(c);
    }
  }
  std::sort(out.garray.begin(), out.garray.end());
  out.garray.erase(std::unique(out.garray.begin(), out.garray.end()), out.garray.end());
  out.diag.rows = n;
  out.diag.cols = end - start;
  out.off.rows = n;
  out.off.cols = static_cast<std::int64_t>(out.garray.size());
  std::vector<std::pair<std::int64_t, double>> d, o;
  for (std::int64_t i = 0; i < n; ++i) {
    d.clear();
    o.clear();
    for (auto k = rows.row_ptr[static_cast<std::size_t>(i)];
         k < rows.row_ptr[static_cast<std::size_t>(i) + 1]; ++k) {
      const std::int64_t c = rows.col[static_cast<std::size_t>(k)];
      const double v = rows.val[static_cast<std::size_t>(k)];
      if (c >= start && c < end) {
        d.emplace_back(c - start, v);
      } else {
        const auto at = std::lower_bound(out.garray.begin(), out.garray.end(), c);
        o.emplace_back(at - out.garray.begin(), v);
      }
    }
    out.diag.add_row(d, loc);
    out.off.add_row(o, loc);
  }
  return out;
}

/// The runs of A_o's nonempty rows (MatBlock::off_runs): gaps of fewer than kRunGap empty rows
/// are bridged (scanning them costs less than another operation); none where there would be more
/// than kMaxRuns runs or they would cover half the rows.
std::vector<std::pair<std::int64_t, HostCsr>> off_row_runs(const HostCsr& off) {
  constexpr std::int64_t kRunGap = 256;
  constexpr std::size_t kMaxRuns = 8;
  std::vector<std::pair<std::int64_t, std::int64_t>> runs;  // [first, end)
  for (std::int64_t i = 0; i < off.rows; ++i) {
    const auto u = static_cast<std::size_t>(i);
    if (off.row_ptr[u + 1] == off.row_ptr[u]) continue;
    if (!runs.empty() && i - runs.back().second < kRunGap) {
      runs.back().second = i + 1;
    } else {
      runs.emplace_back(i, i + 1);
    }
  }
  std::int64_t covered = 0;
  for (const auto& [first, end] : runs) covered += end - first;
  std::vector<std::pair<std::int64_t, HostCsr>> out;
  if (runs.empty() || runs.size() > kMaxRuns || 2 * covered >= off.rows) return out;
  for (const auto& [first, end] : runs) {
    HostCsr sub;
    sub.rows = end - first;
    sub.cols = off.cols;
    const auto base = off.row_ptr[static_cast<std::size_t>(first)];
    for (std::int64_t i = first; i < end; ++i) {
      sub.row_ptr.push_back(off.row_ptr[static_cast<std::size_t>(i) + 1] - base);
    }
    sub.col.assign(off.col.begin() + base,
                   off.col.begin() + off.row_ptr[static_cast<std::size_t>(end)]);
    sub.val.assign(off.val.begin() + base,
                   off.val.begin() + off.row_ptr[static_cast<std::size_t>(end)]);
    out.emplace_back(first, std::move(sub));
  }
  return out;
}

/// MPIAIJ from each local rank's rows (global columns): the blocks, the ghost plan (requests
/// sent to the owners of the ghost columns, whose answers become their send lists), uploads.
std::shared_ptr<MatImpl> assemble(const Comm& comm, Layout layout, std::vector<HostCsr> rows,
                                  std::source_location loc) {
  auto A = new_impl(comm);
  const CommState& st = A->state();
  A->layout = layout;
  A->rows = layout.size();
  const int L = st.locals();
  std::vector<SplitRows> parts;
  parts.reserve(static_cast<std::size_t>(L));
  // Requests: to process p, entries (owner rank, requesting rank, count, global columns...).
  std::vector<serial::Writer> requests(static_cast<std::size_t>(st.procs->size()));
  std::vector<std::unique_ptr<MatBlock>> blocks;
  std::int64_t local_nnz = 0;
  for (int l = 0; l < L; ++l) {
    const int r = st.ranks[static_cast<std::size_t>(l)];
    auto sp = split_rows(rows[static_cast<std::size_t>(l)], layout.start(r), layout.end(r), loc);
    local_nnz += static_cast<std::int64_t>(rows[static_cast<std::size_t>(l)].col.size());
    auto block = std::make_unique<MatBlock>();
    block->ghosts = sp.garray.size();
    for (std::size_t k = 0; k < sp.garray.size();) {
      const int owner = layout.owner(sp.garray[k]);
      std::size_t e = k;
      while (e < sp.garray.size() && sp.garray[e] < layout.end(owner)) ++e;
      block->recvs.push_back({owner, k, e - k});
      auto& w = requests[static_cast<std::size_t>(st.map.process_of(owner))];
      w.put<std::int32_t>(owner);
      w.put<std::int32_t>(r);
      w.put<std::int64_t>(static_cast<std::int64_t>(e - k));
      for (std::size_t j = k; j < e; ++j) w.put<std::int64_t>(sp.garray[j]);
      k = e;
    }
    parts.push_back(std::move(sp));
    blocks.push_back(std::move(block));
  }
  std::vector<std::vector<std::byte>> out(requests.size());
  for (std::size_t p = 0; p < requests.size(); ++p) out[p] = requests[p].take();
  const auto received = st.procs->alltoallv(out);
  // Each rank's send list: the requests addressed to it, in requesting rank order.
  std::vector<std::map<int, std::vector<std::int64_t>>> wanted(static_cast<std::size_t>(L));
  for (const auto& bytes : received) {
    serial::Reader rd(bytes);
    while (!rd.done()) {
      const int owner = rd.get<std::int32_t>();
      const int from = rd.get<std::int32_t>();
      const auto count = rd.get<std::int64_t>();
      auto& list = wanted[static_cast<std::size_t>(st.map.local_of(owner))][from];
      for (std::int64_t j = 0; j < count; ++j) list.push_back(rd.get<std::int64_t>());
    }
  }
  for (int l = 0; l < L; ++l) {
    const Context& ctx = st.contexts[static_cast<std::size_t>(l)];
    const int r = st.ranks[static_cast<std::size_t>(l)];
    auto& block = *blocks[static_cast<std::size_t>(l)];
    std::vector<std::int32_t> index;
    for (const auto& [from, cols] : wanted[static_cast<std::size_t>(l)]) {
      block.sends.push_back({from, index.size(), cols.size()});
      for (auto c : cols) index.push_back(static_cast<std::int32_t>(c - layout.start(r)));
    }
    auto& sp = parts[static_cast<std::size_t>(l)];
    block.planes = 0;
    block.diag = la::Mat(sluice::detail::la::make_csr(ctx, std::move(sp.diag), loc));
    if (block.ghosts > 0) {
      for (auto& [first, sub] : off_row_runs(sp.off)) {
        block.off_runs.push_back(
            {first, la::Mat(sluice::detail::la::make_csr(ctx, std::move(sub), loc))});
      }
      block.off = la::Mat(sluice::detail::la::make_csr(ctx, std::move(sp.off), loc));
    }
    if (!index.empty()) {
      block.send_index = DeviceBuffer<std::int32_t>(ctx, index.size(), loc);
      sluice::detail::la::upload(ctx, block.send_index, std::span<const std::int32_t>(index), loc);
    }
    block.exchange_ctx = exchange_context(ctx);
  }
  A->blocks = std::move(blocks);
  // Entries in all: every process's.
  std::vector<std::int64_t> all(static_cast<std::size_t>(st.procs->size()));
  st.procs->allgather(&local_nnz, sizeof local_nnz, all.data());
  for (auto v : all) A->nnz += v;
  return A;
}

/// Throws the same Error on every process unless all passed the same `values`.
void check_same(const CommState& st, std::span<const std::int64_t> values, std::string_view what,
                std::source_location loc) {
  const std::size_t n = values.size();
  std::vector<std::int64_t> all(n * static_cast<std::size_t>(st.procs->size()));
  st.procs->allgather(values.data(), n * sizeof(std::int64_t), all.data());
  for (int p = 1; p < st.procs->size(); ++p) {
    for (std::size_t k = 0; k < n; ++k) {
      const auto a = all[k], b = all[static_cast<std::size_t>(p) * n + k];
      if (a == b) continue;
      throw Error(Errc::invalid_argument,
                  std::string(what) + ": process " + std::to_string(p) + " gave " +
                      std::to_string(b) + " where process 0 gave " + std::to_string(a) +
                      " (argument " + std::to_string(k + 1) +
                      "); every process must make the same call",
                  loc);
    }
  }
}

/// Rows [start, end) of the stencil's assembled form, global columns.
HostCsr stencil_rows(la::Stencil kind, std::int64_t nx, std::int64_t ny, std::int64_t nz,
                     std::int64_t start, std::int64_t end, std::source_location loc) {
  const bool three = la::stencil_is_3d(kind);
  const bool box = kind == la::Stencil::d2p9 || kind == la::Stencil::d3p27;
  const double center = static_cast<double>(la::stencil_points(kind) - 1);
  HostCsr csr;
  csr.rows = end - start;
  csr.cols = nx * ny * nz;
  std::vector<std::pair<std::int64_t, double>> row;
  for (std::int64_t i = start; i < end; ++i) {
    const std::int64_t ix = i % nx, iy = (i / nx) % ny, iz = i / (nx * ny);
    row.clear();
    for (int dz = -1; dz <= 1; ++dz) {
      for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
          const int away = std::abs(dx) + std::abs(dy) + std::abs(dz);
          if ((!three && dz != 0) || (!box && away > 1)) continue;
          if (ix + dx < 0 || ix + dx >= nx || iy + dy < 0 || iy + dy >= ny || iz + dz < 0 ||
              iz + dz >= nz) {
            continue;
          }
          row.emplace_back(i + dx + dy * nx + dz * nx * ny, away == 0 ? center : -1.0);
        }
      }
    }
    csr.add_row(row, loc);
  }
  return csr;
}

}  // namespace
}  // namespace detail

// ---- construction ------------------------------------------------------------------------------

Mat Mat::stencil(const Comm& comm, la::Stencil kind, std::int64_t nx, std::int64_t ny,
                 std::int64_t nz, std::source_location loc) {
  const auto& st = *comm.state();
  // la checks the grid (and counts the entries) without allocating anything.
  const la::Mat whole = la::Mat::stencil(st.contexts.front(), kind, nx, ny, nz, loc);
  const std::int64_t args[] = {static_cast<std::int64_t>(kind), nx, ny, nz};
  detail::check_same(st, args, "dist::Mat::stencil", loc);
  auto A = detail::new_impl(comm);
  const bool three = la::stencil_is_3d(kind);
  const std::int64_t planes = three ? nz : ny;
  const std::int64_t P = three ? nx * ny : nx;
  const int size = st.size();
  if (planes < size) {
    throw Error(Errc::invalid_argument,
                "dist::Mat::stencil: the grid has " + std::to_string(planes) + " planes along " +
                    (three ? "z" : "y") + " for " + std::to_string(size) +
                    " ranks; each rank needs one at least",
                loc);
  }
  A->layout = Layout::split(size, planes, 0);
  std::vector<std::int64_t> starts = A->layout.starts();
  std::int64_t fewest = planes;
  for (int r = 0; r < size; ++r) fewest = std::min(fewest, A->layout.local_size(r));
  for (auto& s : starts) s *= P;
  A->layout = Layout::from_starts(std::move(starts), static_cast<std::size_t>(P));
  A->matrix_free = true;
  A->kind = kind;
  A->grid = {nx, ny, nz};
  A->rows = nx * ny * nz;
  A->nnz = whole.nnz();
  A->plane = P;
  A->split = size > 1 && fewest >= 3 && detail::overlap_enabled();
  A->parts = size == 2 ? 2 : detail::kParts;
  for (int l = 0; l < st.locals(); ++l) {
    const Context& ctx = st.contexts[static_cast<std::size_t>(l)];
    const int r = st.ranks[static_cast<std::size_t>(l)];
    auto block = std::make_unique<detail::MatBlock>();
    block->planes = A->layout.local_size(r) / P;
    block->lo = r > 0 ? r - 1 : -1;
    block->hi = r + 1 < size ? r + 1 : -1;
    auto impl = std::make_shared<la::Mat::Impl>(ctx);
    impl->rows = impl->cols = block->planes * P;
    impl->nnz =
        la::Mat::stencil(ctx, kind, nx, three ? ny : block->planes, three ? block->planes : 1, loc)
            .nnz();
    impl->is_stencil = true;
    impl->kind = kind;
    impl->stencil.kind = detail::la_kind(kind);
    impl->stencil.open_lo = block->lo >= 0;
    impl->stencil.open_hi = block->hi >= 0;
    impl->stencil.nx = nx;
    impl->stencil.ny = three ? ny : block->planes;
    impl->stencil.nz = three ? block->planes : 1;
    impl->stencil.center = static_cast<double>(la::stencil_points(kind) - 1);
    impl->stencil.neighbor = -1.0;
    block->diag = la::Mat(std::move(impl));
    block->exchange_ctx = detail::exchange_context(ctx);
    A->blocks.push_back(std::move(block));
  }
  return Mat(std::move(A));
}

Mat Mat::stencil_csr(const Comm& comm, la::Stencil kind, std::int64_t nx, std::int64_t ny,
                     std::int64_t nz, std::source_location loc) {
  const auto& st = *comm.state();
  (void)la::Mat::stencil(st.contexts.front(), kind, nx, ny, nz, loc);  // checks the grid
  const std::int64_t args[] = {static_cast<std::int64_t>(kind), nx, ny, nz};
  detail::check_same(st, args, "dist::Mat::stencil_csr", loc);
  const Layout layout = Layout::split(st.size(), nx * ny * nz);
  std::vector<sluice::detail::la::HostCsr> rows;
  for (int l = 0; l < st.locals(); ++l) {
    const int r = st.ranks[static_cast<std::size_t>(l)];
    rows.push_back(detail::stencil_rows(kind, nx, ny, nz, layout.start(r), layout.end(r), loc));
  }
  auto A = detail::assemble(comm, layout, std::move(rows), loc);
  A->kind = kind;
  A->grid = {nx, ny, nz};
  return Mat(std::move(A));
}

Mat Mat::from_rows(const Comm& comm, std::int64_t rows,
                   const std::function<void(std::int64_t, const la::RowAdder&)>& g,
                   std::source_location loc) {
  return from_rows(comm, Layout::split(comm.size(), rows), g, loc);
}

Mat Mat::from_rows(const Comm& comm, Layout layout,
                   const std::function<void(std::int64_t, const la::RowAdder&)>& g,
                   std::source_location loc) {
  const auto& st = *comm.state();
  if (layout.ranks() != st.size()) {
    throw Error(Errc::invalid_argument,
                "dist::Mat::from_rows: the layout is for " + std::to_string(layout.ranks()) +
                    " ranks, the communicator has " + std::to_string(st.size()),
                loc);
  }
  const std::int64_t args[] = {layout.size()};
  detail::check_same(st, args, "dist::Mat::from_rows", loc);
  const std::int64_t n = layout.size();
  std::vector<sluice::detail::la::HostCsr> all;
  std::vector<std::pair<std::int64_t, double>> entries;
  for (int l = 0; l < st.locals(); ++l) {
    const int r = st.ranks[static_cast<std::size_t>(l)];
    sluice::detail::la::HostCsr csr;
    csr.rows = layout.local_size(r);
    csr.cols = n;
    for (std::int64_t i = layout.start(r); i < layout.end(r); ++i) {
      entries.clear();
      g(i, [&](std::int64_t col, double value) {
        if (col < 0 || col >= n) {
          throw Error(Errc::invalid_argument,
                      "dist::Mat::from_rows: row " + std::to_string(i) + " has column " +
                          std::to_string(col) + ", outside [0, " + std::to_string(n) + ")",
                      loc);
        }
        entries.emplace_back(col, value);
      });
      csr.add_row(entries, loc);
    }
    all.push_back(std::move(csr));
  }
  return Mat(detail::assemble(comm, Layout::from_starts(layout.starts()), std::move(all), loc));
}

Mat Mat::from_triplets(const Comm& comm, std::int64_t rows, std::span<const la::Triplet> entries,
                       std::source_location loc) {
  const auto& st = *comm.state();
  const std::int64_t args[] = {rows};
  detail::check_same(st, args, "dist::Mat::from_triplets", loc);
  const Layout layout = Layout::split(st.size(), rows);
  std::vector<detail::serial::Writer> out(static_cast<std::size_t>(st.procs->size()));
  for (const auto& t : entries) {
    if (t.row < 0 || t.row >= rows || t.col < 0 || t.col >= rows) {
      throw Error(Errc::invalid_argument,
                  "dist::Mat::from_triplets: entry (" + std::to_string(t.row) + ", " +
                      std::to_string(t.col) + ") lies outside the " + std::to_string(rows) + " x " +
                      std::to_string(rows) + " matrix",
                  loc);
    }
    auto& w = out[static_cast<std::size_t>(st.map.process_of(layout.owner(t.row)))];
    w.put(t.row);
    w.put(t.col);
    w.put(t.value);
  }
  std::vector<std::vector<std::byte>> bytes(out.size());
  for (std::size_t p = 0; p < out.size(); ++p) bytes[p] = out[p].take();
  const auto received = st.procs->alltoallv(bytes);
  std::map<std::int64_t, std::vector<std::pair<std::int64_t, double>>> by_row;
  for (const auto& b : received) {
    detail::serial::Reader rd(b);
    while (!rd.done()) {
      const auto row = rd.get<std::int64_t>();
      const auto col = rd.get<std::int64_t>();
      const auto value = rd.get<double>();
      by_row[row].emplace_back(col, value);
    }
  }
  std::vector<sluice::detail::la::HostCsr> all;
  std::vector<std::pair<std::int64_t, double>> none;
  for (int l = 0; l < st.locals(); ++l) {
    const int r = st.ranks[static_cast<std::size_t>(l)];
    sluice::detail::la::HostCsr csr;
    csr.rows = layout.local_size(r);
    csr.cols = rows;
    for (std::int64_t i = layout.start(r); i < layout.end(r); ++i) {
      auto it = by_row.find(i);
      csr.add_row(it != by_row.end() ? it->second : none, loc);
    }
    all.push_back(std::move(csr));
  }
  return Mat(detail::assemble(comm, layout, std::move(all), loc));
}

Mat Mat::read_matrix_market(const Comm& comm, const std::string& path, std::source_location loc) {
  const auto& st = *comm.state();
  // Process 0 reads; whether it could, and the shape, go to all.
  sluice::detail::la::HostCsr whole;
  std::string error;
  std::int64_t shape[3] = {0, 0, 0};  // ok, rows, cols
  if (st.procs->rank() == 0) {
    try {
      whole = sluice::detail::la::read_matrix_market(path, loc);
      shape[0] = 1;
      shape[1] = whole.rows;
      shape[2] = whole.cols;
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  st.procs->broadcast(shape, sizeof shape, 0);
  if (shape[0] == 0) {
    std::uint64_t len = error.size();
    st.procs->broadcast(&len, sizeof len, 0);
    error.resize(len);
    st.procs->broadcast(error.data(), len, 0);
    throw Error(Errc::invalid_argument,
                "dist::Mat::read_matrix_market (read by process 0): " + error, loc);
  }
  if (shape[1] != shape[2]) {
    throw Error(Errc::invalid_argument,
                "dist::Mat::read_matrix_market: " + path + " is " + std::to_string(shape[1]) +
                    " x " + std::to_string(shape[2]) + "; a distributed operator is square",
                loc);
  }
  const Layout layout = Layout::split(st.size(), shape[1]);
  // Process 0 sends each process the rows of its ranks.
  std::vector<std::vector<std::byte>> out(static_cast<std::size_t>(st.procs->size()));
  if (st.procs->rank() == 0) {
    for (int p = 0; p < st.procs->size(); ++p) {
      const auto count = st.map.count[static_cast<std::size_t>(p)];
      if (count == 0) continue;
      const auto first = layout.start(st.map.offset[static_cast<std::size_t>(p)]);
      const auto last = layout.end(st.map.offset[static_cast<std::size_t>(p)] + count - 1);
      detail::serial::Writer w;
      for (std::int64_t i = first; i < last; ++i) {
        const auto b = whole.row_ptr[static_cast<std::size_t>(i)];
        const auto e = whole.row_ptr[static_cast<std::size_t>(i) + 1];
        w.put<std::int64_t>(e - b);
        for (auto k = b; k < e; ++k) {
          w.put<std::int32_t>(whole.col[static_cast<std::size_t>(k)]);
          w.put<double>(whole.val[static_cast<std::size_t>(k)]);
        }
      }
      out[static_cast<std::size_t>(p)] = w.take();
    }
  }
  const auto received = st.procs->alltoallv(out);
  detail::serial::Reader rd(received[0]);
  std::vector<sluice::detail::la::HostCsr> all;
  std::vector<std::pair<std::int64_t, double>> row;
  for (int l = 0; l < st.locals(); ++l) {
    const int r = st.ranks[static_cast<std::size_t>(l)];
    sluice::detail::la::HostCsr csr;
    csr.rows = layout.local_size(r);
    csr.cols = shape[1];
    for (std::int64_t i = 0; i < csr.rows; ++i) {
      row.clear();
      const auto k = rd.get<std::int64_t>();
      for (std::int64_t j = 0; j < k; ++j) {
        const auto c = rd.get<std::int32_t>();
        row.emplace_back(c, rd.get<double>());
      }
      csr.add_row(row, loc);
    }
    all.push_back(std::move(csr));
  }
  return Mat(detail::assemble(comm, layout, std::move(all), loc));
}

// ---- queries -----------------------------------------------------------------------------------

namespace {
const detail::MatImpl& checked(const std::shared_ptr<const detail::MatImpl>& impl) {
  if (!impl) {
    throw Error(Errc::invalid_state,
                "dist::Mat: a default-constructed Mat has no operator; make one with "
                "Mat::stencil, from_rows, from_triplets or read_matrix_market");
  }
  return *impl;
}
}  // namespace

std::int64_t Mat::rows() const {
  return checked(impl_).rows;
}
std::int64_t Mat::nnz() const {
  return checked(impl_).nnz;
}
bool Mat::is_matrix_free() const {
  return checked(impl_).matrix_free;
}
const Comm& Mat::comm() const {
  return *checked(impl_).comm;
}
const Layout& Mat::layout() const {
  return checked(impl_).layout;
}
Vec Mat::create_vec(std::source_location loc) const {
  return Vec(comm(), layout(), loc);
}
const la::Mat& Mat::diagonal_block(int i) const {
  return checked(impl_).blocks.at(static_cast<std::size_t>(i))->diag;
}
const la::Mat& Mat::off_diagonal_block(int i) const {
  return checked(impl_).blocks.at(static_cast<std::size_t>(i))->off;
}

}  // namespace sluice::dist
