#pragma once
// What the dataflow runtime needs from a device backend beyond the runtime interface: an
// extension (sluice/extension.hpp), registered by the backends that need it (the cuda module:
// src/dataflow/cuda/). Without it the portable paths are used: a blocking host task as the
// host-accessor gate, pinned host memory as "shared" USM.

#include <cstddef>
#include <string>
#include <string_view>

#include "sluice/backend.hpp"

namespace sluice::dataflow::detail {

class DeviceOps {
 public:
  static constexpr std::string_view extension_name = "DataflowDeviceOps";

  virtual ~DeviceOps() = default;
  /// Enqueues on `stream` work that holds it until `*flag` (mapped pinned memory) becomes
  /// non-zero, without occupying a host thread. Throws Error if that fails.
  virtual void launch_gate(Stream& stream, const volatile int* flag) = 0;
  /// Memory both the host and device `device` may touch (managed), never more than the device
  /// has free; nullptr and `why` on failure.
  virtual void* allocate_shared(int device, std::size_t bytes, std::string& why) = 0;
  virtual void free_shared(void* ptr) noexcept = 0;
};

}  // namespace sluice::dataflow::detail
