#pragma once
/// @file
/// Backends, devices and their properties.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

/// Names one device: a backend and an index within it, written "cuda:0" or "host".
struct Device {
  std::string backend;
  int index = 0;

  /// Parses "cuda", "cuda:1" or "host"; throws sluice::Error on a malformed name.
  [[nodiscard]] static Device parse(std::string_view text);
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const Device&, const Device&) = default;
};

/// What a backend says about one of its devices.
struct DeviceInfo {
  Device device;
  std::string name;                ///< e.g. "NVIDIA H100 80GB HBM3" or the CPU model
  std::size_t total_memory = 0;    ///< bytes
  int compute_units = 0;           ///< multiprocessors, or hardware threads on the host
  int priority_lowest = 0;         ///< sluice priorities: larger is more urgent
  int priority_highest = 0;        ///< equal to priority_lowest where priorities are ignored
  std::string details;             ///< backend-specific, e.g. "compute capability 9.0"
};

/// One registered backend and whether it has devices.
struct BackendInfo {
  std::string name;
  std::size_t device_count = 0;
  std::string unavailable_reason;  ///< why there are no devices (empty when there are)
};

/// Every registered backend, in registration order.
[[nodiscard]] std::vector<BackendInfo> backends();

/// Every device of every backend.
[[nodiscard]] std::vector<DeviceInfo> devices();

/// Properties of one device; throws sluice::Error (no_device) if it does not exist.
[[nodiscard]] DeviceInfo device_info(const Device& device);

/// The device a context uses when none is named: the SLUICE_DEVICE environment variable if set
/// (e.g. "host" or "cuda:1"), otherwise the accelerator with the most compute units, otherwise
/// the host.
[[nodiscard]] Device default_device();

}  // namespace sluice
