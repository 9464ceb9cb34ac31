// A backend module for the plugin tests that needs no GPU, built as libsluice-echo.so: backend
// "echo", whose one device forwards everything to the host backend. Built with
// SLUICE_ECHO_STALE it is libsluice-stale.so instead, whose entry point claims another ABI tag
// (as a module of another sluice build would).

#include <memory>
#include <string>
#include <vector>

#include "sluice/backend.hpp"
#include "sluice/ext/plugin.hpp"
#include "sluice/platform.hpp"

namespace {

#ifdef SLUICE_ECHO_STALE
constexpr const char* kName = "stale";
#else
constexpr const char* kName = "echo";
#endif

class EchoBackend final : public sluice::Backend {
 public:
  std::string_view name() const noexcept override { return kName; }
  std::vector<sluice::DeviceInfo> devices() override {
    auto ds = host_->devices();
    for (auto& d : ds) {
      d.device.backend = kName;
      d.name = std::string(kName) + " of " + d.name;
    }
    return ds;
  }
  std::unique_ptr<sluice::Stream> create_stream(const sluice::StreamConfig& config) override {
    return host_->create_stream(config);
  }
  void* allocate_pinned(std::size_t bytes) override { return host_->allocate_pinned(bytes); }
  void deallocate_pinned(void* ptr) noexcept override { host_->deallocate_pinned(ptr); }
  void set_pool_release_threshold(int device, std::size_t bytes) override {
    host_->set_pool_release_threshold(device, bytes);
  }
  void trim_pool(int device, std::size_t keep_bytes) override {
    host_->trim_pool(device, keep_bytes);
  }
  std::size_t pool_reserved(int device) override { return host_->pool_reserved(device); }

 private:
  std::shared_ptr<sluice::Backend> host_ = sluice::find_backend("host");
};

int register_all(char* why, std::size_t why_size) noexcept {
  return sluice::plugin_register(why, why_size,
                                 [] { sluice::register_backend(std::make_shared<EchoBackend>()); });
}

}  // namespace

#ifdef SLUICE_ECHO_STALE
extern "C" __attribute__((visibility("default"))) const SluicePlugin* sluice_plugin() {
  static const SluicePlugin plugin{SLUICE_PLUGIN_ENTRY_VERSION, "not this sluice", kName,
                                   &register_all};
  return &plugin;
}
#else
SLUICE_PLUGIN_DEFINE("echo", register_all)
#endif
