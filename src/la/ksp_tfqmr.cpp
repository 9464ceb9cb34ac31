// PETSc's KSPSolve_TFQMR as a Run's kernels: the set-up, one iteration in sync mode, and
// blocks of iterations in async and graph modes (src/la/ksp_run.hpp).

#include "la/ksp_run.hpp"

namespace sluice::detail::la {

Vec& Run::xs() {
  return right_ ? w_.y : x_;
}

void Run::tf_setup() {
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

LaMatvecArgs Run::tf_v_args(AccessList& acc) const {
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

LaFusedArgs Run::tf_qt_args(AccessList& acc) const {
  LaFusedArgs f = fused_args(LaFusedOp::tf_qt);
  f.u = input(acc, w_.u);
  f.v = input(acc, w_.v);
  f.q = acc.write(w_.q);
  f.t = acc.write(w_.t);
  f.s[0] = scalar(&LaKspState::a);
  return f;
}

LaMatvecArgs Run::tf_residual_args(AccessList& acc) const {
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

LaFusedArgs Run::tf_dx_args(AccessList& acc) {
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

LaFusedArgs Run::tf_uqp_args(AccessList& acc) const {
  LaFusedArgs f = fused_args(LaFusedOp::tf_uqp);
  f.r = input(acc, w_.r);
  f.q = acc.read_write(w_.q);
  f.p = acc.read_write(w_.p);
  f.u = acc.write(w_.u);
  f.s[0] = scalar(&LaKspState::b);
  return f;
}

void Run::tf_v() {
  AccessList acc;
  const LaMatvecArgs m = tf_v_args(acc);
  matvec(m, {&w_.p, nullptr, right_vec()}, acc, LaFinalize::tf_s, "KSPSolve_TFQMR v = K p, v'rp");
}

bool Run::tf_iteration() {
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

bool Run::tf_iterations(int n, int slot) {
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

}  // namespace sluice::detail::la
