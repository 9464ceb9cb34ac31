#pragma once
// Enumeration of CUDA devices (once per process) and switching the current device.

#include <new>
#include <source_location>
#include <string>
#include <vector>

#include "sluice/platform.hpp"

namespace sluice::detail::cuda {

struct DeviceTable {
  std::vector<DeviceInfo> devices;  ///< indexed by CUDA device ordinal
  std::string unavailable_reason;   ///< why `devices` is empty (or shorter than the count)
};

/// The devices, enumerated on first use. Never throws for a machine without GPU or driver: the
/// table is then empty and says why.
[[nodiscard]] const DeviceTable& device_table();
[[nodiscard]] int device_count();

/// Throws Error(no_device) unless `device` is a CUDA device of this machine.
void require_device(int device, std::source_location where = std::source_location::current());

/// Makes `device` current for the guard's lifetime; costs one cudaGetDevice when it already is.
/// The previous device is restored afterwards, so that user code which manages the current
/// device itself is not surprised. The throwing form refuses to run inside a host function (where
/// CUDA calls are forbidden) and first runs CUDA calls deferred from host functions.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device, std::source_location where = std::source_location::current());
  /// For release paths: never throws; does nothing if the device cannot be made current.
  DeviceGuard(int device, std::nothrow_t) noexcept;
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace sluice::detail::cuda
