#pragma once
// Functions that CPython calls through vectorcall directly (METH_FASTCALL | METH_KEYWORDS), for
// the few calls whose cost matters per call: the DLPack hand-off (`__dlpack__`,
// `__dlpack_device__`, `from_dlpack`). pybind11's dispatcher copies the keyword dict, matches
// overloads and looks types up by name for every argument and result, which took more of a call
// than the hand-off's own work (docs/bench/python-handoff-host.md). Errors come out as from any
// binding: through pybind11's exception translators.

#include <cstddef>
#include <string_view>
#include <typeinfo>

#include "common.hpp"

namespace sluice::python::fastcall {

/// The Python error for the exception being handled (call inside `catch (...)`), set through
/// pybind11's translators, as its dispatcher does. Returns null, for `return set_error();`.
inline PyObject* set_error() noexcept {
  try {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    if (py::detail::apply_exception_translators(
            py::detail::get_local_internals().registered_exception_translators)) {
      return nullptr;
    }
    if (py::detail::apply_exception_translators(
            py::detail::get_internals().registered_exception_translators)) {
      return nullptr;
    }
    PyErr_SetString(PyExc_SystemError, "sluice: an exception escaped the exception translators");
    return nullptr;
  }
}

/// The arguments of one vectorcall sorted into named slots (borrowed; null where not passed):
/// the first `positional` names may come by position, every one by keyword. Throws TypeError as
/// Python's own functions do for a wrong call.
template <std::size_t N>
struct Args {
  PyObject* slot[N] = {};

  Args(std::string_view function, const char* const (&names)[N], std::size_t positional,
       PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
    const auto npos = static_cast<std::size_t>(PyVectorcall_NARGS(nargs));
    if (npos > positional) {
      throw py::type_error(std::string(function) + "() takes " + std::to_string(positional) +
                           " positional argument(s) but " + std::to_string(npos) + " were given");
    }
    for (std::size_t i = 0; i < npos; ++i) slot[i] = args[i];
    const Py_ssize_t nkw = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; ++k) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, k);
      std::size_t i = 0;
      while (i < N && PyUnicode_CompareWithASCIIString(key, names[i]) != 0) ++i;
      if (i == N) {
        throw py::type_error(std::string(function) + "() got an unexpected keyword argument '" +
                             py::str(key).cast<std::string>() + "'");
      }
      if (slot[i] != nullptr) {
        throw py::type_error(std::string(function) + "() got multiple values for argument '" +
                             names[i] + "'");
      }
      slot[i] = args[npos + static_cast<std::size_t>(k)];
    }
  }
  /// The slot, where it was passed and is not None.
  [[nodiscard]] PyObject* given(std::size_t i) const noexcept {
    return slot[i] != nullptr && slot[i] != Py_None ? slot[i] : nullptr;
  }
};

/// pybind11's record of the class bound to C++ type T (looked up once).
template <class T>
const py::detail::type_info* type_of() {
  static const py::detail::type_info* info = py::detail::get_type_info(typeid(T), true);
  return info;
}

/// The T an instance of its pybind11 class (or a subclass) holds, or null where `o` is none.
template <class T>
T* instance_of(PyObject* o) {
  py::detail::type_caster_generic caster(type_of<T>());
  if (!caster.load(o, false)) return nullptr;
  return static_cast<T*>(caster.value);
}

/// A new Python object for `holder` of exactly class T (no look-up of its dynamic type).
template <class T>
py::object wrap_exact(const std::shared_ptr<T>& holder) {
  return py::reinterpret_steal<py::object>(
      py::detail::type_caster_generic::cast(holder.get(), py::return_value_policy::take_ownership,
                                            {}, type_of<T>(), nullptr, nullptr, &holder));
}

}  // namespace sluice::python::fastcall
