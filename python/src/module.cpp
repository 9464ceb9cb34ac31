// The module `sluice._sluice`; the package `sluice` (python/sluice/__init__.py) re-exports it.

#include "common.hpp"

PYBIND11_MODULE(_sluice, m) {
  namespace sp = sluice::python;
  m.doc() =
      "sluice: asynchronous accelerator work, made safe and fast (the compiled part; import "
      "`sluice`).";
  sp::init_location(m);
  sp::bind_errors(m);
  sp::bind_context(m);
  sp::bind_releases(m);
  sp::bind_arrays(m);
  sp::bind_scalar(m);
  sp::bind_graph(m);
  sp::bind_kernel(m);
  sp::bind_dataflow(m);
  sp::bind_la(m);
  sp::bind_lazy(m);
}
