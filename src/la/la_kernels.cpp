// What LaKernels does where a backend does nothing better (sluice/backend.hpp).

#include "la/ksp_logic.hpp"
#include "sluice/backend.hpp"

namespace sluice {

void LaKernels::cg_block(Stream& stream, const LaCgBlockArgs& args, const OpInfo& op) {
  LaMatvecArgs direction;
  LaFusedArgs update;
  for (std::int32_t k = 0; k < args.iterations; ++k) {
    cg_block_step(args, k, direction, update);
    matvec(stream, direction, op);
    fused(stream, update, op);
  }
  if (args.mirror != nullptr) {
    stream.copy(args.mirror, args.direction.sums.state, sizeof(LaKspState), op);
  }
}

}  // namespace sluice
