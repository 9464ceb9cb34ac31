#include "common.hpp"
namespace sluice::python {
void bind_scalar(py::module_&) {}
}
