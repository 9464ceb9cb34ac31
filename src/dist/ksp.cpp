// dist::Ksp (sluice/dist.hpp): la's Krylov solvers on each rank's block. The la solver loop
// (src/la/ksp_run.hpp) runs unchanged, with its kernels; this file is its KspParallel
// (src/la/ksp_parallel.hpp): the products go through the distributed product (product.cpp), and
// each reduction's partial sums are gathered from every rank (an allgather of a few doubles, on
// the device) and added up in rank order (src/dist/combine.hpp) by a finalize step before la's
// solver logic runs on them: on the device in async and graph modes, on the host in sync mode.

#include <bit>
#include <cstdlib>
#include <cstring>
#include <string>

#include "deps/issue.hpp"
#include "dist/combine.hpp"
#include "dist/mat_impl.hpp"
#include "la/kernel_math.hpp"
#include "la/ksp_parallel.hpp"
#include "sluice/error.hpp"

using namespace sluice::detail;  // la's kernel argument types (sluice/ext/la_kernels.hpp)

namespace sluice::dist {
namespace detail {

namespace {

constexpr std::size_t kSlot = static_cast<std::size_t>(la_math::kMaxSums);
/// Parts one reduction may gather: a product's (kParts), after a fused step's for
/// single-reduction CG.
constexpr std::size_t kReduceParts = static_cast<std::size_t>(kParts) + 1;

/// One local rank's buffers for its reductions.
struct RankBuffers {
  DeviceBuffer<double> partial;   // kReduceParts parts of kMaxSums
  DeviceBuffer<double> gathered;  // every rank's partial, in rank order
  PinnedBuffer<double> host;      // sync mode: the gathered sums on the host
};

class RankSolve final : public sluice::detail::la::KspParallel {
 public:
  /// `spare_sms`: what each product overlapping a ghost exchange leaves to its kernels.
  RankSolve(const MatImpl& A, int local, RankBuffers& buffers, int spare_sms)
      : A_(A), st_(A.state()), local_(local), b_(buffers), spare_sms_(spare_sms) {}

  la::Vec make_vec(const Context& ctx, std::size_t n, std::source_location loc) override {
    const std::size_t halo = A_.layout.halo();
    return la::Vec(ctx, n, halo, halo, loc);
  }

  double* partial_sums(AccessList& acc, int part) override {
    const auto at = static_cast<std::size_t>(part) * kSlot;
    return acc.write(b_.partial, {at * sizeof(double), kSlot * sizeof(double)}) + at;
  }

  int matvec(const Context& ctx, const LaMatvecArgs& m, const sluice::detail::la::MatvecInputs& in,
             const AccessList& acc, int first_part, std::string_view what,
             std::source_location loc) override {
    LaMatvecArgs args = m;
    args.spare_sms = spare_sms_;
    return product(
        A_, local_, ctx, args, in, acc,
        [this, first_part](AccessList& a, int part) { return partial_sums(a, first_part + part); },
        what, loc);
  }

  void reduce(const Context& ctx, int parts, int split, LaFinalize fin, LaKspState* state,
              const AccessList& state_acc, bool tf_dx, double* host_sums, std::string_view what,
              std::source_location loc) override {
    const int ranks = st_.size();
    const std::size_t count = static_cast<std::size_t>(parts) * kSlot;
    const std::size_t bytes = count * static_cast<std::size_t>(ranks) * sizeof(double);
    DistFinalizeArgs a;
    a.state = state;
    a.ranks = ranks;
    a.parts = parts;
    a.split = split;
    a.finalize = fin;
    a.tf_dx = tf_dx;
    DistEngine& engine = *st_.engine;
    if (ranks > 1 && count <= engine.fused_gather_capacity()) {
      // One operation: the gather and (async) the finalize, in one kernel per rank.
      AccessList acc = state != nullptr ? state_acc : AccessList{};
      const double* send = acc.read(b_.partial, {0, count * sizeof(double)});
      double* recv = acc.write(b_.gathered, {0, bytes});
      a.gathered = recv;
      const DistFinalizeArgs* f = state != nullptr ? &a : nullptr;
      st_.issue(local_, ctx, acc, state != nullptr ? what : "dist gather of partial sums", loc,
                [&](Stream& s, const OpInfo& op) {
                  engine.gather_finalize(s, local_, send, recv, count, f, op);
                });
      if (state == nullptr) to_host(ctx, b_.gathered, bytes, ranks, parts, split, host_sums, loc);
      return;
    }
    const DeviceBuffer<double>* source = &b_.partial;
    if (ranks > 1) {
      AccessList acc;
      const double* send = acc.read(b_.partial, {0, count * sizeof(double)});
      double* recv = acc.write(b_.gathered, {0, bytes});
      st_.issue(local_, ctx, acc, "dist allgather of partial sums", loc,
                [&](Stream& s, const OpInfo& op) {
                  engine.allgather(s, local_, send, recv, count, DistType::f64, false, op);
                });
      source = &b_.gathered;
    }
    if (state != nullptr) {
      AccessList acc = state_acc;
      a.gathered = acc.read(*source, {0, bytes});
      DistKernels& k = *st_.kernels;
      sluice::detail::issue_tracked(ctx.impl(), acc, what, loc,
                                    [&](Stream& s, const OpInfo& op) { k.finalize(s, a, op); });
      return;
    }
    to_host(ctx, *source, bytes, ranks, parts, split, host_sums, loc);
  }

