// Krylov solvers: PETSc's CG and TFQMR, in sync, async and graph modes (sluice/la.hpp).
//
// Both modes issue the same fused kernels in the same order; they differ in where the scalar
// logic runs (src/la/ksp_logic.hpp). In sync mode each reduction's sums land in pinned memory,
// the host waits for that kernel alone, runs the logic on its copy of the solver state and
// passes the resulting scalars by value to the next kernels. In async mode the logic runs on the
// device at the end of each reduction, the kernels read their scalars from the device state, and
// every kernel is guarded: once the state says the solve stopped, later kernels return at once.
// So nothing needs to be undone when the host learns of convergence late: x is exactly the
// iterate of the stopping iteration, and the iteration count, reason and history equal sync's.
//
// The host reads the async state every `check_every` iterations by a snapshot copy, keeping one
// block of iterations queued ahead of the snapshot it waits for (the round trip overlaps the
// device's work). With fixed_iterations there is nothing to decide early: all iterations are
// queued and only the final state is read. A block of iterations is a fixed sequence of kernels
// with fixed arguments (no host decision, no iteration number in any argument), so it can be
// captured into a graph and replayed unchanged: graph mode records the set-up and a while node
// whose body is such a block, each ending with an operation that sets the loop's condition from
// the device state and copies the state to pinned memory, once per key (every address, tracker
// id and option the kernels were given), and relaunches it; the host issues one operation and
// waits once.

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <string>

#include "la/ksp_logic.hpp"
#include "la/ksp_parallel.hpp"
#include "la/mat.hpp"
#include "sluice/event.hpp"
#include "sluice/graph.hpp"

namespace sluice {
namespace la {

using detail::AccessList;
using detail::issue_tracked;
using detail::la::check_device;
using detail::la::check_sizes;
using detail::la::check_vec;
using detail::la::kernels;
using detail::la::KspParallel;
using detail::la::MatvecInputs;
using namespace sluice::detail;  // the la kernels' argument types (sluice/ext/la_kernels.hpp)
namespace logic = detail::ksp_logic;

namespace {
/// Marks `v` as read for a fused step: LaFusedArgs' vector slots serve as inputs in some steps
/// and outputs in others, so they are not pointers to const.
double* input(AccessList& acc, const Vec& v) {
  return const_cast<double*>(acc.read(v));
}
}  // namespace

// ---- names --------------------------------------------------------------------------------------

std::string_view to_string(ConvergedReason r) noexcept {
  switch (r) {
    case ConvergedReason::iterating:
      return "CONVERGED_ITERATING";
    case ConvergedReason::converged_rtol:
      return "CONVERGED_RTOL";
    case ConvergedReason::converged_atol:
      return "CONVERGED_ATOL";
    case ConvergedReason::converged_its:
      return "CONVERGED_ITS";
    case ConvergedReason::diverged_its:
      return "DIVERGED_ITS";
    case ConvergedReason::diverged_dtol:
      return "DIVERGED_DTOL";
    case ConvergedReason::diverged_breakdown:
      return "DIVERGED_BREAKDOWN";
    case ConvergedReason::diverged_indefinite_pc:
      return "DIVERGED_INDEFINITE_PC";
    case ConvergedReason::diverged_nanorinf:
      return "DIVERGED_NANORINF";
    case ConvergedReason::diverged_indefinite_mat:
      return "DIVERGED_INDEFINITE_MAT";
  }
  return "UNKNOWN";
}

namespace {
template <class E, std::size_t N>
E parse_name(std::string_view name, const std::pair<std::string_view, E> (&table)[N],
             const char* what) {
  std::string accepted;
  for (const auto& [n, v] : table) {
    if (n == name) return v;
    accepted += (accepted.empty() ? "" : ", ") + std::string(n);
  }
  throw Error(Errc::invalid_argument,
              "unknown " + std::string(what) + " '" + std::string(name) + "'; use " + accepted);
}
template <class E, std::size_t N>
std::string_view name_of(E v, const std::pair<std::string_view, E> (&table)[N]) {
  for (const auto& [n, e] : table) {
    if (e == v) return n;
  }
  return "?";
}
constexpr std::pair<std::string_view, KspType> kKspTypes[] = {{"cg", KspType::cg},
                                                              {"tfqmr", KspType::tfqmr}};
constexpr std::pair<std::string_view, PcType> kPcTypes[] = {{"none", PcType::none},
                                                            {"jacobi", PcType::jacobi}};
constexpr std::pair<std::string_view, KspNormType> kNormTypes[] = {
    {"none", KspNormType::none},
    {"preconditioned", KspNormType::preconditioned},
    {"unpreconditioned", KspNormType::unpreconditioned},
    {"natural", KspNormType::natural}};
constexpr std::pair<std::string_view, SolveMode> kModes[] = {
    {"sync", SolveMode::sync}, {"async", SolveMode::async}, {"graph", SolveMode::graph}};
}  // namespace

KspType parse_ksp_type(std::string_view n) {
  return parse_name(n, kKspTypes, "KSP type");
}
PcType parse_pc_type(std::string_view n) {
  return parse_name(n, kPcTypes, "preconditioner");
}
KspNormType parse_norm_type(std::string_view n) {
  return parse_name(n, kNormTypes, "norm type");
}
SolveMode parse_solve_mode(std::string_view n) {
  return parse_name(n, kModes, "solve mode");
}
std::string_view to_string(KspType t) noexcept {
  return name_of(t, kKspTypes);
}
std::string_view to_string(PcType t) noexcept {
  return name_of(t, kPcTypes);
}
std::string_view to_string(KspNormType t) noexcept {
  return name_of(t, kNormTypes);
}
std::string_view to_string(SolveMode m) noexcept {
  return name_of(m, kModes);
}

// ---- work space ---------------------------------------------------------------------------------

struct Ksp::Work {
  std::size_t n = 0;
  Device device;
  Vec r, z, p, w, rp, v, t, q, u, d, y;
  Vec p2;       // CG: the other of the two direction vectors (see cg_iteration)
  Vec invdiag;  // Jacobi of a CSR matrix
  bool invdiag_ready = false;
  std::size_t hist_cap = 0;
  DeviceBuffer<LaKspState> state;  // async: the device state
  DeviceBuffer<double> hist;       // async: the residual history
  PinnedBuffer<LaKspState> slots;  // async: snapshots
  PinnedBuffer<double> sums;       // sync: the sums of the last reduction
  std::vector<double> host_hist;   // sync: the residual history
  Managed<std::int32_t> running;   // graph: the while node's condition
  /// graph: the recorded solve and what it was recorded for (every address, tracker id and
  /// option its kernels were given); a solve with another key updates or re-instantiates it.
  std::vector<std::uint64_t> graph_key;
  std::optional<GraphExec> graph;
};

namespace {

/// History entries kept at most (8 MiB); norms past them are counted but not stored.
constexpr std::size_t kMaxHistory = std::size_t{1} << 20;

/// KspOptions::check_every, or where it is 0 the interval chosen for the solver and operator.
int check_interval(const KspOptions& o, bool matrix_free) {
  if (o.check_every > 0) return o.check_every;
  return o.type == KspType::cg && matrix_free ? 32 : 8;
}

/// One solve: the sequence of kernels, and the mode that decides where scalars live.
class Run {
 public:
  Run(const Mat::Impl& A, const KspOptions& o, Ksp::Work& work, const Vec& b, Vec& x,
      const Context& ctx, KspParallel* par, std::source_location loc)
      : par_(par),
        A_(A),
        o_(o),
        w_(work),
        b_(b),
        x_(x),
        ctx_(ctx),
        loc_(loc),
        k_(kernels(ctx, loc)),
        async_(o.mode != SolveMode::sync),
        graph_(o.mode == SolveMode::graph) {}

