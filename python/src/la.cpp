#include "common.hpp"
namespace sluice::python {
void bind_la(py::module_&) {}
}
