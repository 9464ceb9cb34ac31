#pragma once
/// @file
/// The la layer's extension interface (sluice/extension.hpp): a backend's linear-algebra kernels
/// (sluice/la.hpp). For backend authors; users never need it.

#include <memory>
#include <string_view>

#include "sluice/backend.hpp"
#include "sluice/detail/la_format.hpp"

namespace sluice {

/// A backend's linear-algebra kernels (sluice/la.hpp): element-wise vector operations,
/// reductions, matrix-vector products (CSR and matrix-free stencils) and the fused steps of the
/// Krylov solvers. Each call enqueues one operation on `stream` (a device backend may use more
/// than one launch for it, but never blocks the host); ordering and tracking are the caller's.
/// The per-element arithmetic and the solvers' scalar logic are shared by all backends
/// (src/la/kernel_math.hpp, src/la/ksp_logic.hpp), so each backend supplies only the loops.
///
/// Reductions sum in an order that depends only on the vector length and the device, never on
/// timing: a result is the same on every run.
class LaKernels {
 public:
  static constexpr std::string_view extension_name = "LaKernels";
  /// Registers the host implementation; the cuda module registers its own when it loads.
  static void register_builtins();

  virtual ~LaKernels() = default;
  virtual void vector(Stream& stream, const LaVecArgs& args, const OpInfo& op) = 0;
  virtual void reduce(Stream& stream, const LaReduceArgs& args, const OpInfo& op) = 0;
  virtual void matvec(Stream& stream, const LaMatvecArgs& args, const OpInfo& op) = 0;
  virtual void fused(Stream& stream, const LaFusedArgs& args, const OpInfo& op) = 0;
  /// A block of CG iterations in async mode (see LaCgBlockArgs). The default issues the set-up
  /// if the block carries one (set_state, then fused for `args.init`), each iteration's two steps,
  /// and copies the state to `args.mirror`; a backend may run the whole block as one kernel,
  /// with the same arithmetic in the same order (the iterates stay bit-identical to sync mode's).
  virtual void cg_block(Stream& stream, const LaCgBlockArgs& args, const OpInfo& op);
  /// A block of TFQMR iterations in async mode (see LaTfBlockArgs). The default issues each
  /// iteration's five operations, then `running` or a copy of the state to `args.mirror`; a
  /// backend may run the block as one operation or kernel, with the same arithmetic in the same
  /// order.
  virtual void tf_block(Stream& stream, const LaTfBlockArgs& args, const OpInfo& op);
  /// *dst = value (a solver's device state), in stream order: the value travels with the
  /// operation (a kernel argument, a task's copy), so the caller's copy may go at once.
  virtual void set_state(Stream& stream, LaKspState* dst, const LaKspState& value,
                         const OpInfo& op) = 0;
  /// *flag = 1 while the solver state `state` iterates (its `stop` is 0), else 0, and the state
  /// copied to `mirror` (pinned host memory; none if null), in stream order: the condition of a
  /// graph-mode solve's while node, and the state the host reads when the solve ends.
  virtual void running(Stream& stream, const LaKspState* state, std::int32_t* flag,
                       LaKspState* mirror, const OpInfo& op) = 0;
  /// out[i] = A(i, i) (0 where a CSR row stores none).
  virtual void diagonal(Stream& stream, const LaOperator& A, double* out, const OpInfo& op) = 0;
  /// Backend data for a CSR matrix, made once per matrix and kept alive by it (a cuSPARSE
  /// descriptor, ...); passed back as `LaCsr::prepared`. May be null.
  [[nodiscard]] virtual std::shared_ptr<void> prepare(const LaCsr& csr) {
    (void)csr;
    return nullptr;
  }
};

}  // namespace sluice
