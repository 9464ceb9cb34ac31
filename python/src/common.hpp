#pragma once
// What every part of the Python module shares: the GIL rules, Python objects held by C++ work,
// the caller's source line, the current context and element types.
//
// The GIL rules (docs/python.md, "Threads and the GIL"):
// - every call into sluice that may wait or take a lock runs with the GIL released (`nogil`);
//   arguments are converted before and results after, with the GIL held;
// - C++ work that calls Python (host tasks, graph host nodes, replay bodies, monitors) takes the
//   GIL itself (`PyCall`), so it never deadlocks with a main thread that waits in sluice;
// - a Python object kept by C++ work is held through `PyRef`, whose copies never touch the
//   reference count and whose last owner takes the GIL to drop it.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/context.hpp"
#include "sluice/error.hpp"
#include "sluice/platform.hpp"

namespace sluice::python {

namespace py = pybind11;

/// Runs `f` with the GIL released when this thread holds it (a call from a Python thread), as is
/// when it does not (a C++ thread already outside Python).
template <class F>
decltype(auto) nogil(F&& f) {
  if (PyGILState_Check()) {
    py::gil_scoped_release release;
    return std::forward<F>(f)();
  }
  return std::forward<F>(f)();
}

/// True once the interpreter is shutting down: Python objects can then no longer be released
/// from other threads (they are left to the process's end instead).
[[nodiscard]] bool finalizing() noexcept;

/// A Python object kept alive by C++ work that may outlive the call that made it and may be
/// dropped on any thread. Copies share one reference; the last one takes the GIL to release it.
class PyRef {
 public:
  PyRef() = default;
  /// Takes a new reference to `o` (the GIL must be held).
  explicit PyRef(py::object o);
  [[nodiscard]] PyObject* get() const noexcept { return holder_ ? holder_->obj : nullptr; }
  /// A new handle to the object (the GIL must be held).
  [[nodiscard]] py::object object() const;
  explicit operator bool() const noexcept { return holder_ != nullptr; }

 private:
  struct Holder {
    PyObject* obj = nullptr;
    ~Holder();
  };
  std::shared_ptr<Holder> holder_;
};

/// Hands a reference dropped without the GIL to the next `collect` (releases.cpp).
void bury(PyObject* obj) noexcept;

/// Held by C++ work (a host task, a graph host node, a replay body) while it runs Python: the GIL,
/// and a mark that this thread is inside such work. Python may drop sluice objects there (the
/// callable's own references, or whatever its cyclic garbage collector frees), and on cuda a
/// host task may not call CUDA: what such a drop must do on the device waits for the next call
/// into the module on a Python thread (imports' releases: releases.cpp).
class PythonWork {
 public:
  PythonWork();
  ~PythonWork();
  PythonWork(const PythonWork&) = delete;
  PythonWork& operator=(const PythonWork&) = delete;
  /// True on a thread inside C++ work that runs Python.
  [[nodiscard]] static bool active() noexcept;

 private:
  bool outer_;
  py::gil_scoped_acquire gil_;  // after outer_: taken once the mark is set, released before
};

/// Calls a Python callable from C++ work (any thread): takes the GIL, and turns a Python
/// exception into a C++ one whose message is the formatted traceback, so that sluice reports it
/// as the failure of that work.
class PyCall {
 public:
  PyCall() = default;
  explicit PyCall(py::object fn) : fn_(std::move(fn)) {}
  void operator()() const;
  template <class... Args>
  void call(Args&&... args) const;
  [[nodiscard]] const PyRef& ref() const noexcept { return fn_; }

