#pragma once
// One Krylov solve (src/la/ksp.cpp): the work space a Ksp keeps between solves, and Run,
// which issues a solve's kernels in its mode. Its parts: ksp_run.cpp (set-up, issuing, the
// async driver, the result), ksp_cg.cpp, ksp_tfqmr.cpp and ksp_graph.cpp.

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "la/ksp_logic.hpp"
#include "la/ksp_options.hpp"
#include "la/ksp_parallel.hpp"
#include "la/mat.hpp"
#include "sluice/event.hpp"
#include "sluice/graph.hpp"

namespace sluice::la {

struct Ksp::Work {
  std::size_t n = 0;
  Device device;
  Vec r, z, p, w, rp, v, t, q, u, d, y;
  Vec p2;       // CG: the other of the two direction vectors (see cg_iteration)
  Vec s;        // single-reduction CG: s = A z
  Vec invdiag;  // Jacobi of a CSR matrix
  bool invdiag_ready = false;
  std::size_t hist_cap = 0;
  DeviceBuffer<detail::LaKspState> state;  // async: the device state
  DeviceBuffer<double> hist;               // async: the residual history
  PinnedBuffer<detail::LaKspState> slots;  // async: snapshots
  PinnedBuffer<double> sums;               // sync: the sums of the last reduction
  std::vector<double> host_hist;           // sync: the residual history
  Managed<std::int32_t> running;           // graph: the while node's condition
  /// graph: the recorded solve and what it was recorded for (every address, tracker id and
  /// option its kernels were given); a solve with another key updates or re-instantiates it.
  std::vector<std::uint64_t> graph_key;
  std::optional<GraphExec> graph;
  /// graph across ranks (dist): the block of iterations and TFQMR's unwinding, launched by the
  /// host while the flag says running (graph holds the set-up only). A while node's body may
  /// not hold what NCCL records (its event nodes): cudaGraphInstantiate refuses it.
  std::optional<GraphExec> graph_body, graph_end;
};

}  // namespace sluice::la

namespace sluice::detail::la {

using sluice::la::CgVariant;
using sluice::la::ConvergedReason;
using sluice::la::Ksp;
using sluice::la::KspNormType;
using sluice::la::KspOptions;
using sluice::la::KspResult;
using sluice::la::KspType;
using sluice::la::PcType;
using sluice::la::SolveMode;
using sluice::la::Vec;
namespace logic = ksp_logic;

/// Marks `v` as read for a fused step: LaFusedArgs' vector slots serve as inputs in some steps
/// and outputs in others, so they are not pointers to const.
inline double* input(AccessList& acc, const Vec& v) {
  return const_cast<double*>(acc.read(v));
}

/// History entries kept at most (8 MiB); norms past them are counted but not stored.
constexpr std::size_t kMaxHistory = std::size_t{1} << 20;

/// One solve: the sequence of kernels, and the mode that decides where scalars live. With
/// `par` (the dist layer), a rank's block of a distributed solve: products and reductions go
/// through it (ksp_parallel.hpp).
class Run {
 public:
  Run(const Mat::Impl& A, const KspOptions& o, Ksp::Work& work, const Vec& b, Vec& x,
      const Context& ctx, KspParallel* par, std::source_location loc);

  KspResult solve();

 private:
  // ---- set-up ----

  /// v as a work vector of n elements on ctx_ (with the room a distributed product needs).
  void ensure(Vec& v, std::size_t n) const;

  void prepare();

  /// Async and graph modes: the device state's initial value (st_ travels with the operation).
  void upload_state();

  /// TFQMR with right preconditioning: x = x0 + B y, back from the preconditioned variable.
  void unwind();

  void diagonal_into(Vec& d);

  static ByteRange slot_range(int slot);

  // ---- issuing ----

  /// A scalar of the state: by value in sync mode, by device address in async mode.
  LaScalar scalar(double LaKspState::*m) const;

  LaFusedArgs fused_args(LaFusedOp op) const;

  /// Marks the preconditioner's vector, if any, as read (pc_ points into it).
  void read_pc(AccessList& acc) const;

  /// The sums of a solver step, and the accesses that go with them in this mode. Across ranks
  /// (par_) the kernel leaves them in the partial sums and guards itself by the state only.
  LaSums sums_for(LaFinalize fin, AccessList& acc) const;

  /// After a step: sync mode waits for its sums and runs its logic on the host. Across ranks
  /// (par_), the `parts` parts of partial sums are combined first (async: and the logic runs on
  /// the device state).
  void conclude(LaFinalize fin, int parts = 1, bool tf_dx = false, const char* what = "",
                int split = 0);

  void fused(LaFusedArgs f, AccessList& acc, LaFinalize fin, const char* what);

  /// A product whose inputs are `in`'s vectors (m's pointers to them already set); `acc` holds
  /// the accesses of everything else.
  void matvec(LaMatvecArgs m, const MatvecInputs& in, AccessList& acc, LaFinalize fin,
              const char* what);

  /// The vector of the right scaling, if a vector (the Jacobi preconditioner of a CSR matrix).
  [[nodiscard]] const Vec* right_vec() const;

  void vector(LaVecOp op, Vec& y, const Vec* x, double alpha, const char* what);

  /// r = b - A x (nonzero guess) or r = b with x = 0, and the norm of b if the test needs it.
  void initial_residual(Vec& r);

  // ---- CG ----

  /// Whether z = B r is stored: only where B is a vector (Jacobi of a CSR matrix). With a
  /// constant B = c (a stencil's Jacobi, or none) the product forms c r itself where it forms
  /// p = z + b p: the same values, one vector less written and read per iteration.
  [[nodiscard]] bool cg_stores_z() const;