  KspResult solve() {
    prepare();
    if (graph_) {
      run_graph();
      return finish();
    }
    if (o_.type == KspType::cg) {
      // Async from a zero guess: the set-up travels with the first block of iterations (one
      // operation instead of three; a backend may run it in the block's kernel).
      if (async_ && cg_folds_setup()) {
        setup_pending_ = true;
      } else {
        upload_state();
        cg_setup();
      }
      if (async_) {
        run_async([this](int n, int slot) {
          if (par_ == nullptr) return cg_iterations(n, slot);
          // Across ranks every step ends in a reduction: the iterations one by one.
          for (int i = 0; i < n; ++i) cg_iteration();
          return false;
        });
      } else {
        while (st_.stop == 0 && cg_iteration()) {
        }
      }
    } else {
      upload_state();
      tf_setup();
      if (async_) {
        run_async([this](int n, int slot) {
          if (par_ == nullptr) return tf_iterations(n, slot);
          for (int i = 0; i < n; ++i) tf_iteration();  // across ranks, as CG's above
          return false;
        });
      } else {
        while (st_.stop == 0 && tf_iteration()) {
        }
      }
      if (right_) unwind();
    }
    return finish();
  }

 private:
  // ---- set-up ----

  /// v as a work vector of n elements on ctx_ (with the room a distributed product needs).
  void ensure(Vec& v, std::size_t n) const {
    if (v.size() == n && !v.empty() && v.device() == ctx_.device()) return;
    v = par_ != nullptr ? par_->make_vec(ctx_, n, loc_) : Vec(ctx_, n, loc_);
  }

  void prepare() {
    const auto n = static_cast<std::size_t>(A_.rows);
    const bool cg = o_.type == KspType::cg;
    const std::vector<Vec*> vecs =
        cg ? std::vector<Vec*>{&w_.r, &w_.p, &w_.p2, &w_.w}
           : std::vector<Vec*>{&w_.r, &w_.rp, &w_.v, &w_.t, &w_.q, &w_.p, &w_.u, &w_.d};
    for (Vec* v : vecs) ensure(*v, n);
    // CG stores z only where the preconditioner is a vector (see cg_stores_z).
    if (cg && o_.pc == PcType::jacobi && !A_.is_stencil) ensure(w_.z, n);
    // Preconditioner: a constant for a stencil (its diagonal is), a vector for CSR.
    if (o_.pc == PcType::jacobi) {
      if (A_.is_stencil) {
        pc_ = {nullptr, 1.0 / A_.stencil.center};
      } else {
        if (!w_.invdiag_ready || w_.invdiag.size() != n || w_.invdiag.device() != ctx_.device()) {
          ensure(w_.invdiag, n);
          diagonal_into(w_.invdiag);
          LaVecArgs r;
          r.op = LaVecOp::reciprocal_or_one;
          r.n = n;
          AccessList acc;
          r.y = acc.read_write(w_.invdiag);
          r.x = r.y;
          issue_tracked(ctx_.impl(), acc, "PCSetUp_Jacobi", loc_,
                        [&](Stream& s, const OpInfo& op) { k_.vector(s, r, op); });
          w_.invdiag_ready = true;
        }
        pc_ = {w_.invdiag.data(), 1.0};
      }
    } else {
      pc_ = {nullptr, 1.0};
    }
    // TFQMR applies the preconditioner on the left for the preconditioned norm, on the right
    // for the unpreconditioned one (PETSc's supported norms of KSPTFQMR).
    right_ = !cg && o_.pc != PcType::none && o_.norm_type == KspNormType::unpreconditioned;
    if (right_) ensure(w_.y, n);
    left_pc_ = right_ ? LaDiag{} : pc_;
    right_pc_ = right_ ? pc_ : LaDiag{};

    st_ = LaKspState{};
    st_.rtol = o_.rtol;
    st_.atol = o_.atol;
    st_.dtol = o_.dtol;
    st_.max_it = o_.max_it;
    st_.norm_type = static_cast<std::int32_t>(o_.norm_type);
    st_.skip_test = o_.fixed_iterations ? 1 : 0;
    st_.nonzero_guess = o_.initial_guess_nonzero ? 1 : 0;
    const std::size_t per_it = cg ? 1 : 2;
    w_.hist_cap = std::min(kMaxHistory, per_it * static_cast<std::size_t>(o_.max_it) + 2);
    st_.hist_cap = static_cast<std::int32_t>(w_.hist_cap);

    if (async_) {
      if (w_.state.empty() || w_.device != ctx_.device()) {
        w_.state = DeviceBuffer<LaKspState>(ctx_, 1, loc_);
        w_.slots = PinnedBuffer<LaKspState>(ctx_.device(), 2, loc_);
      }
      if (w_.hist.size() < w_.hist_cap || w_.device != ctx_.device()) {
        w_.hist = DeviceBuffer<double>(ctx_, w_.hist_cap, loc_);
      }
      w_.device = ctx_.device();
      st_.hist = w_.hist.data();
      dst_ = w_.state.data();
    } else {
      if (w_.sums.size() == 0 || w_.device != ctx_.device()) {
        w_.sums = PinnedBuffer<double>(ctx_.device(), la_math::kMaxSums, loc_);
      }
      w_.device = ctx_.device();
      w_.host_hist.assign(w_.hist_cap, 0.0);
      st_.hist = w_.host_hist.data();
    }
  }

