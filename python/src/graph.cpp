#include "common.hpp"
namespace sluice::python {
void bind_graph(py::module_&) {}
}
