// The memory layer's cuda extension (the typed fill kernel), registered when the cuda module
// loads.

#include <memory>

#include "backends/cuda/cuda_module.hpp"
#include "memory/fill_impl.hpp"
#include "sluice/extension.hpp"

namespace sluice::detail::cuda {
namespace {

const ModuleRegistration registration{[] {
  // The registry owns what it is given; the implementation is a process-lifetime static.
  sluice::register_extension<Fill>("cuda", {std::shared_ptr<void>(), &memory_fill()});
}};

}  // namespace
}  // namespace sluice::detail::cuda
