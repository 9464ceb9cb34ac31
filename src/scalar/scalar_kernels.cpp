// The scalar layer's built-in interpreters, registered as the ScalarKernels extension of their
// backends (sluice/extension.hpp).

#include <memory>

#include "scalar/host/scalar_kernels.hpp"
#include "sluice/ext/scalar_kernels.hpp"
#include "sluice/extension.hpp"

namespace sluice {

namespace {
// The registry owns what it is given; the built-ins are process-lifetime statics.
std::shared_ptr<ScalarKernels> unowned(ScalarKernels& k) {
  return {std::shared_ptr<void>(), &k};
}
}  // namespace

void ScalarKernels::register_builtins() {
  register_extension<ScalarKernels>("host", unowned(detail::host::scalar_interpreter()));
}

}  // namespace sluice
