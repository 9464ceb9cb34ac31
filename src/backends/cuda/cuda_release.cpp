#include "backends/cuda/cuda_release.hpp"

#include <utility>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_host_callback.hpp"
#include "backends/cuda/cuda_reaper.hpp"
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

void unload_libraries_later(int device, std::vector<cudaLibrary_t> libraries) noexcept {
  try {
    auto unload = [libraries = std::move(libraries)] {
      for (auto l : libraries) (void)cudaLibraryUnload(l);
      clear_error();
    };
    if (after_device_work(device, unload)) return;
    // No reaper: here, after the device's work, where that cannot deadlock.
    release_device_wide([device, unload] {
      DeviceGuard guard(device, std::nothrow);
      (void)cudaDeviceSynchronize();
      unload();
    });
  } catch (...) {
    // Out of memory making the release: the libraries stay loaded (a leak, never a hang).
  }
}

}  // namespace sluice::detail::cuda
