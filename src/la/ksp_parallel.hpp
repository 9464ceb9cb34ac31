#pragma once
// A Krylov solve of one rank's block of a distributed system. The solver loop of ksp_run.hpp runs
// unchanged on the block, with la's kernels; what needs the other ranks goes through this
// interface, which the dist layer implements (so that la does not depend on it):
//
// - a product reads other ranks' values (ghosts) besides the block's: `matvec` issues it whole;
// - a reduction's sums are partial: the step's kernel leaves them in `partial_sums` instead of
//   handing them to the solver logic, and `reduce` combines every rank's parts and then runs the
//   logic (on the device state in async and graph modes, on the host's copy in sync mode).
//
// Every rank then holds the same state, decides the same and stops at the same iteration.

#include <cstdint>
#include <source_location>
#include <string_view>
#include <vector>

#include "deps/access_list.hpp"
#include "sluice/detail/la_format.hpp"
#include "sluice/la.hpp"

namespace sluice::detail::la {

using sluice::la::Vec;

/// The vectors a product reads besides its operator (null where absent): its input x, the second
/// input x2 of CG's direction (formed inside the product as xs x + s x2), and the vector of a
/// right scaling.
struct MatvecInputs {
  const Vec* x = nullptr;
  const Vec* x2 = nullptr;
  const Vec* right = nullptr;
};

class KspParallel {
 public:
  virtual ~KspParallel() = default;

  /// A work vector of `n` elements on ctx's device with the room around it that the products
  /// need (ghost layers).
  [[nodiscard]] virtual Vec make_vec(const Context& ctx, std::size_t n,
                                     std::source_location loc) = 0;
  /// Where a step's kernel leaves part `part` of its partial sums (la_math::kMaxSums doubles),
  /// marked as written in `acc`.
  [[nodiscard]] virtual double* partial_sums(AccessList& acc, int part) = 0;
  /// Issues the product `m` on ctx (its operator is the rank's; m.A is ignored) with the other
  /// ranks' values it needs. `acc` holds the accesses of everything but `in`'s vectors and the
  /// partial sums, and m.sums the device state that guards it (if any). The epilogue's sums, if
  /// any, go to parts first_part, first_part + 1, ... of the partial sums; returns how many parts
  /// were written (at most 3: a single-reduction CG puts its update's sums in part 0 first).
  virtual int matvec(const Context& ctx, const LaMatvecArgs& m, const MatvecInputs& in,
                     const AccessList& acc, int first_part, std::string_view what,
                     std::source_location loc) = 0;
  /// Combines `parts` parts of partial sums of every rank (with `split` > 0, the parts from
  /// `split` on hold one sum each, added into the last total: dist_math::combine). Async
  /// (`state` set): then applies
  /// `fin` to the device state, guarded as la's kernels are (`tf_dx`: TFQMR's x update, which
  /// still runs in the iteration that stopped); `state_acc` marks the state and its history.
  /// Sync: waits for the totals and writes them to `host_sums` (la_math::kMaxSums doubles).
  virtual void reduce(const Context& ctx, int parts, int split, LaFinalize fin, LaKspState* state,
                      const AccessList& state_acc, bool tf_dx, double* host_sums,
                      std::string_view what, std::source_location loc) = 0;
  /// Adds what a recorded graph of the solve depends on (addresses, tracker ids) to `key`.
  virtual void add_key(std::vector<std::uint64_t>& key) const = 0;
};

}  // namespace sluice::detail::la
