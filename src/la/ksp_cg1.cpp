// CG with one reduction an iteration (Chronopoulos-Gear; PETSc's KSPCGUseSingleReduction) as a
// Run's kernels: the update and the product s = A z issue back to back and their sums reach the
// solver logic together (src/la/ksp_run.hpp, src/la/ksp_logic.hpp: cg1_*).
//
// Per iteration, with a = beta / p'Ap and b from the last reduction:
//   p = z + b p, w = s + b w, x += a p, r -= a w, z = B r   (one fused pass: norm^2, z'r)
//   s = A z                                                  (the product: z's)
//   one reduction: the convergence test, beta, b, then p'Ap = z's - beta^2 dpiold / betaold^2
// Across ranks the two steps leave their partial sums in parts of one buffer that one gather
// sends (KspParallel::reduce with `split`); classic CG gathers twice.

#include "la/ksp_run.hpp"

namespace sluice::detail::la {

void Run::cg_setup_any() {
  if (cg_single()) {
    cg1_setup();
  } else {
    cg_setup();
  }
}

bool Run::cg_iteration_any() {
  return cg_single() ? cg1_iteration() : cg_iteration();
}

void Run::cg1_setup() {
  if (o_.initial_guess_nonzero) initial_residual(w_.r);
  AccessList acc;
  LaFusedArgs f = cg_init_args(acc);
  f.w = acc.write(w_.w);
  cg1_update_and_product(f, acc, LaFinalize::cg1_init, "KSPSolve_CG (single reduction) init");
}

bool Run::cg1_iteration() {
  AccessList acc;
  LaFusedArgs f = fused_args(LaFusedOp::cg1_update);
  f.x = acc.read_write(x_);
  f.p = acc.read_write(w_.p);
  f.r = acc.read_write(w_.r);
  f.w = acc.read_write(w_.w);
  f.v = input(acc, w_.s);
  f.z = cg_stores_z() ? acc.write(w_.z) : nullptr;
  f.pc = pc_;
  f.s[0] = scalar(&LaKspState::a);
  f.s[1] = scalar(&LaKspState::b);
  read_pc(acc);
  cg1_update_and_product(f, acc, LaFinalize::cg1_iter,
                         "KSPSolve_CG (single reduction) p, w, x, r, z, norm, z'r");
  return st_.stop == 0;
}

void Run::cg1_update_and_product(LaFusedArgs f, AccessList& acc, LaFinalize fin, const char* what) {
  const bool init = fin == LaFinalize::cg1_init;
  // The update: its sums stay where the product's join them (no logic, no wait).
  f.sums = sums_for(LaFinalize::cg1_stash, acc);
  issue_tracked(ctx_.impl(), acc, what, loc_,
                [&](Stream& s, const OpInfo& op) { k_.fused(s, f, op); });

  // s = A z with z's: z, or r with z = c r formed by the product (then the dot is s'r, and the
  // logic scales it by c: LaKspState::zc).
  const char* product = "KSPSolve_CG (single reduction) s = A z, z's";
  const Vec& z = cg_stores_z() ? w_.z : w_.r;
  LaMatvecArgs m;
  AccessList macc;
  m.x = z.data();
  m.x_scale = cg_stores_z() ? 1.0 : pc_.c;
  m.epilogue = LaEpilogue::store_dot;
  m.y = macc.write(w_.s);
  m.z = macc.read(z);
  const MatvecInputs in{&z, nullptr, nullptr};
  if (par_ != nullptr) {
    AccessList guard;
    if (async_) m.sums.state = guard.read_write(w_.state);
    for (const auto& u : guard.uses()) macc.add(u);
    const int parts = par_->matvec(ctx_, m, in, macc, 1, product, loc_);
    conclude(fin, 1 + parts, false, what, 1);
    return;
  }
  (void)macc.read(z);
  m.A = A_.op(macc);
  m.sums = sums_for(init ? LaFinalize::cg1_init_stashed : LaFinalize::cg1_iter_stashed, macc);
  if (m.sums.out != nullptr) m.sums.out += 2;  // sync: after the update's two sums
  issue_tracked(ctx_.impl(), macc, product, loc_,
                [&](Stream& s, const OpInfo& op) { k_.matvec(s, m, op); });
  conclude(fin);
}

}  // namespace sluice::detail::la
