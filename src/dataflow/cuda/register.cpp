// The dataflow layer's cuda extension (the host-accessor gate kernel, managed memory), registered
// when the cuda module loads.

#include <memory>

#include "backends/cuda/cuda_module.hpp"
#include "dataflow/device_ops.hpp"
#include "sluice/extension.hpp"

namespace sluice::dataflow::detail {
DeviceOps& cuda_device_ops();  // dataflow_cuda.cu
}  // namespace sluice::dataflow::detail

namespace sluice::detail::cuda {
namespace {

const ModuleRegistration registration{[] {
  // The registry owns what it is given; the implementation is a process-lifetime static.
  sluice::register_extension<dataflow::detail::DeviceOps>(
      "cuda", {std::shared_ptr<void>(), &dataflow::detail::cuda_device_ops()});
}};

}  // namespace
}  // namespace sluice::detail::cuda