  /// Async and graph modes: the device state's initial value (st_ travels with the operation).
  void upload_state() {
    if (!async_) return;
    AccessList acc;
    LaKspState* state = acc.write(w_.state);
    issue_tracked(ctx_.impl(), acc, "KSP state", loc_,
                  [&](Stream& s, const OpInfo& op) { k_.set_state(s, state, st_, op); });
  }

  /// TFQMR with right preconditioning: x = x0 + B y, back from the preconditioned variable.
  void unwind() {
    LaFusedArgs f = fused_args(LaFusedOp::unwind);
    AccessList acc;
    f.x = acc.read_write(x_);
    f.t = input(acc, w_.y);
    f.pc = pc_;
    read_pc(acc);
    issue_tracked(ctx_.impl(), acc, "KSP unwind preconditioner", loc_,
                  [&](Stream& s, const OpInfo& op) { k_.fused(s, f, op); });
  }

  void diagonal_into(Vec& d) {
    AccessList acc;
    LaOperator op = A_.op(acc);
    double* out = acc.write(d);
    issue_tracked(ctx_.impl(), acc, "MatGetDiagonal", loc_,
                  [&](Stream& s, const OpInfo& info) { k_.diagonal(s, op, out, info); });
  }

  static ByteRange slot_range(int slot) {
    return {static_cast<std::size_t>(slot) * sizeof(LaKspState), sizeof(LaKspState)};
  }

  // ---- issuing ----

  /// A scalar of the state: by value in sync mode, by device address in async mode.
  LaScalar scalar(double LaKspState::*m) const {
    if (!async_) return {st_.*m, nullptr, nullptr, 1.0};
    const auto offset =
        reinterpret_cast<const char*>(&(st_.*m)) - reinterpret_cast<const char*>(&st_);
    return {0.0, reinterpret_cast<const double*>(reinterpret_cast<const char*>(dst_) + offset),
            nullptr, 1.0};
  }

  LaFusedArgs fused_args(LaFusedOp op) const {
    LaFusedArgs f;
    f.op = op;
    f.n = static_cast<std::size_t>(A_.rows);
    f.norm_type = st_.norm_type;
    return f;
  }

  /// Marks the preconditioner's vector, if any, as read (pc_ points into it).
  void read_pc(AccessList& acc) const {
    if (pc_.v != nullptr) (void)acc.read(w_.invdiag);
  }

  /// The sums of a solver step, and the accesses that go with them in this mode. Across ranks
  /// (par_) the kernel leaves them in the partial sums and guards itself by the state only.
  LaSums sums_for(LaFinalize fin, AccessList& acc) const {
    LaSums s;
    if (par_ != nullptr) {
      // (A backend may store the state back unchanged after a kernel that read it.)
      if (async_) s.state = acc.read_write(w_.state);
      if (fin != LaFinalize::none) s.out = par_->partial_sums(acc, 0);
      return s;
    }
    if (async_) {
      s.state = acc.read_write(w_.state);
      s.finalize = fin;
      (void)acc.read_write(w_.hist);  // the state's history pointer, st_.hist
    } else if (fin != LaFinalize::none) {
      s.out = acc.write(w_.sums);
    }
    return s;
  }

  /// After a step: sync mode waits for its sums and runs its logic on the host. Across ranks
  /// (par_), the `parts` parts of partial sums are combined first (async: and the logic runs on
  /// the device state).
  void conclude(LaFinalize fin, int parts = 1, bool tf_dx = false, const char* what = "") {
    if (fin == LaFinalize::none) return;
    double sums[la_math::kMaxSums];
    if (par_ != nullptr) {
      AccessList state_acc;
      LaKspState* state = nullptr;
      if (async_) {
        state = state_acc.read_write(w_.state);
        (void)state_acc.read_write(w_.hist);
      }
      par_->reduce(ctx_, parts, fin, state, state_acc, tf_dx, sums, what, loc_);
      if (async_) return;
    } else {
      if (async_) return;
      wait_for_host_access(w_.sums.object_id(), Access::read, {}, loc_);
      std::memcpy(sums, w_.sums.data(), sizeof sums);
    }
    const auto before = st_.nhist;
    logic::finalize(fin, st_, sums);
    if (st_.nhist != before) monitor_sync(before);
  }

  void fused(LaFusedArgs f, AccessList& acc, LaFinalize fin, const char* what) {
    f.sums = sums_for(fin, acc);
    issue_tracked(ctx_.impl(), acc, what, loc_,
                  [&](Stream& s, const OpInfo& op) { k_.fused(s, f, op); });
    conclude(fin, 1, f.op == LaFusedOp::tf_dx, what);
  }

  /// A product whose inputs are `in`'s vectors (m's pointers to them already set); `acc` holds
  /// the accesses of everything else.
  void matvec(LaMatvecArgs m, const MatvecInputs& in, AccessList& acc, LaFinalize fin,
              const char* what) {
    if (par_ != nullptr) {
      AccessList guard;
      if (async_) m.sums.state = guard.read_write(w_.state);
      for (const auto& u : guard.uses()) acc.add(u);
      const int parts = par_->matvec(ctx_, m, in, acc, what, loc_);
      conclude(fin, parts, false, what);
      return;
    }
    for (const Vec* v : {in.x, in.x2, in.right}) {
      if (v != nullptr) (void)acc.read(*v);
    }
    m.A = A_.op(acc);
    m.sums = sums_for(fin, acc);
    issue_tracked(ctx_.impl(), acc, what, loc_,
                  [&](Stream& s, const OpInfo& op) { k_.matvec(s, m, op); });
    conclude(fin);
  }

  /// The vector of the right scaling, if a vector (the Jacobi preconditioner of a CSR matrix).
  [[nodiscard]] const Vec* right_vec() const {
    return right_pc_.v != nullptr ? &w_.invdiag : nullptr;
  }

