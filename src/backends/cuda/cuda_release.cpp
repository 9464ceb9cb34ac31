#include "backends/cuda/cuda_release.hpp"

#include <utility>

#include "backends/cuda/cuda_host_callback.hpp"
#define SLUICE_IMPL_PUBLIC_INCLUDE  // a private header of sluice
#include "sluice/detail/contract_holds.hpp"
#undef SLUICE_IMPL_PUBLIC_INCLUDE

namespace sluice::detail::cuda {

void release_device_wide(std::function<void()> release) noexcept {
  if (in_host_callback()) {
    // Deferred work runs at the next backend call outside host functions, where a hold may
    // still be active: it comes back here then.
    try {
      defer([r = std::move(release)]() mutable { release_device_wide(std::move(r)); });
    } catch (...) {
      // Out of memory: leaking the resource is the only safe choice here.
    }
    return;
  }
  run_when_unheld(std::move(release));
}

}  // namespace sluice::detail::cuda
