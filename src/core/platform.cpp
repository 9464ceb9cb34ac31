#include "sluice/platform.hpp"

#include <charconv>
#include <cstdlib>

#include "core/plugin_loader.hpp"
#include "core/registry.hpp"
#include "sluice/error.hpp"

namespace sluice {

Device Device::parse(std::string_view text) {
  Device d;
  auto colon = text.find(':');
  d.backend = std::string(text.substr(0, colon));
  if (d.backend.empty()) {
    throw Error(Errc::invalid_argument, "device name '" + std::string(text) +
                                            "' has no backend; write e.g. cuda:0 or host");
  }
  if (colon != std::string_view::npos) {
    auto idx = text.substr(colon + 1);
    auto [p, ec] = std::from_chars(idx.data(), idx.data() + idx.size(), d.index);
    if (ec != std::errc() || p != idx.data() + idx.size() || d.index < 0) {
      throw Error(Errc::invalid_argument,
                  "device name '" + std::string(text) + "' has a bad index; write e.g. cuda:0");
    }
  }
  return d;
}

std::string Device::to_string() const {
  return backend + ":" + std::to_string(index);
}

std::vector<BackendInfo> backends() {
  std::vector<BackendInfo> out;
  for (const auto& b : detail::all_backends()) {
    BackendInfo info{std::string(b->name()), b->devices().size(), {}, {}};
    if (info.device_count == 0) info.unavailable_reason = b->unavailable_reason();
    if (const auto* o = detail::load_plugin(info.name); o != nullptr && o->loaded) {
      info.module = o->path;
    }
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<DeviceInfo> devices() {
  std::vector<DeviceInfo> out;
  for (const auto& b : detail::all_backends()) {
    auto ds = b->devices();
    out.insert(out.end(), ds.begin(), ds.end());
  }
  return out;
}

DeviceInfo device_info(const Device& device) {
  auto backend = find_backend(device.backend);
  auto ds = backend->devices();
  if (device.index < 0 || static_cast<std::size_t>(device.index) >= ds.size()) {
    std::string why = ds.empty() ? backend->unavailable_reason() : "";
    throw Error(Errc::no_device, "no device " + device.to_string() + ": backend '" +
                                     device.backend + "' has " + std::to_string(ds.size()) +
                                     " device(s)" + (why.empty() ? "" : " (" + why + ")") +
                                     "; `sluice devices` lists them");
  }
  return ds[static_cast<std::size_t>(device.index)];
}

std::vector<std::vector<bool>> peer_access_matrix(std::string_view backend) {
  std::vector<std::vector<bool>> m;
  for (const auto& d : find_backend(backend)->devices()) {
    m.push_back(d.peer_access);
  }
  // A backend that does not fill the matrix: each device reaches itself only.
  for (std::size_t i = 0; i < m.size(); ++i) {
    m[i].resize(m.size(), false);
    m[i][i] = true;
  }
  return m;
}

Device default_device() {
  if (const char* env = std::getenv("SLUICE_DEVICE"); env != nullptr && *env != '\0') {
    Device d = Device::parse(env);
    (void)device_info(d);  // a clear error now rather than at first use
    return d;
  }
  const DeviceInfo* best = nullptr;
  auto all = devices();
  for (const auto& d : all) {
    if (d.device.backend == "host") continue;
    if (best == nullptr || d.compute_units > best->compute_units) best = &d;
  }
  return best != nullptr ? best->device : Device{"host", 0};
}

}  // namespace sluice