  void vector(LaVecOp op, Vec& y, const Vec* x, double alpha, const char* what) {
    LaVecArgs v;
    v.op = op;
    v.n = y.size();
    AccessList acc;
    v.y = acc.write(y);
    v.x = x != nullptr ? acc.read(*x) : nullptr;
    v.alpha = {alpha, nullptr, nullptr, 1.0};
    issue_tracked(ctx_.impl(), acc, what, loc_,
                  [&](Stream& s, const OpInfo& info) { k_.vector(s, v, info); });
  }

  /// r = b - A x (nonzero guess) or r = b with x = 0, and the norm of b if the test needs it.
  void initial_residual(Vec& r) {
    if (!o_.initial_guess_nonzero) {
      vector(LaVecOp::set, x_, nullptr, 0.0, "KSP x = 0");
      vector(LaVecOp::copy, r, &b_, 0.0, "KSP r = b");
      return;
    }
    LaMatvecArgs m;
    AccessList acc;
    m.x = x_.data();
    m.epilogue = LaEpilogue::sub;
    m.y = acc.write(r);
    m.z = acc.read(b_);
    matvec(m, {&x_}, acc, LaFinalize::none, "KSP r = b - A x");
    if (o_.fixed_iterations || o_.norm_type == KspNormType::none) return;
    LaFusedArgs f = fused_args(LaFusedOp::rhs_norm);
    AccessList a2;
    f.b = a2.read(b_);
    f.pc = right_ ? LaDiag{} : pc_;
    read_pc(a2);
    fused(f, a2, LaFinalize::rhs_norm, "KSP norm of b");
  }

  // ---- CG ----

  /// Whether z = B r is stored: only where B is a vector (Jacobi of a CSR matrix). With a
  /// constant B = c (a stencil's Jacobi, or none) the product forms c r itself where it forms
  /// p = z + b p: the same values, one vector less written and read per iteration.
  [[nodiscard]] bool cg_stores_z() const { return pc_.v != nullptr; }

  /// One pass from a zero guess: x = 0, r = b, z = B r, p = 0 and the sums (with a guess, r
  /// comes from initial_residual first). p = 0 makes the first direction p = z + 0 p equal z.
  void cg_setup() {
    if (o_.initial_guess_nonzero) initial_residual(w_.r);
    AccessList acc;
    const LaFusedArgs f = cg_init_args(acc);
    fused(f, acc, LaFinalize::cg_init, "KSPSolve_CG init");
    cur_ = 0;
  }

  /// CG's set-up pass (see cg_setup) and its accesses; its sums are the caller's.
  LaFusedArgs cg_init_args(AccessList& acc) const {
    LaFusedArgs f = fused_args(LaFusedOp::cg_init);
    if (!o_.initial_guess_nonzero) {
      f.b = acc.read(b_);
      f.x = acc.write(x_);
      f.r = acc.write(w_.r);
    } else {
      f.r = input(acc, w_.r);  // the kernel reads r only
    }
    f.z = cg_stores_z() ? acc.write(w_.z) : nullptr;
    f.p = acc.write(w_.p);
    f.pc = pc_;
    read_pc(acc);
    return f;
  }

  /// Whether the first block of an async CG solve carries the set-up (LaCgBlockArgs::initial):
  /// from a zero guess, where the set-up is the state's upload and one pass.
  /// Not across ranks, where the set-up's steps end in reductions of their own.
  [[nodiscard]] bool cg_folds_setup() const { return par_ == nullptr && !o_.initial_guess_nonzero; }

  /// The direction product of a CG iteration, p_new = z + b p_old formed inside w = A p_new
  /// with p'w (z = c r formed here when not stored), and its accesses but its inputs' (z or r,
  /// and p_old: `in`).
  LaMatvecArgs cg_direction(const Vec& p_old, Vec& p_new, AccessList& acc, MatvecInputs& in) const {
    LaMatvecArgs m;
    const Vec& z = cg_stores_z() ? w_.z : w_.r;  // z, or r with z = c r formed here
    m.x = z.data();
    m.x_scale = cg_stores_z() ? 1.0 : pc_.c;
    m.x2 = p_old.data();
    in = {&z, &p_old, nullptr};
    m.x2_scale = scalar(&LaKspState::b);
    m.x_out = acc.write(p_new);
    m.epilogue = LaEpilogue::store_dot;
    m.y = acc.write(w_.w);
    m.z = m.x_out;
    return m;
  }

  /// The update of a CG iteration, x += a p, r -= a w, z = B r with the norm and z'r. Its
  /// accesses leave out p (the caller's: read here, written by the direction product).
  LaFusedArgs cg_update(const Vec& p, AccessList& acc) const {
    LaFusedArgs f = fused_args(LaFusedOp::cg_update);
    f.x = acc.read_write(x_);
    f.p = p.data();  // p's access is the caller's (see above)
    f.r = acc.read_write(w_.r);
    f.w = w_.w.data();  // w's access is the caller's: written by the direction product
    f.z = cg_stores_z() ? acc.write(w_.z) : nullptr;
    f.pc = pc_;
    f.s[0] = scalar(&LaKspState::a);
    read_pc(acc);
    return f;
  }

  /// One CG iteration; false once the solve stopped (sync mode). The new direction
  /// p = z + b p is formed inside the product w = A p (one pass and one launch less; a backend
  /// that cannot, cuSPARSE, forms it in a pass of its own): it reads the old direction from one
  /// vector and writes the new one to the other, so the two swap roles every iteration (a block
  /// of an even number of iterations repeats exactly).
  bool cg_iteration() {
    Vec& p_old = cur_ == 0 ? w_.p : w_.p2;
    Vec& p_new = cur_ == 0 ? w_.p2 : w_.p;
    cur_ = 1 - cur_;
    {
      AccessList acc;
      MatvecInputs in;
      const LaMatvecArgs m = cg_direction(p_old, p_new, acc, in);
      matvec(m, in, acc, LaFinalize::cg_dpi, "KSPSolve_CG p = z + b p, w = A p, p'w");
      if (st_.stop != 0) return false;
    }
    {
      AccessList acc;
      (void)acc.read(p_new);
      (void)acc.read(w_.w);
      const LaFusedArgs f = cg_update(p_new, acc);
      fused(f, acc, LaFinalize::cg_iter, "KSPSolve_CG update, norm, z'r");
    }
    return st_.stop == 0;
  }

