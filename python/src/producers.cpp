// The producers whose current stream sluice finds itself (producers.hpp).

#include "producers.hpp"

#include <dlpack/dlpack.h>

#include <atomic>
#include <string>
#include <unordered_map>

namespace sluice::python::producers {
namespace {

enum class Kind : std::uint8_t { none, torch, cupy, registered };

struct Source {
  Kind kind = Kind::none;
  PyObject* fn = nullptr;  // Kind::registered: the callable (held by the registry)
};

/// Every table is guarded by the GIL, which each caller holds.
struct Tables {
  // By Python type; each key holds a reference to its type, so that an address is not reused
  // for another type while it is a key here.
  std::unordered_map<PyTypeObject*, Source> by_type;
  std::unordered_map<std::string, PyObject*> registered;  // module -> fn (a reference each)
  // The stream getters of the built-in sources, looked up once (null: not found).
  PyObject* torch_raw_stream = nullptr;      // torch._C._cuda_getCurrentRawStream
  PyObject* torch_current_stream = nullptr;  // torch.cuda.current_stream (older PyTorch)
  bool torch_looked_up = false;
  PyObject* cupy_current_stream = nullptr;  // cupy.cuda.get_current_stream
  bool cupy_looked_up = false;
  PyObject* ptr_name = PyUnicode_InternFromString("ptr");
  PyObject* cuda_stream_name = PyUnicode_InternFromString("cuda_stream");
  PyObject* module_name = PyUnicode_InternFromString("__module__");
};
Tables& tables() {
  static auto* t = new Tables;  // never destroyed: holds Python references to the end
  return *t;
}

std::atomic<std::uint64_t> g_counts[2];

void clear_types(Tables& t) {
  std::unordered_map<PyTypeObject*, Source> old;
  old.swap(t.by_type);  // a type's release may run Python code that imports again
  for (auto& [type, source] : old) Py_DECREF(reinterpret_cast<PyObject*>(type));
}

/// The top-level package of `type`'s module ("torch" for torch.nn.parameter), or "".
std::string top_module(PyObject* type) {
  PyObject* m = PyObject_GetAttr(type, tables().module_name);
  if (m == nullptr) {
    PyErr_Clear();
    return {};
  }
  std::string name;
  if (PyUnicode_Check(m)) {
    if (const char* s = PyUnicode_AsUTF8(m)) name = s;
  }
  Py_DECREF(m);
  if (PyErr_Occurred()) PyErr_Clear();
  return name.substr(0, name.find('.'));
}

Source decide(PyTypeObject* type) {
  Tables& t = tables();
  PyObject* mro = type->tp_mro;  // a tuple starting with the type itself
  const Py_ssize_t n = mro != nullptr && PyTuple_Check(mro) ? PyTuple_GET_SIZE(mro) : 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    const std::string top = top_module(PyTuple_GET_ITEM(mro, i));
    if (auto it = t.registered.find(top); it != t.registered.end()) {
      return {Kind::registered, it->second};
    }
    if (top == "torch") return {Kind::torch, nullptr};
    if (top == "cupy") return {Kind::cupy, nullptr};
  }
  return {};
}

Source source_of(PyTypeObject* type) {
  Tables& t = tables();
  if (auto it = t.by_type.find(type); it != t.by_type.end()) return it->second;
  const Source s = decide(type);  // may run Python code (a metaclass's __getattr__)
  if (t.by_type.emplace(type, s).second) Py_INCREF(reinterpret_cast<PyObject*>(type));
  return s;
}

/// `module.a.b`, or null (no error set) where any part is missing.
PyObject* lookup(const char* module, std::initializer_list<const char*> path) {
  PyObject* name = PyUnicode_FromString(module);
  if (name == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* o = PyImport_GetModule(name);  // only if imported: the object's type says it is
  Py_DECREF(name);
  for (const char* part : path) {
    if (o == nullptr) break;
    PyObject* next = PyObject_GetAttrString(o, part);
    Py_DECREF(o);
    o = next;
  }
  if (o == nullptr) PyErr_Clear();
  return o;
}

/// A stream handle from a Python int; the null stream (0) is the legacy default stream (1) in
/// the array protocols' numbering.
std::optional<std::uintptr_t> handle_of(PyObject* r) {
  if (r == nullptr || !PyLong_Check(r)) return std::nullopt;
  const unsigned long long v = PyLong_AsUnsignedLongLong(r);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return std::nullopt;
  }
  return v == 0 ? interop::kLegacyDefaultStream : static_cast<std::uintptr_t>(v);
}

std::optional<std::uintptr_t> torch_stream(int device_id) {
  Tables& t = tables();
  if (!t.torch_looked_up) {
    t.torch_looked_up = true;
    t.torch_raw_stream = lookup("torch", {"_C", "_cuda_getCurrentRawStream"});
    if (t.torch_raw_stream == nullptr) {
      t.torch_current_stream = lookup("torch", {"cuda", "current_stream"});
    }
  }
  PyObject* dev = PyLong_FromLong(device_id);
  if (dev == nullptr) {
    PyErr_Clear();
    return std::nullopt;
  }
  std::optional<std::uintptr_t> out;
  if (t.torch_raw_stream != nullptr) {
    PyObject* r = PyObject_CallOneArg(t.torch_raw_stream, dev);
    out = handle_of(r);
    Py_XDECREF(r);
  } else if (t.torch_current_stream != nullptr) {
    PyObject* s = PyObject_CallOneArg(t.torch_current_stream, dev);
    PyObject* r = s != nullptr ? PyObject_GetAttr(s, t.cuda_stream_name) : nullptr;
    out = handle_of(r);
    Py_XDECREF(r);
    Py_XDECREF(s);
  }
  Py_DECREF(dev);
  if (PyErr_Occurred()) PyErr_Clear();
  return out;
}

std::optional<std::uintptr_t> cupy_stream(int device_id) {
  Tables& t = tables();
  if (!t.cupy_looked_up) {
    t.cupy_looked_up = true;
    t.cupy_current_stream = lookup("cupy", {"cuda", "get_current_stream"});
  }
  if (t.cupy_current_stream == nullptr) return std::nullopt;
  PyObject* dev = PyLong_FromLong(device_id);
  PyObject* s = dev != nullptr ? PyObject_CallOneArg(t.cupy_current_stream, dev) : nullptr;
  PyObject* r = s != nullptr ? PyObject_GetAttr(s, t.ptr_name) : nullptr;
  auto out = handle_of(r);
  Py_XDECREF(r);
  Py_XDECREF(s);
  Py_XDECREF(dev);
  if (PyErr_Occurred()) PyErr_Clear();
  return out;
}

std::optional<interop::Producer> registered_stream(PyObject* fn, PyObject* obj, int device_type,
                                                   int device_id) {
  py::object r = py::reinterpret_borrow<py::object>(fn)(py::handle(obj),
                                                        py::make_tuple(device_type, device_id));
  if (r.is_none()) return std::nullopt;
  if (py::isinstance<Context>(r)) return interop::Producer{std::nullopt, r.cast<Context>()};
  if (device_type == kDLCUDA && PyLong_Check(r.ptr())) {
    if (auto h = handle_of(r.ptr())) return interop::Producer{h, std::nullopt};
  }
  throw Error(Errc::invalid_argument,
              "a stream source returned " + std::string(py::str(py::type::of(r))) +
                  " for memory of DLPack device type " + std::to_string(device_type) +
                  ": return a sluice Context, None (the DLPack handshake), or, for cuda memory, "
                  "a cudaStream_t as an int",
              caller());
}

}  // namespace

