// What LaKernels does where a backend does nothing better (sluice/ext/la_kernels.hpp), and the
// built-in implementations it registers.

#include "la/host/la_kernels.hpp"
#include "la/ksp_logic.hpp"
#include "sluice/ext/la_kernels.hpp"
#include "sluice/extension.hpp"

namespace sluice {

namespace {
// The registry owns what it is given; the built-ins are process-lifetime statics.
std::shared_ptr<LaKernels> unowned(LaKernels& k) {
  return {std::shared_ptr<void>(), &k};
}
}  // namespace

void LaKernels::register_builtins() {
  register_extension<LaKernels>("host", unowned(detail::host::la_kernels()));
}

void LaKernels::cg_block(Stream& stream, const LaCgBlockArgs& args, const OpInfo& op) {
  if (args.initial != nullptr) {
    set_state(stream, args.direction.sums.state, *args.initial, op);
    fused(stream, args.init, op);
  }
  LaMatvecArgs direction;
  LaFusedArgs update;
  for (std::int32_t k = 0; k < args.iterations; ++k) {
    cg_block_step(args, k, direction, update);
    matvec(stream, direction, op);
    fused(stream, update, op);
  }
  if (args.running != nullptr) {
    running(stream, args.direction.sums.state, args.running, args.mirror, op);
  } else if (args.mirror != nullptr) {
    stream.copy(args.mirror, args.direction.sums.state, sizeof(LaKspState), op);
  }
}

void LaKernels::tf_block(Stream& stream, const LaTfBlockArgs& args, const OpInfo& op) {
  for (std::int32_t k = 0; k < args.iterations; ++k) {
    fused(stream, args.qt, op);
    matvec(stream, args.residual, op);
    fused(stream, args.dx, op);
    fused(stream, args.uqp, op);
    matvec(stream, args.v, op);
  }
  if (args.running != nullptr) {
    running(stream, args.v.sums.state, args.running, args.mirror, op);
  } else if (args.mirror != nullptr) {
    stream.copy(args.mirror, args.v.sums.state, sizeof(LaKspState), op);
  }
}

}  // namespace sluice
