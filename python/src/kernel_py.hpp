#pragma once
// Kernels from the kernel layer, for Python (kernel.cpp); the dataflow binding launches them too.

#include <memory>
#include <string>
#include <vector>

#include "common.hpp"
#include "sluice/kernel.hpp"

namespace sluice::python {

struct PySpec {
  KernelSpec spec;
  PyRef host;  ///< fn(threads, *args): the host backend's implementation
};

/// One parameter of a Python Kernel: "float64", "const float32*", "int32*", ...
struct Param {
  DType dtype;
  bool pointer = false;
  bool is_const = false;
};

struct PyKernel {
  std::shared_ptr<PySpec> spec;
  Device device;
  std::vector<Param> params;
  std::shared_ptr<const LoadedKernel> loaded;  ///< null on the host (the Python implementation)
  /// cuda: the runtime's handle of the kernel, for dataflow command groups (loaded on first use).
  mutable const void* native = nullptr;
};

[[nodiscard]] std::shared_ptr<PyKernel> load(const std::shared_ptr<PySpec>& spec,
                                             const std::vector<std::string>& params,
                                             const Device& device, std::source_location loc);
void launch(const PyKernel& k, const Context& ctx, const py::handle& grid, const py::handle& block,
            std::size_t shared, const py::tuple& args, std::source_location loc);

}  // namespace sluice::python
