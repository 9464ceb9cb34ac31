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
  std::string name;              ///< e.g. "NVIDIA H100 80GB HBM3" or the CPU model
  std::size_t total_memory = 0;  ///< bytes
  int compute_units = 0;         ///< multiprocessors, or hardware threads on the host
  /// Context priorities (ContextOptions::priority): lower numbers are more urgent, as in CUDA and
  /// Warp, and 0 is the default. The least urgent value the device takes (0 on cuda)...
  int priority_lowest = 0;
  /// ... and the most urgent (on cuda e.g. -5); equal where priorities are ignored.
  int priority_highest = 0;
  std::string details;  ///< backend-specific, e.g. "compute capability 9.0"

  // What a kernel author needs (reference 003, DeviceDescription). 0 means unknown or not
  // applicable (a host has no compute capability).
  int compute_capability_major = 0;  ///< e.g. 9 for Hopper; 0 on the host
  int compute_capability_minor = 0;
  int multiprocessors = 0;          ///< streaming multiprocessors; physical cores on the host
  int clock_khz = 0;                ///< peak core clock
  int memory_clock_khz = 0;         ///< peak memory clock (0 on the host: not exposed)
  int memory_bus_bits = 0;          ///< memory bus width
  double memory_bandwidth_gbs = 0;  ///< theoretical peak, GB/s (10^9 bytes per second)
  std::size_t l2_cache_bytes = 0;   ///< L2 on a GPU; the last-level cache on the host
  std::size_t shared_memory_per_block = 0;  ///< on the host: the L1 data cache of one core
  std::size_t shared_memory_per_multiprocessor = 0;
  int max_threads_per_block = 0;           ///< 1 on the host (a work item is a thread)
  int max_threads_per_multiprocessor = 0;  ///< hardware threads per core on the host
  int warp_size = 0;                       ///< 1 on the host
  /// peer_access[j]: this device reads and writes device j of the same backend directly
  /// (true for itself). Copies between devices without it are staged through host memory.
  std::vector<bool> peer_access;
};

/// One backend and whether it has devices.
struct BackendInfo {
  std::string name;
  std::size_t device_count = 0;
  std::string unavailable_reason;  ///< why there are no devices (empty when there are)
  /// The module it was loaded from (libsluice-<name>.so); empty for a backend linked into
  /// libsluice or registered by the program.
  std::string module;
};

/// Every backend: the built-in host, every backend module this build knows of or finds (loaded
/// now if not yet; one that failed to load is listed with the reason and no devices, see
/// sluice/ext/plugin.hpp), and those the program registered, in that order.
[[nodiscard]] std::vector<BackendInfo> backends();

/// Every device of every backend.
[[nodiscard]] std::vector<DeviceInfo> devices();

/// Properties of one device; throws sluice::Error (no_device) if it does not exist.
[[nodiscard]] DeviceInfo device_info(const Device& device);

/// The peer-access matrix of a backend's devices: `m[i][j]` says whether device i can access
/// device j's memory directly (`DeviceInfo::peer_access` of device i). Empty for a backend
/// without devices; throws Error(no_device) for an unknown backend.
[[nodiscard]] std::vector<std::vector<bool>> peer_access_matrix(std::string_view backend);

/// The device a context uses when none is named: the SLUICE_DEVICE environment variable if set
/// (e.g. "host" or "cuda:1"), otherwise the accelerator with the most compute units, otherwise
/// the host.
[[nodiscard]] Device default_device();

}  // namespace sluice
