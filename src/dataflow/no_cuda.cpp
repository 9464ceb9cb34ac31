// Builds without the cuda backend: no cuda device exists, so these are never reached.

#include <string>

#include "dataflow/cuda_hooks.hpp"
#include "sluice/error.hpp"

namespace sluice::dataflow::detail {

void launch_cuda_gate(void*, const volatile int*) {
  throw Error(Errc::unsupported, "sluice was built without the cuda backend");
}

void* cuda_malloc_managed(int, std::size_t, std::string& why) {
  why = "sluice was built without the cuda backend";
  return nullptr;
}

void cuda_free_managed(void*) noexcept {}

}  // namespace sluice::dataflow::detail
