#include "common.hpp"
namespace sluice::python {
void bind_dataflow(py::module_&) {}
}
