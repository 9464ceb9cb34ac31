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

// "9.0", or "" where the device has none (the host).
std::string cc(const DeviceInfo& d) {
  if (d.compute_capability_major == 0) return {};
  return fmt::format("{}.{}", d.compute_capability_major, d.compute_capability_minor);
}

double kib(std::size_t bytes) {
  return static_cast<double>(bytes) / 1024.0;
}

void print_inspection(const DeviceInfo& d) {
  if (d.compute_capability_major != 0) {
    fmt::print("           compute capability {}, {} SMs at {:.0f} MHz, warp {}\n", cc(d),
               d.multiprocessors, d.clock_khz / 1e3, d.warp_size);
    fmt::print("           memory {:.0f} MHz x {} bits = {:.0f} GB/s peak, L2 {:.0f} KiB\n",
               d.memory_clock_khz / 1e3, d.memory_bus_bits, d.memory_bandwidth_gbs,
               kib(d.l2_cache_bytes));
    fmt::print(
        "           shared memory {:.0f} KiB per block, {:.0f} KiB per SM; threads {} per "
        "block, {} per SM\n",
        kib(d.shared_memory_per_block), kib(d.shared_memory_per_multiprocessor),
        d.max_threads_per_block, d.max_threads_per_multiprocessor);
  } else {
    fmt::print(
        "           {} cores x {} threads at {:.0f} MHz, L1d {:.0f} KiB, last-level cache "
        "{:.0f} KiB\n",
        d.multiprocessors, d.max_threads_per_multiprocessor, d.clock_khz / 1e3,
        kib(d.shared_memory_per_block), kib(d.l2_cache_bytes));
  }
}

// The peer-access matrix of each backend with more than one device.
void print_peers() {
  for (const auto& b : backends()) {
    if (b.device_count < 2) continue;
    const auto m = peer_access_matrix(b.name);
    fmt::print(
        "\npeer access ({}; rows read columns directly, '-': copies staged through the host):\n    "
        "  ",
        b.name);
    for (std::size_t j = 0; j < m.size(); ++j) fmt::print(" {:>3}", j);
    fmt::print("\n");
    for (std::size_t i = 0; i < m.size(); ++i) {
      fmt::print("  {:>3} ", i);
      for (std::size_t j = 0; j < m.size(); ++j) fmt::print(" {:>3}", m[i][j] ? "yes" : "-");
      fmt::print("\n");
    }
  }
}

int print_json() {
  nlohmann::ordered_json out;
  out["backends"] = nlohmann::ordered_json::array();
  for (const auto& b : backends()) {
    nlohmann::ordered_json j{{"name", b.name}, {"device_count", b.device_count}};
    if (!b.module.empty()) j["module"] = b.module;
    if (b.device_count == 0) j["unavailable_reason"] = b.unavailable_reason;
    out["backends"].push_back(std::move(j));
  }
  out["devices"] = nlohmann::ordered_json::array();
  for (const auto& d : devices()) {
    out["devices"].push_back(
        {{"device", d.device.to_string()},
         {"backend", d.device.backend},
         {"index", d.device.index},
         {"name", d.name},
         {"memory_bytes", d.total_memory},
         {"memory_gib", gib(d.total_memory)},
         {"compute_units", d.compute_units},
         {"priority_lowest", d.priority_lowest},
         {"priority_highest", d.priority_highest},
         {"details", d.details},
         {"compute_capability", cc(d)},
         {"multiprocessors", d.multiprocessors},
         {"clock_khz", d.clock_khz},
         {"memory_clock_khz", d.memory_clock_khz},
         {"memory_bus_bits", d.memory_bus_bits},
         {"memory_bandwidth_gbs", d.memory_bandwidth_gbs},
         {"l2_cache_bytes", d.l2_cache_bytes},
         {"shared_memory_per_block", d.shared_memory_per_block},
         {"shared_memory_per_multiprocessor", d.shared_memory_per_multiprocessor},
         {"max_threads_per_block", d.max_threads_per_block},
         {"max_threads_per_multiprocessor", d.max_threads_per_multiprocessor},
         {"warp_size", d.warp_size},
         {"peer_access", d.peer_access}});
  }
  out["default_device"] = default_device().to_string();
  fmt::print("{}\n", out.dump(2));
  return 0;
}

int print_table() {
  fmt::print("backends:\n");
  for (const auto& b : backends()) {
    const std::string from = b.module.empty() ? "" : fmt::format(" (module {})", b.module);
    if (b.device_count > 0) {
      fmt::print("  {:<8} {} device{}{}\n", b.name, b.device_count, b.device_count == 1 ? "" : "s",
                 from);
    } else {
      fmt::print("  {:<8} no devices{}: {}\n", b.name, from, b.unavailable_reason);
    }
  }
  fmt::print("\ndevices:\n");
  for (const auto& d : devices()) {
    fmt::print("  {:<8} {}\n", d.device.to_string(), d.name);
    fmt::print("           memory {:.1f} GiB, {} compute units, priorities {}..{}{}\n",
               gib(d.total_memory), d.compute_units, d.priority_highest, d.priority_lowest,
               d.priority_lowest == d.priority_highest ? " (ignored)" : " (lower is more urgent)");
    print_inspection(d);
    if (!d.details.empty()) fmt::print("           {}\n", d.details);
  }
  print_peers();
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
