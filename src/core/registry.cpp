#include "core/registry.hpp"

#include <map>
#include <mutex>
#include <string>

#include "core/builtin_backends.hpp"
#include "core/plugin_loader.hpp"
#include "sluice/error.hpp"

namespace sluice {
namespace {

// A backend whose module could not be loaded: listed with the reason and no devices, so that
// `sluice devices` and a context on it say why instead of "unknown backend".
class UnavailableBackend final : public Backend {
 public:
  UnavailableBackend(std::string name, std::string reason)
      : name_(std::move(name)), reason_(std::move(reason)) {}

  std::string_view name() const noexcept override { return name_; }
  std::vector<DeviceInfo> devices() override { return {}; }
  std::string unavailable_reason() override { return reason_; }
  std::unique_ptr<Stream> create_stream(const StreamConfig&) override { throw unavailable(); }
  void* allocate_pinned(std::size_t) override { throw unavailable(); }
  void deallocate_pinned(void*) noexcept override {}
  void set_pool_release_threshold(int, std::size_t) override { throw unavailable(); }
  void trim_pool(int, std::size_t) override { throw unavailable(); }
  std::size_t pool_reserved(int) override { throw unavailable(); }

 private:
  Error unavailable() const {
    return Error(Errc::no_device, "backend '" + name_ + "' has no devices: " + reason_);
  }

  std::string name_, reason_;
};

struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<Backend>> backends;
  std::map<std::string, std::shared_ptr<Backend>, std::less<>> unavailable;  // by name

  Registry() { backends.push_back(detail::make_host_backend()); }

  std::shared_ptr<Backend> registered(std::string_view name) {
    std::lock_guard lock(mutex);
    for (const auto& b : backends) {
      if (b->name() == name) return b;
    }
    return nullptr;
  }

  std::shared_ptr<Backend> stand_in(const detail::PluginOutcome& o) {
    std::lock_guard lock(mutex);
    auto& b = unavailable[o.name];
    if (!b) b = std::make_shared<UnavailableBackend>(o.name, o.reason);
    return b;
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
  if (auto b = r.registered(name)) return b;
  // Not under the registry's lock: the module registers its backend while it loads.
  if (const auto* outcome = detail::load_plugin(name)) {
    if (auto b = r.registered(name)) return b;
    if (!outcome->loaded) return r.stand_in(*outcome);
  }
  std::string known;
  for (const auto& b : detail::all_backends()) {
    known += (known.empty() ? "" : ", ") + std::string(b->name());
  }
  throw Error(Errc::no_device, "unknown backend '" + std::string(name) +
                                   "'; known backends: " + known + " (a backend module would be " +
                                   "libsluice-" + std::string(name) +
                                   ".so, found beside libsluice or through SLUICE_PLUGIN_PATH)");
}

namespace detail {
std::vector<std::shared_ptr<Backend>> all_backends() {
  auto& r = registry();
  const auto outcomes = load_all_plugins();
  std::vector<std::shared_ptr<Backend>> out;
  {
    std::lock_guard lock(r.mutex);
    out = r.backends;
  }
  for (const auto& o : outcomes) {
    if (!o.loaded && !r.registered(o.name)) out.push_back(r.stand_in(o));
  }
  return out;
}
}  // namespace detail

}  // namespace sluice
