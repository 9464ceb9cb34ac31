// PETSc's KSPSolve_CG as a Run's kernels: the set-up pass, one iteration in sync mode, and
// blocks of iterations in async and graph modes (src/la/ksp_run.hpp).

#include "la/ksp_run.hpp"

namespace sluice::detail::la {

bool Run::cg_stores_z() const {
  return pc_.v != nullptr;
}

void Run::cg_setup() {
  if (o_.initial_guess_nonzero) initial_residual(w_.r);
  AccessList acc;
  const LaFusedArgs f = cg_init_args(acc);
  fused(f, acc, LaFinalize::cg_init, "KSPSolve_CG init");
  cur_ = 0;
}

LaFusedArgs Run::cg_init_args(AccessList& acc) const {
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

bool Run::cg_folds_setup() const {
  return par_ == nullptr && !o_.initial_guess_nonzero && !cg_single();
}

LaMatvecArgs Run::cg_direction(const Vec& p_old, Vec& p_new, AccessList& acc,
                               MatvecInputs& in) const {
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

LaFusedArgs Run::cg_update(const Vec& p, AccessList& acc) const {
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

bool Run::cg_iteration() {
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

bool Run::cg_iterations(int n, int slot) {
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

}  // namespace sluice::detail::la
