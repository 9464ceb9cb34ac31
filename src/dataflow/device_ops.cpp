// Registers the dataflow layer's device extensions (src/dataflow/device_ops.hpp).

#include "dataflow/device_ops.hpp"

#include <memory>

#include "sluice/extension.hpp"

namespace sluice::dataflow::detail {

#ifdef SLUICE_HAVE_CUDA
DeviceOps& cuda_device_ops();  // cuda/dataflow_cuda.cu
#endif

void DeviceOps::register_builtins() {
#ifdef SLUICE_HAVE_CUDA
  // The registry owns what it is given; the built-in is a process-lifetime static.
  register_extension<DeviceOps>(
      "cuda", std::shared_ptr<DeviceOps>(std::shared_ptr<void>(), &cuda_device_ops()));
#endif
}

}  // namespace sluice::dataflow::detail
