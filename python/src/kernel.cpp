#include "common.hpp"
namespace sluice::python {
void bind_kernel(py::module_&) {}
}