  /// `n` CG iterations as one operation (async mode): the backend may run them as one kernel
  /// (LaKernels::cg_block), with the same arithmetic as n calls of cg_iteration. The block
  /// leaves the final state in pinned slot `slot` too, if one (true: no snapshot copy needed).
  bool cg_iterations(int n, int slot) {
    Vec& p_old = cur_ == 0 ? w_.p : w_.p2;
    Vec& p_new = cur_ == 0 ? w_.p2 : w_.p;
    if (n % 2 != 0) cur_ = 1 - cur_;
    LaCgBlockArgs a;
    AccessList acc;  // the steps' accesses, and both directions read and written over the block
    MatvecInputs in;
    a.direction = cg_direction(p_old, p_new, acc, in);
    (void)acc.read(*in.x);
    a.direction.A = A_.op(acc);
    a.update = cg_update(p_new, acc);
    a.p[0] = acc.read_write(p_old);
    a.p[1] = acc.read_write(p_new);
    a.iterations = n;
    a.direction.sums = sums_for(LaFinalize::cg_dpi, acc);
    a.update.sums = a.direction.sums;
    a.update.sums.finalize = LaFinalize::cg_iter;
    if (setup_pending_) {  // the solve's set-up first (see cg_folds_setup)
      a.initial = &st_;
      (void)acc.write(w_.state);
      a.init = cg_init_args(acc);
      a.init.sums = a.direction.sums;
      a.init.sums.finalize = LaFinalize::cg_init;
      setup_pending_ = false;
    }
    if (slot >= 0) a.mirror = acc.write(w_.slots, slot_range(slot)) + slot;
    if (graph_flag_ != nullptr) {  // graph mode: the loop's condition too
      a.running = graph_flag_;
      acc.write(w_.running.object_id());
    }
    issue_tracked(ctx_.impl(), acc, "KSPSolve_CG iterations", loc_,
                  [&](Stream& s, const OpInfo& op) { k_.cg_block(s, a, op); });
    return slot >= 0;
  }

  // ---- TFQMR ----

  /// Where x's updates go: y under right preconditioning (unwound at the end), else x.
  Vec& xs() { return right_ ? w_.y : x_; }

  void tf_setup() {
    initial_residual(w_.r);
    if (right_) vector(LaVecOp::set, w_.y, nullptr, 0.0, "KSPSolve_TFQMR y = 0");
    LaFusedArgs f = fused_args(LaFusedOp::tf_init);
    AccessList acc;
    f.r = acc.read_write(w_.r);
    f.rp = acc.write(w_.rp);
    f.u = acc.write(w_.u);
    f.p = acc.write(w_.p);
    f.d = acc.write(w_.d);
    f.pc = left_pc_;
    if (left_pc_.v != nullptr) read_pc(acc);
    fused(f, acc, LaFinalize::tf_init, "KSPSolve_TFQMR init");
    if (!async_ && st_.stop != 0) return;
    tf_v();
  }

  /// v = K p and s = v'rp (the top of the next iteration).
  // The five operations of a TFQMR iteration, each with its accesses (their sums are set by the
  // caller: one operation each in sync and the step path, one block in tf_iterations).

  /// v = K p and s = v'rp (the top of the next iteration).
  LaMatvecArgs tf_v_args(AccessList& acc) const {
    LaMatvecArgs m;
    m.x = w_.p.data();  // an input: marked by matvec (tf_v) or tf_iterations
    m.left = left_pc_;
    m.right = right_pc_;
    m.epilogue = LaEpilogue::store_dot;
    m.y = acc.write(w_.v);
    m.z = acc.read(w_.rp);
    read_pc(acc);
    return m;
  }

  /// q = u - a v, t = u + q.
  LaFusedArgs tf_qt_args(AccessList& acc) const {
    LaFusedArgs f = fused_args(LaFusedOp::tf_qt);
    f.u = input(acc, w_.u);
    f.v = input(acc, w_.v);
    f.q = acc.write(w_.q);
    f.t = acc.write(w_.t);
    f.s[0] = scalar(&LaKspState::a);
    return f;
  }

  /// r -= a K t with r'r.
  LaMatvecArgs tf_residual_args(AccessList& acc) const {
    LaMatvecArgs m;
    m.x = w_.t.data();  // an input: marked by matvec or tf_iterations
    m.left = left_pc_;
    m.right = right_pc_;
    m.epilogue = LaEpilogue::residual;
    m.y = acc.read_write(w_.r);
    m.a = scalar(&LaKspState::a);
    read_pc(acc);
    return m;
  }

  /// The quasi-minimal steps of d and x (into y under right preconditioning) with r'rp.
  LaFusedArgs tf_dx_args(AccessList& acc) {
    LaFusedArgs f = fused_args(LaFusedOp::tf_dx);
    Vec& x = xs();
    f.x = acc.read_write(x);
    f.d = acc.read_write(w_.d);
    f.u = input(acc, w_.u);
    f.q = input(acc, w_.q);
    f.r = input(acc, w_.r);
    f.rp = input(acc, w_.rp);
    f.s[0] = scalar(&LaKspState::eta0);
    f.s[1] = scalar(&LaKspState::cf0);
    f.s[2] = scalar(&LaKspState::eta1);
    f.s[3] = scalar(&LaKspState::cf1);
    f.steps = st_.stop == 1 ? st_.xsteps : 2;  // sync; a device state decides itself
    return f;
  }

  /// u = r + b q, q = q + b p, p = u + b q.
  LaFusedArgs tf_uqp_args(AccessList& acc) const {
    LaFusedArgs f = fused_args(LaFusedOp::tf_uqp);
    f.r = input(acc, w_.r);
    f.q = acc.read_write(w_.q);
    f.p = acc.read_write(w_.p);
    f.u = acc.write(w_.u);
    f.s[0] = scalar(&LaKspState::b);
    return f;
  }

  void tf_v() {
    AccessList acc;
    const LaMatvecArgs m = tf_v_args(acc);
    matvec(m, {&w_.p, nullptr, right_vec()}, acc, LaFinalize::tf_s, "KSPSolve_TFQMR v = K p, v'rp");
  }