  /// One pass from a zero guess: x = 0, r = b, z = B r, p = 0 and the sums (with a guess, r
  /// comes from initial_residual first). p = 0 makes the first direction p = z + 0 p equal z.
  void cg_setup();

  /// CG's set-up pass (see cg_setup) and its accesses; its sums are the caller's.
  LaFusedArgs cg_init_args(AccessList& acc) const;

  /// Whether the first block of an async CG solve carries the set-up (LaCgBlockArgs::initial):
  /// from a zero guess, where the set-up is the state's upload and one pass. Not across ranks,
  /// where the set-up's steps end in reductions of their own, nor for the single-reduction
  /// variant (no block kernel).
  [[nodiscard]] bool cg_folds_setup() const;

  /// The direction product of a CG iteration, p_new = z + b p_old formed inside w = A p_new
  /// with p'w (z = c r formed here when not stored), and its accesses but its inputs' (z or r,
  /// and p_old: `in`).
  LaMatvecArgs cg_direction(const Vec& p_old, Vec& p_new, AccessList& acc, MatvecInputs& in) const;

  /// The update of a CG iteration, x += a p, r -= a w, z = B r with the norm and z'r. Its
  /// accesses leave out p (the caller's: read here, written by the direction product).
  LaFusedArgs cg_update(const Vec& p, AccessList& acc) const;

  /// One CG iteration; false once the solve stopped (sync mode). The new direction
  /// p = z + b p is formed inside the product w = A p (one pass and one launch less; a backend
  /// that cannot, cuSPARSE, forms it in a pass of its own): it reads the old direction from one
  /// vector and writes the new one to the other, so the two swap roles every iteration (a block
  /// of an even number of iterations repeats exactly).
  bool cg_iteration();

  /// `n` CG iterations as one operation (async mode): the backend may run them as one kernel
  /// (LaKernels::cg_block), with the same arithmetic as n calls of cg_iteration. The block
  /// leaves the final state in pinned slot `slot` too, if one (true: no snapshot copy needed).
  bool cg_iterations(int n, int slot);

  // ---- CG with one reduction an iteration (ksp_cg1.cpp) ----

  [[nodiscard]] bool cg_single() const { return o_.cg_variant == CgVariant::single_reduction; }

  /// The set-up: cg_setup's pass (with w = 0 too), then s = A z, one reduction for both.
  void cg1_setup();

  /// One iteration: p = z + b p, w = s + b w, x += a p, r -= a w, z = B r with the norm and
  /// z'r; then s = A z with z's; one reduction for the three sums, whose logic computes the
  /// next iteration's p'Ap from the recurrence and alpha. False once the solve stopped (sync).
  bool cg1_iteration();

  /// Issues the fused step `f` (its accesses in `acc`) and then s = A z with z's, and
  /// concludes both with `fin`'s logic on the three sums (one gather across ranks). On one
  /// context the update's sums wait in the state (async) or in pinned memory (sync).
  void cg1_update_and_product(LaFusedArgs f, AccessList& acc, LaFinalize fin, const char* what);

  /// The set-up of either CG variant (after upload_state), and one iteration of it.
  void cg_setup_any();
  bool cg_iteration_any();

  // ---- TFQMR ----

  /// Where x's updates go: y under right preconditioning (unwound at the end), else x.
  Vec& xs();

  void tf_setup();

  /// v = K p and s = v'rp (the top of the next iteration).
  // The five operations of a TFQMR iteration, each with its accesses (their sums are set by the
  // caller: one operation each in sync and the step path, one block in tf_iterations).

  /// v = K p and s = v'rp (the top of the next iteration).
  LaMatvecArgs tf_v_args(AccessList& acc) const;

  /// q = u - a v, t = u + q.
  LaFusedArgs tf_qt_args(AccessList& acc) const;

  /// r -= a K t with r'r.
  LaMatvecArgs tf_residual_args(AccessList& acc) const;

  /// The quasi-minimal steps of d and x (into y under right preconditioning) with r'rp.
  LaFusedArgs tf_dx_args(AccessList& acc);

  /// u = r + b q, q = q + b p, p = u + b q.
  LaFusedArgs tf_uqp_args(AccessList& acc) const;

  void tf_v();

  bool tf_iteration();

  /// `n` TFQMR iterations as one operation (async and graph modes): the backend may run them as
  /// one task or kernel (LaKernels::tf_block), with the same arithmetic as n calls of
  /// tf_iteration. The block leaves the final state in pinned slot `slot` too, if one (true).
  bool tf_iterations(int n, int slot);

  // ---- async driver ----

  struct Snapshot {
    Event event;
    int slot = 0;
  };

  /// Queues the device state's current value into pinned slot `slot` (unless the operation
  /// just issued left it there: `mirrored`) and the event the host waits on.
  Snapshot snapshot(int slot, bool mirrored);

  void read(Snapshot& s);

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
  [[nodiscard]] int graph_block() const;

  /// What the recorded graph depends on: a solve with the same key launches it unchanged.
  [[nodiscard]] std::vector<std::uint64_t> graph_key() const;

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
  Graph record_solve();
  /// record_solve's graphs that the host launches itself (across ranks: see Work::graph_body).
  std::optional<Graph> host_body_, host_end_;

  /// Graph mode: records the solve (or updates the recorded one in place for new vectors),
  /// launches it as one operation and reads the final state.
  void run_graph();

  // ---- monitor, history, result ----

  [[nodiscard]] int iteration_of(int entry) const;

  void monitor_sync(int from);

  void monitor_async();

  KspResult finish();

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

}  // namespace sluice::detail::la