  void add_key(std::vector<std::uint64_t>& key) const override {
    auto add = [&key](auto v) { key.push_back(static_cast<std::uint64_t>(v)); };
    add(reinterpret_cast<std::uintptr_t>(&A_));
    add(local_);
    for (const auto* b : {&b_.partial, &b_.gathered}) {
      add(reinterpret_cast<std::uintptr_t>(b->data()));
      add(b->object_id());
    }
  }

 private:
  /// Sync mode: the gathered sums to the host, added up there.
  void to_host(const Context& ctx, const DeviceBuffer<double>& source, std::size_t bytes, int ranks,
               int parts, int split, double* host_sums, std::source_location loc) {
    sluice::detail::copy_bytes(ctx, b_.host.data(), source.data(), bytes, loc);
    wait_for_host_access(b_.host.object_id(), Access::read, {0, bytes}, loc);
    dist_math::combine(b_.host.data(), ranks, parts, host_sums, split);
  }

  const MatImpl& A_;
  const CommState& st_;
  int local_;
  RankBuffers& b_;
  int spare_sms_;
};

}  // namespace

struct KspWork {
  std::vector<la::Ksp> ksps;  // per local rank, on its diagonal block
  std::vector<RankBuffers> buffers;
};

}  // namespace detail

Ksp::Ksp(Mat A, la::KspOptions options)
    : A_(std::move(A)), options_(std::move(options)), work_(std::make_unique<detail::KspWork>()) {
  if (!A_.valid()) throw Error(Errc::invalid_argument, "dist::Ksp: the Mat is empty");
  const auto& st = A_.impl()->state();
  for (int l = 0; l < st.locals(); ++l) {
    work_->ksps.emplace_back(A_.diagonal_block(l), options_);
    const Context& ctx = st.contexts[static_cast<std::size_t>(l)];
    detail::RankBuffers b;
    b.partial = DeviceBuffer<double>(ctx, detail::kReduceParts * detail::kSlot);
    b.gathered = DeviceBuffer<double>(
        ctx, detail::kReduceParts * detail::kSlot * static_cast<std::size_t>(st.size()));
    b.host = PinnedBuffer<double>(
        ctx.device(), detail::kReduceParts * detail::kSlot * static_cast<std::size_t>(st.size()));
    work_->buffers.push_back(std::move(b));
  }
}

Ksp::~Ksp() = default;
Ksp::Ksp(Ksp&&) noexcept = default;
Ksp& Ksp::operator=(Ksp&&) noexcept = default;

void Ksp::set_options(la::KspOptions options) {
  for (auto& k : work_->ksps) k.set_options(options);
  options_ = std::move(options);
}

int Ksp::check_interval() const noexcept {
  return work_->ksps.empty() ? 0 : work_->ksps.front().check_interval();
}

namespace {

/// Throws the same Error on every process unless all gave the same sizes and options: a rank
/// that iterated differently would wait for ever in a reduction the others never make.
void check_same_solve(const detail::CommState& st, std::int64_t rows, const la::KspOptions& o,
                      std::source_location loc) {
  const std::uint64_t mine[] = {static_cast<std::uint64_t>(rows),
                                static_cast<std::uint64_t>(o.type),
                                static_cast<std::uint64_t>(o.pc),
                                static_cast<std::uint64_t>(o.cg_variant),
                                static_cast<std::uint64_t>(o.norm_type),
                                static_cast<std::uint64_t>(o.mode),
                                static_cast<std::uint64_t>(o.max_it),
                                static_cast<std::uint64_t>(o.check_every),
                                std::bit_cast<std::uint64_t>(o.rtol),
                                std::bit_cast<std::uint64_t>(o.atol),
                                std::bit_cast<std::uint64_t>(o.dtol),
                                static_cast<std::uint64_t>(o.fixed_iterations),
                                static_cast<std::uint64_t>(o.initial_guess_nonzero)};
  static constexpr const char* kNames[] = {"the vectors' rows",
                                           "type",
                                           "preconditioner",
                                           "CG variant",
                                           "norm type",
                                           "mode",
                                           "max_it",
                                           "check_every",
                                           "rtol",
                                           "atol",
                                           "dtol",
                                           "fixed_iterations",
                                           "initial_guess_nonzero"};
  constexpr std::size_t n = std::size(mine);
  std::vector<std::uint64_t> all(n * static_cast<std::size_t>(st.procs->size()));
  st.procs->allgather(mine, sizeof mine, all.data());
  for (int p = 1; p < st.procs->size(); ++p) {
    for (std::size_t k = 0; k < n; ++k) {
      if (all[k] == all[static_cast<std::size_t>(p) * n + k]) continue;
      throw Error(Errc::invalid_argument,
                  "dist::Ksp::solve: process " + std::to_string(p) + " solves with other " +
                      kNames[k] + " than process 0; every process must make the same solve",
                  loc);
    }
  }
}

/// SLUICE_DIST_STEPWISE=1: one rank solves through the distributed loop too (every step's
/// reduction and finalize, no communication), a diagnostic that tells the cost of the loop
/// across ranks from that of the communication (docs/dist.md, "Where the time goes").
bool stepwise_on_one_rank() {
  const char* v = std::getenv("SLUICE_DIST_STEPWISE");
  return v != nullptr && v[0] == '1';
}

}  // namespace

la::KspResult Ksp::solve(const Vec& b, Vec& x, std::source_location loc) {
  if (!b.valid() || !x.valid()) {
    throw Error(Errc::invalid_state, "dist::Ksp::solve: b or x is a default-constructed Vec", loc);
  }
  if (!(b.comm() == A_.comm()) || !(x.comm() == A_.comm()) || !b.layout().same_rows(A_.layout()) ||
      !x.layout().same_rows(A_.layout())) {
    throw Error(Errc::invalid_argument,
                "dist::Ksp::solve: b and x must split their rows as the matrix does; make them "
                "with A.create_vec()",
                loc);
  }
  const auto& st = A_.impl()->state();
  check_same_solve(st, A_.rows(), options_, loc);
  if (st.size() == 1 && !stepwise_on_one_rank()) {
    // One rank: la's solve as it is (on a GPU, CG's iterations in blocks of one kernel).
    return work_->ksps.front().solve(b.local(0), x.local(0), x.local(0).context(), loc);
  }
  std::vector<la::KspResult> results(static_cast<std::size_t>(st.locals()));
  // Where the host issues each iteration as it goes (sync mode; graph mode across ranks loops on
  // the host), a product's grid fills the device before the exchange's kernels start, and they
  // wait for its end; leaving them multiprocessors pays there (2 and 4 H200s: sync 0.75 -> 0.82,
  // graph 0.75 -> 0.85 weak efficiency with 16), while in async mode, whose host runs ahead, the
  // kernels are queued in time and the product only loses bandwidth (0.93 -> 0.89).
  // Graph mode across ranks captures its blocks of iterations, whose exchanges may take another
  // path than the host-issued ones (the peer path's epochs are the host's: NCCL in a graph).
  const int spare = options_.mode == la::SolveMode::async
                        ? 0
                        : st.engine->exchange_sms(options_.mode == la::SolveMode::graph);
  // Each local rank's loop waits on the host for its reductions (and so for the other ranks):
  // one thread per local rank.
  st.each(
      [&](int l) {
        detail::RankSolve par(*A_.impl(), l, work_->buffers[static_cast<std::size_t>(l)], spare);
        results[static_cast<std::size_t>(l)] = work_->ksps[static_cast<std::size_t>(l)].solve(
            b.local(l), x.local(l), x.local(l).context(), par, loc);
      },
      true);
  return results.front();
}

}  // namespace sluice::dist