std::optional<interop::Producer> current_stream(PyObject* obj, int device_type, int device_id) {
  const Source s = source_of(Py_TYPE(obj));
  switch (s.kind) {
    case Kind::none:
      return std::nullopt;
    case Kind::torch:
    case Kind::cupy: {
      if (device_type != kDLCUDA) return std::nullopt;  // their host memory is synchronous
      auto h = s.kind == Kind::torch ? torch_stream(device_id) : cupy_stream(device_id);
      if (!h) return std::nullopt;
      return interop::Producer{h, std::nullopt};
    }
    case Kind::registered:
      return registered_stream(s.fn, obj, device_type, device_id);
  }
  return std::nullopt;
}

bool device_in_capsule(PyObject* obj) {
  const Kind k = source_of(Py_TYPE(obj)).kind;
  return k == Kind::torch || k == Kind::cupy;
}

void refuse_opt_out(PyObject* obj) {
  Tables& t = tables();
  PyTypeObject* type = Py_TYPE(obj);
  if (auto it = t.by_type.find(type); it != t.by_type.end()) {
    it->second = Source{};
  } else {
    Py_INCREF(reinterpret_cast<PyObject*>(type));
    t.by_type.emplace(type, Source{});
  }
}

void count(Path path) noexcept {
  g_counts[static_cast<int>(path)].fetch_add(1, std::memory_order_relaxed);
}

void bind(py::module_& m) {
  m.def(
      "_stream_source",
      [](const std::string& module, const py::object& fn) {
        Tables& t = tables();
        PyObject* old = nullptr;
        if (auto it = t.registered.find(module); it != t.registered.end()) {
          old = it->second;
          t.registered.erase(it);
        }
        if (!fn.is_none()) t.registered.emplace(module, fn.inc_ref().ptr());
        clear_types(t);   // types decided before may belong to this module
        Py_XDECREF(old);  // last: its release may run Python code that imports
      },
      py::arg("module"), py::arg("fn"),
      "Makes sluice find the current stream of the objects whose type (or a base) lives in "
      "top-level package `module`: fn(obj, (device_type, device_id)) returns a cudaStream_t as an "
      "int, a sluice Context, or None (the DLPack handshake). Imports of such objects ask for "
      "__dlpack__(stream=-1) and order sluice after that stream in C++. fn=None removes it. "
      "PyTorch and CuPy are built in.");
  m.def(
      "_import_paths",
      [] {
        py::dict d;
        d["known_stream"] = g_counts[0].load(std::memory_order_relaxed);
        d["handshake"] = g_counts[1].load(std::memory_order_relaxed);
        return d;
      },
      "How many DLPack imports sluice ordered after the producer's known stream, and how many "
      "the producer ordered through the handshake.");
}

}  // namespace sluice::python::producers
