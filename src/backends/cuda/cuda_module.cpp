// The entry point of the cuda module (sluice/ext/plugin.hpp).

#include "backends/cuda/cuda_module.hpp"

#include <vector>

#include "backends/cuda/cuda_backend.hpp"
#include "sluice/backend.hpp"
#include "sluice/ext/plugin.hpp"

namespace sluice::detail::cuda {
namespace {

std::vector<void (*)()>& registrations() {
  static std::vector<void (*)()> fns;
  return fns;
}

// The layers' extensions first, the backend last: a module that fails half-way leaves no
// backend that would find an extension missing.
int register_all(char* why, std::size_t why_size) noexcept {
  return plugin_register(why, why_size, [] {
    for (auto fn : registrations()) fn();
    register_backend(make_backend());
  });
}

}  // namespace

ModuleRegistration::ModuleRegistration(void (*fn)()) noexcept {
  registrations().push_back(fn);  // at load time; an allocation failure there ends the process
}

}  // namespace sluice::detail::cuda

SLUICE_PLUGIN_DEFINE("cuda", sluice::detail::cuda::register_all)