  bool tf_iteration() {
    {
      AccessList acc;
      const LaFusedArgs f = tf_qt_args(acc);
      fused(f, acc, LaFinalize::none, "KSPSolve_TFQMR q = u - a v, t = u + q");
    }
    {
      AccessList acc;
      const LaMatvecArgs m = tf_residual_args(acc);
      matvec(m, {&w_.t, nullptr, right_vec()}, acc, LaFinalize::tf_m,
             "KSPSolve_TFQMR r -= a K t, r'r");
      if (st_.stop == 2) return false;
    }
    {
      AccessList acc;
      const LaFusedArgs f = tf_dx_args(acc);
      if (!async_ && st_.stop == 1) {
        // The last steps of x; rho is not needed any more.
        fused(f, acc, LaFinalize::none, "KSPSolve_TFQMR d, x");
        st_.stop = 2;
        return false;
      }
      fused(f, acc, LaFinalize::tf_rho, "KSPSolve_TFQMR d, x, r'rp");
      if (st_.stop != 0) return false;
    }
    {
      AccessList acc;
      const LaFusedArgs f = tf_uqp_args(acc);
      fused(f, acc, LaFinalize::none, "KSPSolve_TFQMR u, q, p");
    }
    tf_v();
    return st_.stop == 0;
  }

  /// `n` TFQMR iterations as one operation (async and graph modes): the backend may run them as
  /// one task or kernel (LaKernels::tf_block), with the same arithmetic as n calls of
  /// tf_iteration. The block leaves the final state in pinned slot `slot` too, if one (true).
  bool tf_iterations(int n, int slot) {
    LaTfBlockArgs a;
    AccessList acc;  // every operation's accesses
    a.qt = tf_qt_args(acc);
    a.qt.sums = sums_for(LaFinalize::none, acc);
    a.residual = tf_residual_args(acc);
    (void)acc.read(w_.t);  // the products' inputs (matvec marks them elsewhere)
    a.residual.A = A_.op(acc);
    a.residual.sums = sums_for(LaFinalize::tf_m, acc);
    a.dx = tf_dx_args(acc);
    a.dx.steps = 2;  // the device state decides
    a.dx.sums = sums_for(LaFinalize::tf_rho, acc);
    a.uqp = tf_uqp_args(acc);
    a.uqp.sums = sums_for(LaFinalize::none, acc);
    a.v = tf_v_args(acc);
    (void)acc.read(w_.p);
    a.v.A = A_.op(acc);
    a.v.sums = sums_for(LaFinalize::tf_s, acc);
    a.iterations = n;
    if (slot >= 0) a.mirror = acc.write(w_.slots, slot_range(slot)) + slot;
    if (graph_flag_ != nullptr) {  // graph mode: the loop's condition too
      a.running = graph_flag_;
      acc.write(w_.running.object_id());
    }
    issue_tracked(ctx_.impl(), acc, "KSPSolve_TFQMR iterations", loc_,
                  [&](Stream& s, const OpInfo& op) { k_.tf_block(s, a, op); });
    return slot >= 0;
  }

  // ---- async driver ----

  struct Snapshot {
    Event event;
    int slot = 0;
  };

  /// Queues the device state's current value into pinned slot `slot` (unless the operation
  /// just issued left it there: `mirrored`) and the event the host waits on.
  Snapshot snapshot(int slot, bool mirrored) {
    if (!mirrored) detail::copy_bytes(ctx_, w_.slots.data() + slot, dst_, sizeof(LaKspState), loc_);
    Snapshot s;
    s.slot = slot;
    s.event.record(ctx_, loc_);
    return s;
  }

  void read(Snapshot& s) {
    s.event.synchronize(loc_);
    std::memcpy(&st_, w_.slots.data() + s.slot, sizeof st_);
    monitor_async();
  }

  /// Iterations of a fixed-iteration solve issued as one operation at most: a kernel that runs
  /// a whole block of them stays well under any launch time limit.
  static constexpr int kFixedBlock = 64;

  /// Issues the loop: `iterate(n, slot)` queues n iterations, and returns whether they leave
  /// the final state in pinned slot `slot` themselves (else snapshot copies it there; slot -1:
  /// no snapshot follows). Either way the slot is written after what accessed it before.
  template <class Iterate>
  void run_async(Iterate&& iterate_into) {
    auto iterate = [&](int n, int slot) {
      if (slot >= 0) {
        wait_for_host_access(w_.slots.object_id(), Access::write, slot_range(slot), loc_);
      }
      return iterate_into(n, slot);
    };
    const int total = o_.max_it;
    int issued = 0;
    if (o_.fixed_iterations) {
      // Nothing to decide early: a breakdown makes the remaining kernels no-ops. Blocks of at
      // most kFixedBlock iterations (an even number: see cg_iterations).
      bool mirrored = false;
      for (; issued < total; issued += std::min(kFixedBlock, total - issued)) {
        const int n = std::min(kFixedBlock, total - issued);
        mirrored = iterate(n, issued + n == total ? 0 : -1);  // only the last one snapshots
      }
      auto s = snapshot(0, mirrored);
      read(s);
      return;
    }
    const int k = check_interval(o_, A_.is_stencil);
    std::deque<Snapshot> pending;
    int next_slot = 0;
    auto block = [&] {
      const int n = std::min(k, total - issued);
      const bool mirrored = iterate(n, next_slot);
      issued += n;
      pending.push_back(snapshot(next_slot, mirrored));
      next_slot = 1 - next_slot;
    };
    block();
    for (;;) {
      if (issued < total) block();  // keep one block queued while the host waits
      read(pending.front());
      pending.pop_front();
      if (st_.stop != 0) break;
      if (pending.empty() && issued >= total) {
        throw Error(Errc::invalid_state, "KSP: the device state did not stop after max_it");
      }
    }
    // A queued block past the stop does nothing; its snapshot is not needed.
  }

  // ---- graph driver ----

  /// Iterations per trip of the while node: the check interval (a fixed-iteration solve: all
  /// of them, up to kFixedBlock), even for CG (a block of an even number of iterations leaves
  /// the directions where it found them, so every trip is the same graph).
  [[nodiscard]] int graph_block() const {
    int k = o_.fixed_iterations ? std::min(o_.max_it, kFixedBlock)
                                : std::min(check_interval(o_, A_.is_stencil), o_.max_it);
    if (o_.type == KspType::cg && k % 2 != 0) ++k;
    return k;
  }

