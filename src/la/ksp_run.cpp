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

#include "la/ksp_run.hpp"

namespace sluice::detail::la {

Run::Run(const Mat::Impl& A, const KspOptions& o, Ksp::Work& work, const Vec& b, Vec& x,
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

KspResult Run::solve() {
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
      cg_setup_any();
    }
    if (async_) {
      run_async([this](int n, int slot) {
        if (par_ == nullptr && !cg_single()) return cg_iterations(n, slot);
        // Across ranks every step ends in a reduction, and the single-reduction variant has
        // no block kernel: the iterations one by one.
        for (int i = 0; i < n; ++i) cg_iteration_any();
        return false;
      });
    } else {
      while (st_.stop == 0 && cg_iteration_any()) {
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

void Run::ensure(Vec& v, std::size_t n) const {
  if (v.size() == n && !v.empty() && v.device() == ctx_.device()) return;
  v = par_ != nullptr ? par_->make_vec(ctx_, n, loc_) : Vec(ctx_, n, loc_);
}

void Run::prepare() {
  const auto n = static_cast<std::size_t>(A_.rows);
  const bool cg = o_.type == KspType::cg;
  const bool single = cg && cg_single();
  const std::vector<Vec*> vecs =
      single ? std::vector<Vec*>{&w_.r, &w_.p, &w_.w, &w_.s}
      : cg   ? std::vector<Vec*>{&w_.r, &w_.p, &w_.p2, &w_.w}
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
  st_.zc = cg_stores_z() ? 1.0 : pc_.c;  // single-reduction CG: z's from s'r (see ksp_cg1.cpp)
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

void Run::upload_state() {
  if (!async_) return;
  AccessList acc;
  LaKspState* state = acc.write(w_.state);
  issue_tracked(ctx_.impl(), acc, "KSP state", loc_,
                [&](Stream& s, const OpInfo& op) { k_.set_state(s, state, st_, op); });
}

void Run::unwind() {
  LaFusedArgs f = fused_args(LaFusedOp::unwind);
  AccessList acc;
  f.x = acc.read_write(x_);
  f.t = input(acc, w_.y);
  f.pc = pc_;
  read_pc(acc);
  issue_tracked(ctx_.impl(), acc, "KSP unwind preconditioner", loc_,
                [&](Stream& s, const OpInfo& op) { k_.fused(s, f, op); });
}

void Run::diagonal_into(Vec& d) {
  AccessList acc;
  LaOperator op = A_.op(acc);
  double* out = acc.write(d);
  issue_tracked(ctx_.impl(), acc, "MatGetDiagonal", loc_,
                [&](Stream& s, const OpInfo& info) { k_.diagonal(s, op, out, info); });
}

ByteRange Run::slot_range(int slot) {
  return {static_cast<std::size_t>(slot) * sizeof(LaKspState), sizeof(LaKspState)};
}

LaScalar Run::scalar(double LaKspState::*m) const {
  if (!async_) return {st_.*m, nullptr, nullptr, 1.0};
  const auto offset =
      reinterpret_cast<const char*>(&(st_.*m)) - reinterpret_cast<const char*>(&st_);
  return {0.0, reinterpret_cast<const double*>(reinterpret_cast<const char*>(dst_) + offset),
          nullptr, 1.0};
}

LaFusedArgs Run::fused_args(LaFusedOp op) const {
  LaFusedArgs f;
  f.op = op;
  f.n = static_cast<std::size_t>(A_.rows);
  f.norm_type = st_.norm_type;
  return f;
}

void Run::read_pc(AccessList& acc) const {
  if (pc_.v != nullptr) (void)acc.read(w_.invdiag);
}

LaSums Run::sums_for(LaFinalize fin, AccessList& acc) const {
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

void Run::conclude(LaFinalize fin, int parts, bool tf_dx, const char* what, int split) {
  if (fin == LaFinalize::none) return;
  double sums[la_math::kMaxSums];
  if (par_ != nullptr) {
    AccessList state_acc;
    LaKspState* state = nullptr;
    if (async_) {
      state = state_acc.read_write(w_.state);
      (void)state_acc.read_write(w_.hist);
    }
    par_->reduce(ctx_, parts, split, fin, state, state_acc, tf_dx, sums, what, loc_);
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

void Run::fused(LaFusedArgs f, AccessList& acc, LaFinalize fin, const char* what) {
  f.sums = sums_for(fin, acc);
  issue_tracked(ctx_.impl(), acc, what, loc_,
                [&](Stream& s, const OpInfo& op) { k_.fused(s, f, op); });
  conclude(fin, 1, f.op == LaFusedOp::tf_dx, what);
}

void Run::matvec(LaMatvecArgs m, const MatvecInputs& in, AccessList& acc, LaFinalize fin,
                 const char* what) {
  if (par_ != nullptr) {
    AccessList guard;
    if (async_) m.sums.state = guard.read_write(w_.state);
    for (const auto& u : guard.uses()) acc.add(u);
    const int parts = par_->matvec(ctx_, m, in, acc, 0, what, loc_);
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

const Vec* Run::right_vec() const {
  return right_pc_.v != nullptr ? &w_.invdiag : nullptr;
}

void Run::vector(LaVecOp op, Vec& y, const Vec* x, double alpha, const char* what) {
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

void Run::initial_residual(Vec& r) {
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

Run::Snapshot Run::snapshot(int slot, bool mirrored) {
  if (!mirrored) detail::copy_bytes(ctx_, w_.slots.data() + slot, dst_, sizeof(LaKspState), loc_);
  Snapshot s;
  s.slot = slot;
  s.event.record(ctx_, loc_);
  return s;
}

void Run::read(Snapshot& s) {
  s.event.synchronize(loc_);
  std::memcpy(&st_, w_.slots.data() + s.slot, sizeof st_);
  monitor_async();
}

int Run::iteration_of(int entry) const {
  if (o_.type == KspType::cg) return entry;
  return entry == 0 ? 0 : (entry + 1) / 2;
}

void Run::monitor_sync(int from) {
  if (!o_.monitor) return;
  for (int j = from; j < st_.nhist && j < st_.hist_cap; ++j) {
    const Managed<double> value(w_.host_hist[static_cast<std::size_t>(j)], ctx_, loc_);
    o_.monitor(iteration_of(j), value);
  }
  reported_ = st_.nhist;
}

void Run::monitor_async() {
  if (!o_.monitor) return;
  for (int j = reported_; j < st_.nhist && j < st_.hist_cap; ++j) {
    Managed<double> value;
    double* dst = value.write_ptr(ctx_, loc_);
    detail::copy_bytes(ctx_, dst, w_.hist.data() + j, sizeof(double), loc_);
    o_.monitor(iteration_of(j), value);
  }
  reported_ = std::max(reported_, st_.nhist);
}

KspResult Run::finish() {
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
      detail::copy_bytes(ctx_, staging.as<double>(), w_.hist.data(), count * sizeof(double), loc_);
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

}  // namespace sluice::detail::la
