// The distributed product y = A x of one local rank (mat_impl.hpp), with la's kernels.
//
// A matrix-free stencil reads the neighbour ranks' boundary planes: the rank's vectors keep
// ghost planes right beside their own (la::Vec's room), an exchange on the rank's exchange
// context fills them, and la's stencil kernel reads them through its open ends (LaStencil). Where
// every rank holds 3 planes or more, the product runs in three passes: the interior planes first
// (they read no ghost, so they run while the exchange is in flight), then the two boundary
// planes; each pass is la's fused kernel with the whole epilogue, its sums a part of their own.
// With 2 ranks each rank has one neighbour, and its other end plane goes with the interior.
//
// An assembled matrix (PETSc's MPIAIJ) packs the values other ranks need, exchanges them into a
// ghost buffer while its diagonal block's product runs, and adds the off-diagonal block's
// product (its compressed columns index the ghost buffer) through la's epilogues, which are
// linear in the product: store, add and sub become add or sub onto the first pass's result, the
// residual update subtracts twice; a dot product (CG's p'w) is a reduction of its own after.
// The off-diagonal product runs over the block's runs of nonempty rows where it has them
// (MatBlock::off_runs).
//
// Where the engine splits exchanges (the host's), "on the rank's exchange context" becomes two
// halves on the product's own context around the work that reads no ghost (SplitExchange).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/context_impl.hpp"
#include "deps/issue.hpp"
#include "dist/mat_impl.hpp"
#include "la/kernel_math.hpp"
#include "la/mat.hpp"
#include "sluice/error.hpp"
#include "sluice/ext/la_kernels.hpp"

using namespace sluice::detail;  // la's kernel argument types (sluice/ext/la_kernels.hpp)

namespace sluice::dist::detail {
namespace {

using sluice::detail::issue_tracked;
using sluice::detail::la::MatvecInputs;

LaKernels& la_kernels(const Context& ctx, std::source_location loc) {
  return ctx.impl().extension<LaKernels>(loc);
}

constexpr std::size_t kDouble = sizeof(double);

/// `v`, or (if it lacks the ghost layers a stencil product reads) a copy of it into input slot
/// `slot`'s padded vector.
const la::Vec* padded_input(const MatImpl& A, const MatBlock& b, int slot, const la::Vec* v,
                            const Context& ctx, std::source_location loc) {
  if (v == nullptr) return nullptr;
  const auto P = static_cast<std::size_t>(A.plane);
  const std::size_t after = v->buffer().size() - v->offset() - v->size();
  if (v->offset() >= P && after >= P) return v;
  auto& s = b.slots[static_cast<std::size_t>(slot)];
  {
    std::lock_guard lock(b.mutex);
    if (s.padded.size() != v->size() || s.padded.device() != ctx.device()) {
      s.padded = la::Vec(ctx, v->size(), P, P, loc);
    }
  }
  la::copy(*v, s.padded, ctx, loc);
  return &s.padded;
}

/// Makes the rank's exchange context follow `ctx` into the graph `ctx` is capturing, if it is:
/// an exchange whose data was written by an earlier capture (a solve's set-up) would otherwise
/// run at once instead of in the graph.
void join_capture(const MatBlock& b, const Context& ctx, std::source_location loc) {
  if (ctx.impl().capturing()) b.exchange_ctx.wait_for(ctx, loc);
}

/// SLUICE_DIST_EXCHANGE=separate: one exchange operation per input vector, as before the
/// inputs' exchanges were merged (kept to measure the difference: docs/dist.md).
bool separate_exchanges() {
  static const bool separate = [] {
    const char* v = std::getenv("SLUICE_DIST_EXCHANGE");
    return v != nullptr && std::string_view(v) == "separate";
  }();
  return separate;
}

/// A ghost exchange issued in two halves on the product's own context, where the engine splits
/// exchanges (DistEngine::splits_exchanges: the host's): `start` before the work that reads no
/// ghost, `finish` after it. Both declare the exchange's accesses, so nothing else touches its
/// buffers in between. Each exchange has a key of its own (two products issued at once from two
/// threads never mix their halves).
class SplitExchange {
 public:
  SplitExchange(const CommState& st, int local, const Context& ctx, std::source_location loc)
      : st_(st), local_(local), ctx_(ctx), loc_(loc), key_(next_key()) {}