 private:
  PyRef fn_;
};

/// The exception a failed Python callable becomes inside C++ work.
class PythonTaskError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The sluice.Error a Python exception is, as a C++ Error (same code and message), if it is one:
/// lets C++ code that reacts to codes (Replay's eager fallback) see through Python frames.
[[nodiscard]] std::optional<Error> as_sluice_error(py::error_already_set& e);

/// Formats the Python exception being handled (traceback included) and clears it.
[[nodiscard]] std::string format_python_error(py::error_already_set& e);

template <class... Args>
void PyCall::call(Args&&... args) const {
  if (finalizing()) throw PythonTaskError("the Python interpreter is shutting down");
  PythonWork work;
  try {
    py::handle(fn_.get())(std::forward<Args>(args)...);
  } catch (py::error_already_set& e) {
    throw PythonTaskError(format_python_error(e));
  }
}

// ---- where a call came from ---------------------------------------------------------------------

/// The Python line that called into sluice (outside the sluice package), as a
/// std::source_location, so that errors and failed work name the user's line. Falls back to the
/// binding's own location where the standard library's layout is not the one checked at import.
/// Needs the GIL.
[[nodiscard]] std::source_location caller(
    std::source_location fallback = std::source_location::current());
/// Called once at import: checks the layout `caller` relies on, learns the package's folder.
void init_location(const py::module_& m);

// ---- the current context ------------------------------------------------------------------------

/// The current context of this thread (sluice::current_context(): the innermost `with ctx:` of
/// the current device, else that device's default context).
[[nodiscard]] Context current_context();
/// `ctx` if given, else the current context.
[[nodiscard]] inline Context context_or_current(const std::optional<Context>& ctx) {
  return ctx ? *ctx : current_context();
}
/// A Context for Python: its last handle is dropped with the GIL released (the destructor waits
/// for the context's work, which may include Python host tasks).
[[nodiscard]] std::shared_ptr<Context> share(Context ctx);
/// Deletes with the GIL released: for objects whose destructor may wait for queued work.
struct NogilDelete {
  template <class T>
  void operator()(T* p) const {
    nogil([p] { delete p; });
  }
};
/// The current context of `device` on this thread: its innermost scope, else sluice's default
/// context of that device (async, one per device and process, never destroyed).
[[nodiscard]] Context default_context(const Device& device);
/// `with ctx:` / `ctx.scope()`: a C++ ScopedContext on this thread, and its end.
void push_context(const Context& ctx, bool sync_enter, bool sync_exit, std::source_location loc);
/// `with device:`: a C++ ScopedDevice on this thread.
void push_device(const Device& device);
/// Ends the innermost scope of this thread (a `with` block's end).
void pop_scope();

/// Converts what Python users write for a device: a Device, "cuda:0", "host", or None.
[[nodiscard]] std::optional<Device> to_device(const py::object& o);

// ---- element types ------------------------------------------------------------------------------

/// Element types of buffers and arrays (DLPack's codes, NumPy's names).
struct DType {
  enum class Code : std::uint8_t { int_, uint, float_, complex, bool_ };
  Code code = Code::float_;
  std::uint8_t bits = 64;

  [[nodiscard]] std::size_t itemsize() const noexcept { return bits / 8; }
  /// "float64", "int32", "complex128", "bool", ...
  [[nodiscard]] std::string name() const;
  /// The buffer protocol's format character(s): "d", "i", "Zd", "?", ...
  [[nodiscard]] std::string format() const;
  /// NumPy's array-interface type string: "<f8", "<i4", "|b1", ...
  [[nodiscard]] std::string typestr() const;
  friend bool operator==(const DType&, const DType&) = default;

  /// From a name, a NumPy dtype or scalar type, or the Python types float, int, complex, bool.
  static DType from_python(const py::handle& o);
  static DType parse(std::string_view name);
  /// From a buffer-protocol format string; throws for what sluice does not hold.
  static DType from_format(std::string_view format, std::size_t itemsize);
};

inline constexpr DType kFloat64{DType::Code::float_, 64};

// ---- registration of each part ------------------------------------------------------------------

void bind_errors(py::module_& m);
void bind_context(py::module_& m);
void bind_arrays(py::module_& m);
void bind_scalar(py::module_& m);
void bind_graph(py::module_& m);
void bind_kernel(py::module_& m);
void bind_dataflow(py::module_& m);
void bind_la(py::module_& m);
void bind_lazy(py::module_& m);
void bind_releases(py::module_& m);

}  // namespace sluice::python
