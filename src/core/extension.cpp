#include "sluice/extension.hpp"

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "core/context_impl.hpp"
#include "core/plugin_loader.hpp"
#include "sluice/context.hpp"
#include "sluice/error.hpp"

namespace sluice::detail {
namespace {

struct ExtensionRegistry {
  std::mutex mutex;
  std::map<std::pair<std::type_index, std::string>, std::shared_ptr<void>, std::less<>> impls;
};

ExtensionRegistry& extension_registry() {
  static ExtensionRegistry r;
  return r;
}

}  // namespace

void register_extension(std::type_index type, std::string_view extension_name,
                        std::string_view backend, std::shared_ptr<void> impl) {
  if (!impl) {
    throw Error(Errc::invalid_argument, "register_extension<" + std::string(extension_name) +
                                            ">: null implementation for backend '" +
                                            std::string(backend) + "'");
  }
  auto& r = extension_registry();
  std::lock_guard lock(r.mutex);
  auto [it, inserted] = r.impls.try_emplace({type, std::string(backend)}, std::move(impl));
  if (!inserted) {
    throw Error(Errc::invalid_argument,
                "register_extension<" + std::string(extension_name) + ">: backend '" +
                    std::string(backend) +
                    "' already has one; extensions are registered once per backend and never "
                    "replaced");
  }
}

namespace {
void* registered_extension(std::type_index type, std::string_view backend) noexcept {
  auto& r = extension_registry();
  std::lock_guard lock(r.mutex);
  auto it = r.impls.find(std::pair{type, std::string(backend)});
  return it == r.impls.end() ? nullptr : it->second.get();
}
}  // namespace

void* find_extension(std::type_index type, std::string_view backend) noexcept {
  if (void* impl = registered_extension(type, backend)) return impl;
  // A backend module registers its extensions when it loads: load it (once) and look again.
  const auto* outcome = load_plugin(backend);
  return outcome != nullptr && outcome->loaded ? registered_extension(type, backend) : nullptr;
}

void throw_missing_extension(std::string_view extension_name, std::string_view backend,
                             std::source_location loc) {
  throw Error(Errc::unsupported,
              std::string(backend) + " has no " + std::string(extension_name) + ": the '" +
                  std::string(backend) + "' backend registers no implementation of it; use a " +
                  "context on a backend that has one, or register one with " +
                  "sluice::register_extension<" + std::string(extension_name) + ">(\"" +
                  std::string(backend) + "\", ...)",
              loc);
}

std::size_t next_extension_slot() noexcept {
  static std::atomic<std::size_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void** context_extension_slot(const Context& ctx, std::size_t slot) noexcept {
  return ctx.impl().extension_cache_slot(slot);
}

std::string_view context_backend(const Context& ctx) noexcept {
  return ctx.device().backend;
}

}  // namespace sluice::detail