  /// What the recorded graph depends on: a solve with the same key launches it unchanged.
  [[nodiscard]] std::vector<std::uint64_t> graph_key() const {
    std::vector<std::uint64_t> key;
    auto add = [&key](auto v) { key.push_back(static_cast<std::uint64_t>(v)); };
    auto add_ptr = [&](const void* p, ObjectId id) {
      add(reinterpret_cast<std::uintptr_t>(p));
      add(id);
    };
    for (const Vec* v :
         std::initializer_list<const Vec*>{&b_, &x_, &w_.r, &w_.z, &w_.p, &w_.p2, &w_.w, &w_.rp,
                                           &w_.v, &w_.t, &w_.q, &w_.u, &w_.d, &w_.y, &w_.invdiag}) {
      add_ptr(v->empty() ? nullptr : v->data(), v->empty() ? 0 : v->object_id());
    }
    add_ptr(w_.state.data(), w_.state.object_id());
    add_ptr(w_.hist.data(), w_.hist.object_id());
    add_ptr(w_.slots.data(), w_.slots.object_id());
    add_ptr(w_.running.device_ptr(), w_.running.object_id());
    add_ptr(&A_, 0);
    // The context: on cuda the la reductions captured from it use its stream's scratch, so the
    // graph is relaunched only on the context it was recorded from.
    add_ptr(&ctx_.impl(), 0);
    AccessList acc;
    (void)A_.op(acc);
    for (const auto& a : acc.uses()) add(a.id);
    add(static_cast<int>(o_.type));
    add(static_cast<int>(o_.pc));
    add(static_cast<int>(o_.norm_type));
    for (double d : {o_.rtol, o_.atol, o_.dtol}) add(std::bit_cast<std::uint64_t>(d));
    add(o_.max_it);
    add(o_.fixed_iterations);
    add(o_.initial_guess_nonzero);
    add(graph_block());
    if (par_ != nullptr) par_->add_key(key);
    return key;
  }

  /// Records `body`'s operations on ctx into a graph.
  template <class Body>
  Graph record(const std::string& name, Body&& body) {
    Capture capture(ctx_, name, loc_);
    body();
    return capture.end(loc_);
  }

  /// The solve as a graph: the set-up (for CG from a zero guess, the set-up and the first block
  /// of iterations as one operation), then a while node over blocks of iterations (none for a
  /// fixed-iteration solve of one block), each ending with the running flag from the device state
  /// and the state's copy in pinned slot 0 (so the last one done is the final state), then
  /// TFQMR's unwinding of right preconditioning.
  Graph record_solve() {
    const bool cg = o_.type == KspType::cg;
    const std::string name = cg ? "KSPSolve_CG" : "KSPSolve_TFQMR";
    const int k = graph_block();
    std::int32_t* flag = w_.running.write_ptr(ctx_, loc_);
    LaKspState* mirror = w_.slots.data();  // the state the host reads at the end: slot 0
    auto running = [&] {
      AccessList acc;
      (void)acc.read(w_.state);  // through dst_, the state's address
      acc.write(w_.running.object_id());
      (void)acc.write(w_.slots, slot_range(0));
      issue_tracked(ctx_.impl(), acc, "KSP running", loc_,
                    [&](Stream& s, const OpInfo& op) { k_.running(s, dst_, flag, mirror, op); });
    };
    // CG from a zero guess: the set-up travels with the first block (see cg_folds_setup), which
    // sets the flag and slot 0 itself; later trips run the body.
    const bool fold = cg && cg_folds_setup();
    Graph setup = record(name + " set-up", [&] {
      if (fold) {
        setup_pending_ = true;
        graph_flag_ = flag;
        cg_iterations(k, 0);
        graph_flag_ = nullptr;
        return;
      }
      upload_state();
      cg ? cg_setup() : tf_setup();
      running();
    });
    auto body = [&] {
      return record(name + " iterations", [&] {
        if (par_ != nullptr) {
          // Across ranks every step ends in a reduction: the iterations one by one.
          for (int i = 0; i < k; ++i) (void)(cg ? cg_iteration() : tf_iteration());
          running();
          return;
        }
        graph_flag_ = flag;  // the block sets the flag and slot 0 itself
        (void)(cg ? cg_iterations(k, 0) : tf_iterations(k, 0));
        graph_flag_ = nullptr;
      });
    };
    Graph g(name);
    const Node first = g.add_child(
        setup, {.name = name + (fold ? " set-up and " + std::to_string(k) + " iterations"
                                     : std::string(" set-up"))});
    // A fixed-iteration solve of at most one block needs no loop: its body as a plain child graph
    // (its kernels do nothing if the set-up already stopped, as a while node would skip them), or
    // none where the set-up's block is that one trip. SLUICE_KSP_GRAPH_LOOP=always keeps the
    // while node (to measure what it costs).
    const char* loop_env = std::getenv("SLUICE_KSP_GRAPH_LOOP");
    const bool one_trip = o_.fixed_iterations && o_.max_it <= k &&
                          (loop_env == nullptr || std::string(loop_env) != "always");
    Node loop = first;
    if (!one_trip) {
      loop = g.add_while(
          w_.running, body(),
          {.name = name + " " + std::to_string(k) + " iterations while running", .after = {first}});
    } else if (!fold) {
      loop = g.add_child(
          body(), {.name = name + " " + std::to_string(k) + " iterations", .after = {first}});
    }
    if (right_)
      g.add_child(record(name + " end", [&] { unwind(); }),
                  {.name = name + " end", .after = {loop}});
    return g;
  }

  /// Graph mode: records the solve (or updates the recorded one in place for new vectors),
  /// launches it as one operation and reads the final state.
  void run_graph() {
    if (w_.running.device() && *w_.running.device() != ctx_.device()) w_.running = {};
    if (w_.running.object_id() == 0) (void)w_.running.write_ptr(ctx_, loc_);
    auto key = graph_key();
    if (!w_.graph || w_.graph->device() != ctx_.device() || w_.graph_key != key) {
      w_.graph_key.clear();
      Graph g = record_solve();
      bool updated = false;
      if (w_.graph && w_.graph->device() == ctx_.device()) {
        try {
          w_.graph->update(g, loc_);
          updated = true;
        } catch (const Error&) {  // another topology (options changed): instantiate anew
        }
      }
      if (!updated) w_.graph.emplace(g, ctx_.device(), loc_);
      w_.graph_key = std::move(key);
    }
    wait_for_host_access(w_.slots.object_id(), Access::write, slot_range(0), loc_);
    w_.graph->launch(ctx_, loc_);
    Snapshot s;
    s.event.record(ctx_, loc_);
    read(s);
  }

  // ---- monitor, history, result ----

  [[nodiscard]] int iteration_of(int entry) const {
    if (o_.type == KspType::cg) return entry;
    return entry == 0 ? 0 : (entry + 1) / 2;
  }

