#include "core/registry.hpp"

#include <algorithm>
#include <mutex>

#include "backends/host/host_backend.hpp"
#include "sluice/error.hpp"
#ifdef SLUICE_HAVE_CUDA
#include "backends/cuda/cuda_backend.hpp"
#endif

namespace sluice {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<Backend>> backends;

  Registry() {
    backends.push_back(detail::host::make_backend());
#ifdef SLUICE_HAVE_CUDA
    backends.push_back(detail::cuda::make_backend());
#endif
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_backend(std::shared_ptr<Backend> backend) {
  if (!backend) throw Error(Errc::invalid_argument, "register_backend: null backend");
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  for (const auto& b : r.backends) {
    if (b->name() == backend->name()) {
      throw Error(Errc::invalid_argument, "register_backend: a backend named '" +
                                              std::string(backend->name()) +
                                              "' is already registered; pick another name");
    }
  }
  r.backends.push_back(std::move(backend));
}

std::shared_ptr<Backend> find_backend(std::string_view name) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  std::string known;
  for (const auto& b : r.backends) {
    if (b->name() == name) return b;
    known += (known.empty() ? "" : ", ") + std::string(b->name());
  }
  throw Error(
      Errc::no_device,
      "unknown backend '" + std::string(name) + "'; known backends: " + known +
          (known.find("cuda") == std::string::npos ? " (cuda is built only where nvcc was found)"
                                                   : ""));
}

namespace detail {
std::vector<std::shared_ptr<Backend>> all_backends() {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  return r.backends;
}
}  // namespace detail

}  // namespace sluice
