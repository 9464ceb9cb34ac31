// The built-in DistKernels (sluice/ext/dist.hpp): the host backend's. The cuda backend's comes
// with the cuda module where it is built with NCCL (dist/cuda/register.cpp).

#include <memory>

#include "dist/host/dist_kernels.hpp"
#include "sluice/error.hpp"
#include "sluice/extension.hpp"

namespace sluice {

void DistEngine::gather_finalize(Stream&, int, const double*, double*, std::size_t,
                                 const DistFinalizeArgs*, const OpInfo& info) {
  throw Error(Errc::invalid_state,
              "dist: the " + std::string(name()) +
                  " engine has no fused gather (fused_gather_capacity() is 0)",
              info.where);
}

void DistKernels::register_builtins() {
  // The registry owns what it is given; the built-in is a process-lifetime static.
  register_extension<DistKernels>("host",
                                  {std::shared_ptr<void>(), &detail::dist::host_dist_kernels()});
}

}  // namespace sluice