  void monitor_sync(int from) {
    if (!o_.monitor) return;
    for (int j = from; j < st_.nhist && j < st_.hist_cap; ++j) {
      const Managed<double> value(w_.host_hist[static_cast<std::size_t>(j)], ctx_, loc_);
      o_.monitor(iteration_of(j), value);
    }
    reported_ = st_.nhist;
  }

  void monitor_async() {
    if (!o_.monitor) return;
    for (int j = reported_; j < st_.nhist && j < st_.hist_cap; ++j) {
      Managed<double> value;
      double* dst = value.write_ptr(ctx_, loc_);
      detail::copy_bytes(ctx_, dst, w_.hist.data() + j, sizeof(double), loc_);
      o_.monitor(iteration_of(j), value);
    }
    reported_ = std::max(reported_, st_.nhist);
  }

  KspResult finish() {
    KspResult r;
    r.iterations = st_.its;
    r.residual_norm = st_.rnorm;
    r.reason = static_cast<ConvergedReason>(st_.reason);
    if (o_.history) {
      const auto count = static_cast<std::size_t>(std::min(st_.nhist, st_.hist_cap));
      std::vector<double> all(count);
      if (async_ && count > 0) {
        detail::la::PinnedLease staging(ctx_.device(), count * sizeof(double), loc_);
        staging.wait_write(count * sizeof(double), loc_);
        detail::copy_bytes(ctx_, staging.as<double>(), w_.hist.data(), count * sizeof(double),
                           loc_);
        staging.wait_read(count * sizeof(double), loc_);
        std::memcpy(all.data(), staging.as<double>(), count * sizeof(double));
      } else if (count > 0) {
        std::copy_n(w_.host_hist.begin(), count, all.begin());
      }
      // TFQMR's entry 0 is sluice's own (for the monitor); PETSc's history starts after it.
      const std::size_t skip = o_.type == KspType::tfqmr && !all.empty() ? 1 : 0;
      r.history.assign(all.begin() + static_cast<std::ptrdiff_t>(skip), all.end());
    }
    return r;
  }

  KspParallel* par_;  // a rank's block of a distributed solve (the dist layer), else null
  const Mat::Impl& A_;
  const KspOptions& o_;
  Ksp::Work& w_;
  const Vec& b_;
  Vec& x_;
  Context ctx_;
  std::source_location loc_;
  LaKernels& k_;
  bool async_;  // the scalars live in the device state (async and graph modes)
  bool graph_;
  bool right_ = false;
  LaDiag pc_, left_pc_, right_pc_;
  LaKspState st_;
  LaKspState* dst_ = nullptr;
  int reported_ = 0;
  int cur_ = 0;                         // CG: which of p, p2 holds the current direction
  std::int32_t* graph_flag_ = nullptr;  // graph mode: where a CG block sets the loop condition
  bool setup_pending_ = false;          // CG: the next block carries the set-up
};

void validate(const KspOptions& o, std::source_location loc) {
  auto bad = [&](const std::string& what) {
    throw Error(Errc::invalid_argument, "KSP: " + what, loc);
  };
  if (o.max_it < 1) bad("max_it must be at least 1, got " + std::to_string(o.max_it));
  if (o.check_every < 0) {
    bad("check_every must be at least 1 (or 0 to let the solver choose), got " +
        std::to_string(o.check_every));
  }
  if (!(o.rtol >= 0) || !(o.atol >= 0) || !(o.dtol >= 0)) {
    bad("rtol, atol and dtol must be non-negative numbers");
  }
  if (o.norm_type == KspNormType::none && !o.fixed_iterations) {
    bad("norm type none has no norm to test; use fixed_iterations (PETSc: KSPConvergedSkip)");
  }
  if (o.type == KspType::tfqmr && o.norm_type == KspNormType::natural) {
    bad("TFQMR supports the preconditioned, unpreconditioned and none norm types, not natural");
  }
}

}  // namespace

// ---- Ksp ----------------------------------------------------------------------------------------

Ksp::Ksp(Mat A, KspOptions options)
    : A_(std::move(A)), options_(std::move(options)), work_(std::make_unique<Work>()) {
  if (!A_.valid()) throw Error(Errc::invalid_argument, "Ksp: the Mat is empty");
  if (A_.rows() != A_.cols()) {
    throw Error(Errc::invalid_argument, "Ksp: the matrix is " + std::to_string(A_.rows()) + " x " +
                                            std::to_string(A_.cols()) + "; it must be square");
  }
  validate(options_, std::source_location::current());
}

Ksp::~Ksp() = default;
Ksp::Ksp(Ksp&&) noexcept = default;
Ksp& Ksp::operator=(Ksp&&) noexcept = default;

int Ksp::check_interval() const noexcept {
  return sluice::la::check_interval(options_, A_.is_matrix_free());
}

void Ksp::set_options(KspOptions options) {
  validate(options, std::source_location::current());
  options_ = std::move(options);
}

KspResult Ksp::solve(const Vec& b, Vec& x, std::source_location loc) {
  return solve(b, x, x.context(), loc);
}

KspResult Ksp::solve(const Vec& b, Vec& x, const Context& ctx, std::source_location loc) {
  return solve_on(b, x, ctx, nullptr, loc);
}

KspResult Ksp::solve(const Vec& b, Vec& x, const Context& ctx, detail::la::KspParallel& par,
                     std::source_location loc) {
  return solve_on(b, x, ctx, &par, loc);
}

KspResult Ksp::solve_on(const Vec& b, Vec& x, const Context& ctx, detail::la::KspParallel* par,
                        std::source_location loc) {
  check_vec(b, "KSPSolve", loc);
  check_vec(x, "KSPSolve", loc);
  check_device(ctx, A_.device(), "KSPSolve (the matrix)", loc);
  check_device(ctx, b.device(), "KSPSolve (b)", loc);
  check_device(ctx, x.device(), "KSPSolve (x)", loc);
  check_sizes(static_cast<std::size_t>(A_.rows()), b.size(), "KSPSolve (matrix rows and b)", loc);
  check_sizes(static_cast<std::size_t>(A_.rows()), x.size(), "KSPSolve (matrix rows and x)", loc);
  if (b.object_id() == x.object_id()) {
    throw Error(Errc::invalid_argument, "KSPSolve: b and x must be different vectors", loc);
  }
  validate(options_, loc);
  if (A_.rows() == 0) return {};
  return Run(*A_.impl(), options_, *work_, b, x, ctx, par, loc).solve();
}

}  // namespace la
}  // namespace sluice