  void start(std::vector<DistExchangePart> parts, AccessList acc, std::string_view what) {
    parts_ = std::move(parts);
    acc_ = acc;
    st_.issue(local_, ctx_, acc, what, loc_, [&](Stream& s, const OpInfo& op) {
      st_.engine->exchange_start(s, local_, parts_, DistType::f64, key_, op);
    });
  }
  void finish(std::string_view what) {
    AccessList acc = acc_;
    st_.issue(local_, ctx_, acc, what, loc_, [&](Stream& s, const OpInfo& op) {
      st_.engine->exchange_finish(s, local_, key_, op);
    });
  }

 private:
  static const void* next_key() {
    static std::atomic<std::uintptr_t> counter{0};
    return reinterpret_cast<const void*>(counter.fetch_add(1, std::memory_order_relaxed) + 1);
  }

  const CommState& st_;
  int local_;
  const Context& ctx_;
  std::source_location loc_;
  const void* key_;
  std::vector<DistExchangePart> parts_;
  AccessList acc_;
};

bool splits_exchanges(const MatImpl& A) {
  return A.state().engine->splits_exchanges();
}

/// Fills the ghost planes of every vector of `vs` from the neighbour ranks (and sends them its
/// boundary planes), on the rank's exchange context: one operation for all (with NCCL, one
/// group: one launch instead of one per vector).
void exchange_planes(const MatImpl& A, int local, const MatBlock& b,
                     std::span<const la::Vec* const> vs, const Context& ctx,
                     std::source_location loc, SplitExchange* split = nullptr) {
  if (vs.empty() || (b.lo < 0 && b.hi < 0)) return;
  const CommState& st = A.state();
  const auto P = static_cast<std::size_t>(A.plane);
  struct Planes {
    std::vector<DistSegment> sends, recvs;
  };
  std::vector<Planes> planes(vs.size());
  std::vector<DistExchangePart> parts;
  AccessList acc;
  for (std::size_t i = 0; i < vs.size(); ++i) {
    const la::Vec& v = *vs[i];
    const std::size_t off = v.offset(), n = v.size();
    auto& pl = planes[i];
    if (b.lo >= 0) {
      pl.sends.push_back({b.lo, off, P});
      pl.recvs.push_back({b.lo, off - P, P});
    }
    if (b.hi >= 0) {
      pl.sends.push_back({b.hi, off + n - P, P});
      pl.recvs.push_back({b.hi, off + n, P});
    }
    for (const auto& m : pl.sends) acc.read(v.object_id(), {m.offset * kDouble, m.count * kDouble});
    for (const auto& m : pl.recvs)
      acc.write(v.object_id(), {m.offset * kDouble, m.count * kDouble});
    double* base = v.buffer().data();
    parts.push_back({base, pl.sends, base, pl.recvs});
  }
  if (split != nullptr) {
    // The segments' storage (`planes`) must outlive the issue only: the engine copies them.
    split->start(std::move(parts), acc, "dist ghost planes");
    return;
  }
  join_capture(b, ctx, loc);
  st.issue(local, b.exchange_ctx, acc, "dist ghost planes", loc, [&](Stream& s, const OpInfo& op) {
    st.engine->exchange_parts(s, local, parts, DistType::f64, op);
  });
}

int stencil_product(const MatImpl& A, int local, const Context& ctx, LaMatvecArgs m,
                    const MatvecInputs& in, const AccessList& acc, const PartialSums& sums,
                    std::string_view what, std::source_location loc) {
  const MatBlock& b = *A.blocks[static_cast<std::size_t>(local)];
  if (in.right != nullptr) {
    throw Error(Errc::invalid_state,
                std::string(what) +
                    ": a stencil's product takes no vector scaling "
                    "(its Jacobi preconditioner is a constant)",
                loc);
  }
  const la::Vec* x = padded_input(A, b, 0, in.x, ctx, loc);
  const la::Vec* x2 = padded_input(A, b, 1, in.x2, ctx, loc);
  if (x != nullptr) m.x = x->data();
  if (x2 != nullptr) m.x2 = x2->data();
  std::vector<const la::Vec*> ghosted;
  for (const la::Vec* v : {x, x2}) {
    if (v != nullptr) ghosted.push_back(v);
  }
  std::optional<SplitExchange> split;
  if (splits_exchanges(A) && (b.lo >= 0 || b.hi >= 0) && !ghosted.empty()) {
    split.emplace(A.state(), local, ctx, loc);
    exchange_planes(A, local, b, ghosted, ctx, loc, &*split);
  } else if (separate_exchanges()) {
    for (const la::Vec* v : ghosted) exchange_planes(A, local, b, {&v, 1}, ctx, loc);
  } else {
    exchange_planes(A, local, b, ghosted, ctx, loc);
  }
  const LaStencil base = b.diag.impl()->stencil;
  const bool three = base.kind == LaStencilKind::d3p7 || base.kind == LaStencilKind::d3p27;
  const auto P = A.plane;
  const int nsums = la_math::matvec_sums(m.epilogue);
  LaKernels& k = la_kernels(ctx, loc);
  auto pass = [&](std::int64_t first, std::int64_t count, bool open_lo, bool open_hi, int part,
                  int spare_sms = 0) {
    LaMatvecArgs p = m;
    p.spare_sms = spare_sms;  // the boundary passes run after the exchange: every multiprocessor
    LaStencil s = base;
    (three ? s.nz : s.ny) = count;
    s.open_lo = open_lo;
    s.open_hi = open_hi;
    p.A = {};
    p.A.is_stencil = true;
    p.A.stencil = s;
    const auto shift = static_cast<std::ptrdiff_t>(first * P);
    p.x += shift;
    if (p.x2 != nullptr) p.x2 += shift;
    if (p.x_out != nullptr) p.x_out += shift;
    p.y += shift;
    if (p.z != nullptr) p.z += shift;
    if (p.left.v != nullptr) p.left.v += shift;
    AccessList a = acc;
    for (const la::Vec* v : {x, x2}) {
      if (v == nullptr) continue;
      const auto lo = static_cast<std::int64_t>(v->offset()) + first * P - (open_lo ? P : 0);
      const auto hi =
          static_cast<std::int64_t>(v->offset()) + (first + count) * P + (open_hi ? P : 0);
      a.read(v->object_id(),
             {static_cast<std::size_t>(lo) * kDouble, static_cast<std::size_t>(hi - lo) * kDouble});
    }
    if (nsums > 0) p.sums.out = sums(a, part);
    issue_tracked(ctx.impl(), a, what, loc,
                  [&](Stream& s, const OpInfo& op) { k.matvec(s, p, op); });
  };
  if (!A.split) {
    if (split) split->finish("dist ghost planes (finish)");
    pass(0, b.planes, b.lo >= 0, b.hi >= 0, 0);  // after the exchange
    return nsums > 0 ? 1 : 0;
  }
  // No ghost: overlaps the exchange, leaving free the multiprocessors the caller asks for (where
  // the host issues each product as it goes, a grid on all of them starts before the exchange's
  // kernels, which then wait for its end: docs/dist.md).
  // Where every rank is at an end (A.parts == 2), the end plane without a neighbour reads no
  // ghost either: the interior pass takes it (one pass less after the exchange).
  const bool fold_lo = A.parts == 2 && b.lo < 0, fold_hi = A.parts == 2 && b.hi < 0;
  const std::int64_t first = fold_lo ? 0 : 1, last = fold_hi ? b.planes : b.planes - 1;
  pass(first, last - first, !fold_lo, !fold_hi, 0, b.lo >= 0 || b.hi >= 0 ? m.spare_sms : 0);
  if (split) split->finish("dist ghost planes (finish)");
  int part = 1;
  if (!fold_lo) pass(0, 1, b.lo >= 0, true, part++);
  if (!fold_hi) pass(b.planes - 1, 1, true, b.hi >= 0, part++);
  return nsums > 0 ? part : 0;
}

/// Packs the values of `v` other ranks need into input slot `slot`'s send buffer (making the
/// slot's buffers on first use); returns the slot.
MatBlock::Slot& pack_ghosts(const MatImpl& A, const MatBlock& b, int slot, const la::Vec& v,
                            const Context& ctx, std::source_location loc) {
  const CommState& st = A.state();
  auto& s = b.slots[static_cast<std::size_t>(slot)];
  const std::size_t packed = b.send_index.size();
  {
    std::lock_guard lock(b.mutex);
    if (s.ghost.size() != b.ghosts) s.ghost = DeviceBuffer<double>(ctx, b.ghosts, loc);
    if (s.packed.size() != packed) s.packed = DeviceBuffer<double>(ctx, packed, loc);
  }
  if (packed > 0) {
    AccessList acc;
    const double* src = acc.read(v.buffer(), v.elements()) + v.offset();
    const std::int32_t* index = acc.read(b.send_index);
    double* dst = acc.write(s.packed);
    DistKernels& k = *st.kernels;
    issue_tracked(
        ctx.impl(), acc, "dist pack ghost values", loc,
        [&](Stream& stream, const OpInfo& op) { k.gather(stream, dst, src, index, packed, op); });
  }
  return s;
}

/// The accesses of slot `s`'s exchange: its packed values read, its ghosts written.
void mark_exchange(const MatBlock& b, const MatBlock::Slot& s, AccessList& acc) {
  for (const auto& seg : b.sends) {
    acc.read(s.packed.object_id(), {seg.offset * kDouble, seg.count * kDouble});
  }
  for (const auto& seg : b.recvs) {
    acc.write(s.ghost.object_id(), {seg.offset * kDouble, seg.count * kDouble});
  }
}

/// Packs the values of `v` other ranks need and exchanges them into input slot `slot`'s ghost
/// buffer, on the rank's exchange context; returns the ghost buffer.
const DeviceBuffer<double>& exchange_ghosts(const MatImpl& A, int local, const MatBlock& b,
                                            int slot, const la::Vec& v, const Context& ctx,
                                            std::source_location loc) {
  const CommState& st = A.state();
  auto& s = pack_ghosts(A, b, slot, v, ctx, loc);
  join_capture(b, ctx, loc);
  AccessList acc;
  mark_exchange(b, s, acc);
  st.issue(local, b.exchange_ctx, acc, "dist ghost values", loc,
           [&](Stream& stream, const OpInfo& op) {
             st.engine->exchange(stream, local, s.packed.data(), b.sends, s.ghost.data(), b.recvs,
                                 DistType::f64, op);
           });
  return s.ghost;
}

int csr_product(const MatImpl& A, int local, const Context& ctx, LaMatvecArgs m,
                const MatvecInputs& in, const AccessList& acc, const PartialSums& sums,
                std::string_view what, std::source_location loc) {
  const MatBlock& b = *A.blocks[static_cast<std::size_t>(local)];
  LaKernels& k = la_kernels(ctx, loc);
  const int nsums = la_math::matvec_sums(m.epilogue);
  const la::Vec* inputs[3] = {in.x, in.x2, in.right};
  auto mark_inputs = [&](AccessList& a) {
    for (const la::Vec* v : inputs) {
      if (v != nullptr) (void)a.read(v->buffer(), v->elements());
    }
  };
  auto issue = [&](AccessList& a, const LaMatvecArgs& p) {
    issue_tracked(ctx.impl(), a, what, loc,
                  [&](Stream& s, const OpInfo& op) { k.matvec(s, p, op); });
  };
  // The ghosts first: their exchange runs while the diagonal block's product does (on the
  // exchange context, or started here and finished after it: SplitExchange).
  const DeviceBuffer<double>* ghost[3] = {nullptr, nullptr, nullptr};
  std::optional<SplitExchange> split;
  if (!b.sends.empty() || b.ghosts > 0) {
    if (splits_exchanges(A)) {
      split.emplace(A.state(), local, ctx, loc);
      std::vector<DistExchangePart> parts;
      AccessList a;
      for (int slot = 0; slot < 3; ++slot) {
        if (inputs[slot] == nullptr) continue;
        auto& s = pack_ghosts(A, b, slot, *inputs[slot], ctx, loc);
        mark_exchange(b, s, a);
        parts.push_back({s.packed.data(), b.sends, s.ghost.data(), b.recvs});
        ghost[slot] = &s.ghost;
      }
      split->start(std::move(parts), a, "dist ghost values");
    } else {
      for (int slot = 0; slot < 3; ++slot) {
        if (inputs[slot] != nullptr)
          ghost[slot] = &exchange_ghosts(A, local, b, slot, *inputs[slot], ctx, loc);
      }
    }
  }
  if (b.ghosts == 0) {  // this rank's rows read no other rank's values
    AccessList a = acc;
    mark_inputs(a);
    m.A = b.diag.impl()->op(a);
    if (nsums > 0) m.sums.out = sums(a, 0);
    issue(a, m);
    if (split) split->finish("dist ghost values (finish)");  // its sends, to the ranks that read
    return nsums > 0 ? 1 : 0;
  }
  // The diagonal block's product (its epilogue's sums, if any, discarded).
  {
    LaMatvecArgs p = m;
    AccessList a = acc;
    mark_inputs(a);
    p.A = b.diag.impl()->op(a);
    if (m.epilogue == LaEpilogue::store_dot) p.epilogue = LaEpilogue::store;
    p.sums.out = nullptr;
    issue(a, p);
  }
  if (split) split->finish("dist ghost values (finish)");
  // The off-diagonal block's, added on: over its runs of nonempty rows where it has them and
  // the epilogue sums nothing over the rows (a residual's norm needs every row), else whole.
  auto off_product = [&](const la::Mat& part, std::int64_t first) {
    LaMatvecArgs p = m;
    AccessList a = acc;
    p.A = part.impl()->op(a);
    p.x = a.read(*ghost[0]);
    if (m.x2 != nullptr) p.x2 = a.read(*ghost[1]);
    if (m.right.v != nullptr) p.right.v = a.read(*ghost[2]);
    p.x_out = nullptr;
    switch (m.epilogue) {
      case LaEpilogue::store:
      case LaEpilogue::add:
      case LaEpilogue::store_dot:
        p.epilogue = LaEpilogue::add;
        p.z = m.y;
        break;
      case LaEpilogue::sub:
        p.z = m.y;
        break;
      case LaEpilogue::residual:
        if (nsums > 0) p.sums.out = sums(a, 0);
        break;
    }
    const auto shift = static_cast<std::ptrdiff_t>(first);
    p.y += shift;
    if (p.z != nullptr) p.z += shift;
    if (p.left.v != nullptr) p.left.v += shift;
    issue(a, p);
  };
  if (!b.off_runs.empty() && m.epilogue != LaEpilogue::residual) {
    for (const auto& run : b.off_runs) off_product(run.m, run.first);
  } else {
    off_product(b.off, 0);
  }
  if (m.epilogue == LaEpilogue::store_dot) {
    LaReduceArgs r;
    r.op = LaReduceOp::dot;
    r.n = static_cast<std::size_t>(b.diag.rows());
    r.x = m.y;
    r.y = m.z;
    AccessList a = acc;
    r.out = sums(a, 0);
    issue_tracked(ctx.impl(), a, what, loc,
                  [&](Stream& s, const OpInfo& op) { k.reduce(s, r, op); });
  }
  return nsums > 0 ? 1 : 0;
}

}  // namespace

int product(const MatImpl& A, int local, const Context& ctx, LaMatvecArgs m, const MatvecInputs& in,
            const AccessList& acc, const PartialSums& sums, std::string_view what,
            std::source_location loc) {
  return A.matrix_free ? stencil_product(A, local, ctx, m, in, acc, sums, what, loc)
                       : csr_product(A, local, ctx, m, in, acc, sums, what, loc);
}

}  // namespace sluice::dist::detail
