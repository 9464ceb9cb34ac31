// sluice's exceptions as Python exceptions: `sluice.Error` (with `code`, `file`, `line`,
// `function`), `sluice.OutOfMemory` (also a MemoryError) and `sluice.WorkFailed` (with
// `operation`, `cause` and `skipped`, and the line that issued the failed work).

#include <algorithm>
#include <string>

#include "common.hpp"

namespace sluice::python {
namespace {

PyObject* g_error = nullptr;
PyObject* g_out_of_memory = nullptr;
PyObject* g_work_failed = nullptr;

py::object make_exception(const py::module_& m, const char* name, PyObject* base, const char* doc) {
  const std::string qualified = std::string("sluice.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base, nullptr);
  if (cls == nullptr) throw py::error_already_set();
  auto obj = py::reinterpret_steal<py::object>(cls);
  m.attr(name) = obj;
  return obj;
}

void raise(PyObject* cls, const Error& e, const py::dict& extra) {
  py::object instance = py::handle(cls)(std::string(e.what()));
  std::string code = to_string(e.code());
  std::replace(code.begin(), code.end(), ' ', '_');
  instance.attr("code") = code;
  instance.attr("file") = py::str(e.where().file_name());
  instance.attr("line") = static_cast<int>(e.where().line());
  instance.attr("function") = py::str(e.where().function_name());
  for (auto item : extra) instance.attr(item.first) = item.second;
  PyErr_SetObject(cls, instance.ptr());
}

}  // namespace

std::optional<Error> as_sluice_error(py::error_already_set& e) {
  if (g_error == nullptr || !e.matches(g_error)) return std::nullopt;
  const py::object v = e.value();
  std::string code = py::hasattr(v, "code") ? v.attr("code").cast<std::string>() : "";
  const Errc errc = code == "invalid_state"     ? Errc::invalid_state
                    : code == "unsupported"     ? Errc::unsupported
                    : code == "no_device"       ? Errc::no_device
                    : code == "out_of_memory"   ? Errc::out_of_memory
                    : code == "backend_failure" ? Errc::backend_failure
                    : code == "work_failed"     ? Errc::work_failed
                                                : Errc::invalid_argument;
  std::string message = py::str(v).cast<std::string>();
  if (message.rfind("sluice: ", 0) == 0) message.erase(0, 8);  // Error adds it again
  return Error(errc, message);
}

void bind_errors(py::module_& m) {
  PyObject* base_types = PyTuple_Pack(1, PyExc_RuntimeError);
  auto error = make_exception(
      m, "Error", base_types,
      "Every failure sluice reports. `code` names the kind (invalid_argument, out_of_memory,\n"
      "unsupported, no_device, backend_failure, work_failed, invalid_state); `file`, `line` and\n"
      "`function` name the call that raised it (your Python line where sluice could find it).");
  Py_DECREF(base_types);
  g_error = error.ptr();
  PyObject* oom_bases = PyTuple_Pack(2, g_error, PyExc_MemoryError);
  auto oom = make_exception(m, "OutOfMemory", oom_bases,
                            "An allocation failed; `requested` bytes could not be provided.");
  Py_DECREF(oom_bases);
  g_out_of_memory = oom.ptr();
  auto work_failed = make_exception(
      m, "WorkFailed", g_error,
      "Queued work failed. Raised once, by the first call that waits on the failed work.\n"
      "`operation` names the failed operation, `file`/`line`/`function` the call that issued it,\n"
      "`cause` what it reported (for a Python host task: its traceback), `skipped` how many\n"
      "later operations did not run.");
  g_work_failed = work_failed.ptr();
  // The module keeps the classes alive; the pointers are borrowed from it.
  m.attr("_error_classes") = py::make_tuple(error, oom, work_failed);

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const WorkFailed& e) {
      py::dict extra;
      extra["operation"] = e.operation();
      extra["cause"] = e.cause();
      extra["skipped"] = e.skipped();
      raise(g_work_failed, e, extra);
    } catch (const OutOfMemory& e) {
      py::dict extra;
      extra["requested"] = e.requested();
      raise(g_out_of_memory, e, extra);
    } catch (const Error& e) {
      raise(g_error, e, py::dict());
    }
  });
}

}  // namespace sluice::python
