// `sluice devices`: every registered backend (with the reason when it has no devices) and every
// device with its properties, as a table or as JSON.

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.hpp"
#include "sluice/platform.hpp"

namespace sluice::cli {
namespace {

struct DevicesOptions {
  bool json = false;
};

double gib(std::size_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
}

int print_json() {
  nlohmann::ordered_json out;
  out["backends"] = nlohmann::ordered_json::array();
  for (const auto& b : backends()) {
    nlohmann::ordered_json j{{"name", b.name}, {"device_count", b.device_count}};
    if (b.device_count == 0) j["unavailable_reason"] = b.unavailable_reason;
    out["backends"].push_back(std::move(j));
  }
  out["devices"] = nlohmann::ordered_json::array();
  for (const auto& d : devices()) {
    out["devices"].push_back({{"device", d.device.to_string()},
                              {"backend", d.device.backend},
                              {"index", d.device.index},
                              {"name", d.name},
                              {"memory_bytes", d.total_memory},
                              {"memory_gib", gib(d.total_memory)},
                              {"compute_units", d.compute_units},
                              {"priority_lowest", d.priority_lowest},
                              {"priority_highest", d.priority_highest},
                              {"details", d.details}});
  }
  out["default_device"] = default_device().to_string();
  fmt::print("{}\n", out.dump(2));
  return 0;
}

int print_table() {
  fmt::print("backends:\n");
  for (const auto& b : backends()) {
    if (b.device_count > 0) {
      fmt::print("  {:<8} {} device{}\n", b.name, b.device_count, b.device_count == 1 ? "" : "s");
    } else {
      fmt::print("  {:<8} no devices: {}\n", b.name, b.unavailable_reason);
    }
  }
  fmt::print("\ndevices:\n");
  for (const auto& d : devices()) {
    fmt::print("  {:<8} {}\n", d.device.to_string(), d.name);
    fmt::print("           memory {:.1f} GiB, {} compute units, priorities {}..{}{}\n",
               gib(d.total_memory), d.compute_units, d.priority_lowest, d.priority_highest,
               d.priority_lowest == d.priority_highest ? " (ignored)" : "");
    if (!d.details.empty()) fmt::print("           {}\n", d.details);
  }
  fmt::print("\ndefault device: {} (set SLUICE_DEVICE to choose another)\n",
             default_device().to_string());
  return 0;
}

}  // namespace

Command add_devices_command(CLI::App& parent) {
  auto options = std::make_shared<DevicesOptions>();
  auto* app = parent.add_subcommand("devices", "List backends and devices with their properties");
  app->add_flag("--json", options->json, "Print JSON instead of a table");
  return {app, [options] { return options->json ? print_json() : print_table(); }};
}

}  // namespace sluice::cli
