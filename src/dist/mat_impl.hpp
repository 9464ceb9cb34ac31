#pragma once
// dist::Mat's shared state and the distributed product (product.cpp), which dist::mult and the
// distributed solvers share.

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <source_location>
#include <string_view>
#include <vector>

#include "deps/access_list.hpp"
#include "dist/comm_state.hpp"
#include "la/ksp_parallel.hpp"
#include "sluice/dist.hpp"

namespace sluice::dist::detail {

/// Parts of partial sums a product may leave (a stencil's interior and its two boundary planes).
inline constexpr int kParts = 3;

/// One local rank's share of a distributed matrix.
struct MatBlock {
  la::Mat diag;  // a stencil: the rank's planes, open where a neighbour rank lies; else A_d
  la::Mat off;   // assembled: A_o over the ghost columns (empty if none)
  /// Assembled: A_o's rows that hold entries, as a few runs of consecutive rows (each its own
  /// matrix, rows [first, first + rows)), where they are few and cover under half the rows: a
  /// banded matrix split by rows has its ghost columns in its first and last rows only, and a
  /// product over every row of A_o costs as much as one over A_d's entries (PETSc keeps A_o's
  /// nonempty rows compressed for the same reason). Empty: the product runs over `off`.
  struct OffRun {
    std::int64_t first = 0;
    la::Mat m;
  };
  std::vector<OffRun> off_runs;
  Context exchange_ctx;  // where this rank's ghost exchanges run, beside the products
  // Stencil: the neighbour ranks along the slowest dimension (-1: none).
  int lo = -1, hi = -1;
  std::int64_t planes = 0;
  // Assembled: the ghost plan. Sends are segments of a packed buffer (send_index gives the
  // owned rows packed), receives segments of the ghost buffer, both in peer order.
  std::vector<DistSegment> sends, recvs;
  std::size_t ghosts = 0;
  DeviceBuffer<std::int32_t> send_index;
  /// Per input slot (x, x2, right): the packed values and the received ghosts; and, for inputs
  /// without ghost layers, a copy with them (a stencil's). Made on first use.
  struct Slot {
    DeviceBuffer<double> packed, ghost;
    la::Vec padded;
  };
  mutable std::array<Slot, 3> slots;
  mutable std::mutex mutex;  // guards making the slots
};

struct MatImpl {
  std::optional<Comm> comm;
  Layout layout;
  bool matrix_free = false;
  la::Stencil kind = la::Stencil::d2p5;
  std::array<std::int64_t, 3> grid{0, 0, 0};
  std::int64_t rows = 0;
  std::int64_t nnz = 0;
  /// Stencil: elements per plane of the slowest dimension (the ghost layer's size).
  std::int64_t plane = 0;
  /// Stencil: the interior planes' product overlaps the exchange (all ranks hold 3 planes or
  /// more, and there are several): its sums come in kParts parts.
  bool split = false;
  /// Stencil, split: the parts of a product's sums, the same on every rank (an allgather's
  /// count): kParts, or 2 where every rank is at an end of the grid (2 ranks), whose interior
  /// pass then takes the end plane too (it reads no ghost).
  int parts = kParts;
  std::vector<std::unique_ptr<MatBlock>> blocks;  // per local rank

  [[nodiscard]] const CommState& state() const { return *comm->state(); }
};

/// Where a product leaves its partial sums: `part(acc, k)` marks part k written in acc and
/// returns its address.
using PartialSums = std::function<double*(AccessList& acc, int part)>;

/// Issues y = A x as local rank `local`'s share of the product `m` (la's LaMatvecArgs: input form,
/// scalings, epilogue; m.A and m.sums.out are set here, m.sums.state guards it), with the ghost
/// values of `in`'s vectors exchanged first. `acc` holds the accesses of everything but `in`'s
/// vectors. The epilogue's sums, if it has any, go to `sums`; returns how many parts it wrote.
int product(const MatImpl& A, int local, const Context& ctx, sluice::detail::LaMatvecArgs m,
            const sluice::detail::la::MatvecInputs& in, const AccessList& acc,
            const PartialSums& sums, std::string_view what, std::source_location loc);

}  // namespace sluice::dist::detail
