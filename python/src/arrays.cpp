// `sluice.Array`, `DeviceBuffer`, `PinnedBuffer`: tracked memory with a dtype and a shape, that
// NumPy, CuPy, PyTorch and JAX read and write without a copy (DLPack, the CUDA array interface,
// the buffer protocol), ordered by the tracker (interop.hpp); imports of their arrays; copies,
// memset, fill; tracked Python host tasks.

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "arrays.hpp"
#include "fastcall.hpp"
#include "interop.hpp"
#include "producers.hpp"
#include "releases.hpp"
#include "sluice/memory.hpp"

namespace sluice::python {

// ---- element types ------------------------------------------------------------------------------

namespace {
constexpr std::uint8_t kDLBoolCode = 6;  // DLPack >= 0.8; Debian's header is 0.6

char code_letter(DType::Code c) {
  switch (c) {
    case DType::Code::int_:
      return 'i';
    case DType::Code::uint:
      return 'u';
    case DType::Code::float_:
      return 'f';
    case DType::Code::complex:
      return 'c';
    case DType::Code::bool_:
      return 'b';
  }
  return '?';
}
}  // namespace

std::string DType::name() const {
  switch (code) {
    case Code::int_:
      return "int" + std::to_string(bits);
    case Code::uint:
      return "uint" + std::to_string(bits);
    case Code::float_:
      return "float" + std::to_string(bits);
    case Code::complex:
      return "complex" + std::to_string(bits);
    case Code::bool_:
      return "bool";
  }
  return "?";
}

std::string DType::format() const {
  const bool sign = code == Code::int_;
  switch (code) {
    case Code::int_:
    case Code::uint:
      switch (bits) {
        case 8:
          return sign ? "b" : "B";
        case 16:
          return sign ? "h" : "H";
        case 32:
          return sign ? "i" : "I";
        default:
          return sign ? "q" : "Q";
      }
    case Code::float_:
      return bits == 16 ? "e" : bits == 32 ? "f" : "d";
    case Code::complex:
      return bits == 64 ? "Zf" : "Zd";
    case Code::bool_:
      return "?";
  }
  return "B";
}

std::string DType::typestr() const {
  return std::string(itemsize() == 1 ? "|" : "<") + code_letter(code) + std::to_string(itemsize());
}

DType DType::parse(std::string_view name) {
  static const std::pair<std::string_view, DType> names[] = {
      {"float16", {Code::float_, 16}},
      {"float32", {Code::float_, 32}},
      {"float64", {Code::float_, 64}},
      {"complex64", {Code::complex, 64}},
      {"complex128", {Code::complex, 128}},
      {"int8", {Code::int_, 8}},
      {"int16", {Code::int_, 16}},
      {"int32", {Code::int_, 32}},
      {"int64", {Code::int_, 64}},
      {"uint8", {Code::uint, 8}},
      {"uint16", {Code::uint, 16}},
      {"uint32", {Code::uint, 32}},
      {"uint64", {Code::uint, 64}},
      {"bool", {Code::bool_, 8}},
      {"half", {Code::float_, 16}},
      {"float", {Code::float_, 32}},
      {"double", {Code::float_, 64}},
      {"cfloat", {Code::complex, 64}},
      {"cdouble", {Code::complex, 128}},
      {"long", {Code::int_, 64}},
      {"int", {Code::int_, 32}},
      {"short", {Code::int_, 16}},
  };
  if (name.starts_with("torch.")) name.remove_prefix(6);
  for (const auto& [n, d] : names) {
    if (n == name) return d;
  }
  throw Error(Errc::invalid_argument,
              "unknown dtype '" + std::string(name) +
                  "': use float16/32/64, complex64/128, int8/16/32/64, uint8/16/32/64 or bool",
              caller());
}

DType DType::from_python(const py::handle& o) {
  if (o.is_none()) return kFloat64;
  if (py::isinstance<py::str>(o)) return parse(o.cast<std::string>());
  if (o.ptr() == reinterpret_cast<PyObject*>(&PyFloat_Type)) return {Code::float_, 64};
  if (o.ptr() == reinterpret_cast<PyObject*>(&PyLong_Type)) return {Code::int_, 64};
  if (o.ptr() == reinterpret_cast<PyObject*>(&PyComplex_Type)) return {Code::complex, 128};
  if (o.ptr() == reinterpret_cast<PyObject*>(&PyBool_Type)) return {Code::bool_, 8};
  try {
    auto np = py::module_::import("numpy");
    return parse(py::str(np.attr("dtype")(o).attr("name")).cast<std::string>());
  } catch (py::error_already_set&) {
  }
  return parse(py::str(o).cast<std::string>());
}

DType DType::from_format(std::string_view f, std::size_t itemsize) {
  while (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@' || f[0] == '!' || f[0] == '>')) {
    if (f[0] == '>' || f[0] == '!') {
      throw Error(Errc::unsupported, "big-endian data cannot be used by sluice", caller());
    }
    f.remove_prefix(1);
  }
  const auto bits = static_cast<std::uint8_t>(itemsize * 8);
  if (f == "?") return {Code::bool_, 8};
  if (f == "e" || f == "f" || f == "d") return {Code::float_, bits};
  if (f == "Zf" || f == "Zd") return {Code::complex, bits};
  if (f.size() == 1 && std::strchr("bhilqn", f[0]) != nullptr) return {Code::int_, bits};
  if (f.size() == 1 && std::strchr("BHILQN", f[0]) != nullptr) return {Code::uint, bits};
  throw Error(Errc::unsupported,
              "buffer format '" + std::string(f) + "' is not an element type sluice holds",
              caller());
}

// ---- Array --------------------------------------------------------------------------------------

std::size_t Array::size() const noexcept {
  std::size_t n = 1;
  for (auto s : shape) n *= static_cast<std::size_t>(s);
  return n;
}

void Array::check_live(std::source_location loc) const {
  if (keep == nullptr && nbytes != 0) {
    throw Error(Errc::invalid_state, "the array's memory was released", loc);
  }
}

namespace {

/// Buffers sluice allocated, and the Python classes of them.
struct DeviceBufferArray : Array {};
struct PinnedBufferArray : Array {};

std::vector<std::int64_t> to_shape(const py::handle& shape) {
  std::vector<std::int64_t> out;
  if (py::isinstance<py::int_>(shape)) {
    out.push_back(shape.cast<std::int64_t>());
  } else {
    for (auto s : shape) out.push_back(s.cast<std::int64_t>());
  }
  for (auto s : out) {
    if (s < 0) throw Error(Errc::invalid_argument, "a shape may not hold negative sizes", caller());
  }
  return out;
}

std::size_t elements(const std::vector<std::int64_t>& shape) {
  std::size_t n = 1;
  for (auto s : shape) n *= static_cast<std::size_t>(s);
  return n;
}

py::tuple shape_tuple(const std::vector<std::int64_t>& shape) {
  py::tuple t(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) t[i] = shape[i];
  return t;
}

std::shared_ptr<Array> make_device_buffer(const std::vector<std::int64_t>& shape, DType dtype,
                                          const Context& ctx, std::source_location loc) {
  auto a = std::shared_ptr<DeviceBufferArray>(new DeviceBufferArray, NogilDelete{});
  const std::size_t bytes = detail::checked_bytes(elements(shape), dtype.itemsize(), loc);
  auto buffer = nogil([&] { return std::make_shared<DeviceBuffer<std::byte>>(ctx, bytes, loc); });
  a->data = buffer->data();
  a->nbytes = bytes;
  a->id = buffer->object_id();
  a->device = ctx.device();
  a->memory = Memory::device;
  a->dtype = dtype;
  a->shape = shape;
  a->keep = std::shared_ptr<void>(buffer.get(),
                                  [buffer](void*) mutable { nogil([&] { buffer.reset(); }); });
  a->home = ctx;
  return a;
}

std::shared_ptr<Array> make_pinned_buffer(const std::vector<std::int64_t>& shape, DType dtype,
                                          const Device& device, std::source_location loc) {
  auto a = std::shared_ptr<PinnedBufferArray>(new PinnedBufferArray, NogilDelete{});
  const std::size_t bytes = detail::checked_bytes(elements(shape), dtype.itemsize(), loc);
  auto buffer =
      nogil([&] { return std::make_shared<PinnedBuffer<std::byte>>(device, bytes, loc); });
  a->data = buffer->data();
  a->nbytes = bytes;
  a->id = buffer->object_id();
  a->device = device;
  a->memory = Memory::pinned;
  a->dtype = dtype;
  a->shape = shape;
  // Destroying a pinned buffer waits for queued work that uses it: with the GIL released.
  a->keep = std::shared_ptr<void>(buffer.get(),
                                  [buffer](void*) mutable { nogil([&] { buffer.reset(); }); });
  return a;
}

// ---- exports: DLPack ----------------------------------------------------------------------------

std::pair<int, int> dlpack_device(const Array& a) {
  if (a.host_accessible()) return {kDLCPU, 0};
  if (a.device.backend == "cuda") return {kDLCUDA, a.device.index};
  throw py::buffer_error("sluice: memory of " + a.device.to_string() +
                         " has no DLPack device type");
}

DLDataType dl_dtype(const DType& d) {
  DLDataType t;
  switch (d.code) {
    case DType::Code::int_:
      t.code = kDLInt;
      break;
    case DType::Code::uint:
      t.code = kDLUInt;
      break;
    case DType::Code::float_:
      t.code = kDLFloat;
      break;
    case DType::Code::complex:
      t.code = kDLComplex;
      break;
    case DType::Code::bool_:
      t.code = kDLBoolCode;
      break;
  }
  t.bits = d.bits;
  t.lanes = 1;
  return t;
}

DType from_dl_dtype(const DLDataType& t, std::source_location loc) {
  if (t.lanes != 1) {
    throw Error(Errc::unsupported, "DLPack: vector element types (lanes > 1) are not supported",
                loc);
  }
  switch (t.code) {
    case kDLInt:
      return {DType::Code::int_, t.bits};
    case kDLUInt:
      return {DType::Code::uint, t.bits};
    case kDLFloat:
      return {DType::Code::float_, t.bits};
    case kDLComplex:
      return {DType::Code::complex, t.bits};
    case kDLBoolCode:
      return {DType::Code::bool_, 8};
    default:
      throw Error(Errc::unsupported,
                  "DLPack: element type code " + std::to_string(t.code) + " is not supported", loc);
  }
}

/// What a DLPack capsule we export holds: the tensor, its shape, and the Python array it views.
struct Exported {
  static constexpr std::size_t kInline = 4;  // dimensions held without another allocation
  DLManagedTensor tensor{};
  std::int64_t inline_dims[2 * kInline];
  std::vector<std::int64_t> heap_dims;  // more dimensions: shape then strides
  PyRef owner;
  Device device;
  ObjectId id = 0;
  ByteRange range;
  std::optional<std::uintptr_t> consumer;  // the stream the consumer said it would use
  std::optional<Context> consumer_ctx;     // the context wrapping it (none: a module stream)
};

void exported_deleter(DLManagedTensor* t) {
  auto* e = static_cast<Exported*>(t->manager_ctx);
  if (e->consumer && e->id != 0 && !finalizing()) {
    // The consumer let go: sluice's later work on the bytes (their release included) waits for
    // what it queued on its stream until now.
    try {
      nogil([&] {
        interop::order_after_consumer(e->device, e->id, e->range, *e->consumer, e->consumer_ctx,
                                      std::source_location::current());
      });
    } catch (...) {
      // The buffer is gone (nothing sluice queues can touch it) or the stream is: nothing to
      // order against.
    }
  }
  delete e;
}

void capsule_destructor(PyObject* capsule) {
  // A capsule nobody consumed still owns its tensor.
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (t != nullptr && t->deleter != nullptr) t->deleter(t);
  } else {
    PyErr_Clear();
  }
}

/// `a.__dlpack__(stream=..., dl_device=..., copy=...)` (each null where not given or None).
py::object dlpack_export(const Array& a, PyObject* self, PyObject* stream, PyObject* dl_device,
                         PyObject* copy) {
  const auto loc = caller();
  collect();
  a.check_live(loc);
  if (copy != nullptr && py::handle(copy).cast<bool>()) {
    throw py::buffer_error(
        "sluice exports its memory without a copy (__dlpack__(copy=True) is not supported): copy "
        "it first with sluice.copy, or let the consumer copy");
  }
  const auto [dev_type, dev_id] = dlpack_device(a);
  if (dl_device != nullptr) {
    auto want = py::handle(dl_device).cast<std::pair<int, int>>();
    if (want.first != dev_type || want.second != dev_id) {
      throw py::buffer_error("sluice: the array lives on DLPack device (" +
                             std::to_string(dev_type) + ", " + std::to_string(dev_id) +
                             "), not on the requested one; copy it there with sluice.copy");
    }
  }
  std::int64_t s = 1;  // None: the legacy default stream
  if (stream != nullptr) {
    s = PyLong_AsLongLong(stream);
    if (s == -1 && PyErr_Occurred()) throw py::error_already_set();
  }
  std::optional<std::uintptr_t> consumer;
  std::optional<Context> consumer_ctx;
  if (a.id != 0 && s != -1) {
    if (dev_type == kDLCPU) {
      nogil([&] { interop::host_wait(a.id, a.range(), Access::read_write, loc); });
    } else {
      if (s == 0) {
        throw py::buffer_error(
            "__dlpack__(stream=0) is ambiguous: pass 1 for the legacy default "
            "stream, 2 for the per-thread one, or a cudaStream_t");
      }
      consumer = static_cast<std::uintptr_t>(s);
      consumer_ctx = nogil([&] {
        return interop::order_stream_after(a.device, a.id, a.range(), Access::read_write, *consumer,
                                           loc);
      });
    }
  }
  auto* e = new Exported;
  const std::size_t ndim = a.shape.size();
  std::int64_t* dims = e->inline_dims;
  if (ndim > Exported::kInline) {
    e->heap_dims.resize(2 * ndim);
    dims = e->heap_dims.data();
  }
  std::int64_t* shape = dims;
  std::int64_t* strides = dims + ndim;
  std::int64_t stride = 1;
  for (std::size_t i = ndim; i-- > 0;) {
    shape[i] = a.shape[i];
    strides[i] = stride;
    stride *= a.shape[i];
  }
  e->owner = PyRef(py::reinterpret_borrow<py::object>(self));
  e->device = a.device;
  e->id = a.id;
  e->range = a.range();
  e->consumer = consumer;
  e->consumer_ctx = std::move(consumer_ctx);
  DLTensor& t = e->tensor.dl_tensor;
  t.data = a.data;
  t.device = {static_cast<DLDeviceType>(dev_type), dev_id};
  t.ndim = static_cast<int>(ndim);
  t.dtype = dl_dtype(a.dtype);
  t.shape = shape;
  t.strides = strides;
  t.byte_offset = 0;
  e->tensor.manager_ctx = e;
  e->tensor.deleter = exported_deleter;
  PyObject* capsule = PyCapsule_New(&e->tensor, "dltensor", capsule_destructor);
  if (capsule == nullptr) {
    delete e;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

/// The receiving Array of a method called through vectorcall.
const Array& self_array(PyObject* self) {
  const Array* a = fastcall::instance_of<Array>(self);
  if (a == nullptr) throw py::type_error("sluice: expected a sluice.Array");
  return *a;
}

PyObject* array_dlpack(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                       PyObject* kwnames) noexcept {
  try {
    static const char* const names[] = {"stream", "max_version", "dl_device", "copy"};
    const fastcall::Args<4> in("__dlpack__", names, 0, args, nargs, kwnames);
    // max_version is not consulted: a DLPack 0.x capsule ("dltensor") is what every consumer
    // takes.
    return dlpack_export(self_array(self), self, in.given(0), in.given(2), in.given(3))
        .release()
        .ptr();
  } catch (...) {
    return fastcall::set_error();
  }
}

PyObject* array_dlpack_device(PyObject* self, PyObject*) noexcept {
  try {
    const auto [type, id] = dlpack_device(self_array(self));
    return Py_BuildValue("(ii)", type, id);
  } catch (...) {
    return fastcall::set_error();
  }
}

PyMethodDef g_dlpack_def{
    "__dlpack__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(array_dlpack)),
    METH_FASTCALL | METH_KEYWORDS,
    "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
    "A DLPack capsule of the memory, without a copy. On cuda, `stream` (a cudaStream_t as an int; "
    "None or 1: the legacy default stream, 2: the per-thread one) is made to wait on the device "
    "for sluice's pending work on the array; -1 skips that. On the host the call waits for that "
    "work (only). When the consumer releases the capsule, sluice's later work on the array waits "
    "for what it queued on `stream` until then."};
PyMethodDef g_dlpack_device_def{
    "__dlpack_device__", reinterpret_cast<PyCFunction>(array_dlpack_device), METH_NOARGS,
    "__dlpack_device__($self, /)\n--\n\n(DLPack device type, device id) of the memory: (1, 0) "
    "for host-accessible memory, (2, index) for cuda device memory."};

/// Installs a vectorcall method on a pybind11 class.
void add_method(const py::handle& cls, PyMethodDef* def) {
  PyObject* descr = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()), def);
  if (descr == nullptr || PyObject_SetAttrString(cls.ptr(), def->ml_name, descr) != 0) {
    Py_XDECREF(descr);
    throw py::error_already_set();
  }
  Py_DECREF(descr);
}

// ---- exports: the CUDA array interface ----------------------------------------------------------

py::dict cuda_array_interface(const std::shared_ptr<Array>& a) {
  if (a->memory != Memory::device || a->device.backend != "cuda") {
    throw py::attribute_error(
        "__cuda_array_interface__: the array is not in cuda device memory (host-accessible "
        "memory is exported through __dlpack__ and the buffer protocol)");
  }
  const auto loc = caller();
  collect();
  a->check_live(loc);
  py::dict d;
  d["shape"] = shape_tuple(a->shape);
  d["typestr"] = a->dtype.typestr();
  d["data"] = py::make_tuple(reinterpret_cast<std::uintptr_t>(a->data), a->readonly);
  d["version"] = 3;
  d["strides"] = py::none();
  if (a->id != 0) {
    d["stream"] = nogil([&] {
      return interop::interop_stream_after(a->device, a->id, a->range(), Access::read_write, loc);
    });
  } else {
    d["stream"] = py::none();
  }
  return d;
}

// ---- exports: the buffer protocol ---------------------------------------------------------------

struct BufferView {
  std::vector<Py_ssize_t> shape, strides;
  std::string format;
};

int array_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  try {
    auto a = py::handle(self).cast<std::shared_ptr<Array>>();
    const auto loc = caller();
    if (!a->host_accessible()) {
      throw py::buffer_error("sluice: the array is in " + a->device.to_string() +
                             " device memory, which the host cannot read; use __dlpack__ with a "
                             "device library, or numpy() for a copy");
    }
    a->check_live(loc);
    const bool writable = (flags & PyBUF_WRITABLE) != 0;
    if (writable && a->readonly) throw py::buffer_error("sluice: the array is read-only");
    if (a->id != 0) {
      nogil([&] {
        interop::host_wait(a->id, a->range(), writable ? Access::read_write : Access::read, loc);
      });
    }
    auto* v = new BufferView;
    v->format = a->dtype.format();
    Py_ssize_t stride = static_cast<Py_ssize_t>(a->dtype.itemsize());
    v->shape.resize(a->shape.size());
    v->strides.resize(a->shape.size());
    for (std::size_t i = a->shape.size(); i-- > 0;) {
      v->shape[i] = static_cast<Py_ssize_t>(a->shape[i]);
      v->strides[i] = stride;
      stride *= v->shape[i];
    }
    view->buf = a->data;
    view->obj = self;
    Py_INCREF(self);
    view->len = static_cast<Py_ssize_t>(a->nbytes);
    view->readonly = a->readonly ? 1 : 0;
    view->itemsize = static_cast<Py_ssize_t>(a->dtype.itemsize());
    view->format = (flags & PyBUF_FORMAT) ? v->format.data() : nullptr;
    view->ndim = static_cast<int>(a->shape.size());
    view->shape = (flags & PyBUF_ND) ? v->shape.data() : nullptr;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? v->strides.data() : nullptr;
    view->suboffsets = nullptr;
    view->internal = v;
    return 0;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (py::builtin_exception& e) {
    e.set_error();
  } catch (const std::exception& e) {
    py::detail::translate_exception(std::current_exception());
  }
  view->obj = nullptr;
  return -1;
}

void array_releasebuffer(PyObject*, Py_buffer* view) {
  delete static_cast<BufferView*>(view->internal);
  view->internal = nullptr;
}

}  // namespace

void enable_buffer(const py::handle& cls) {
  auto* type = reinterpret_cast<PyHeapTypeObject*>(cls.ptr());
  type->as_buffer.bf_getbuffer = array_getbuffer;
  type->as_buffer.bf_releasebuffer = array_releasebuffer;
  reinterpret_cast<PyTypeObject*>(cls.ptr())->tp_as_buffer = &type->as_buffer;
}

namespace {

// ---- imports ------------------------------------------------------------------------------------

std::shared_ptr<Array> new_import() {
  // Deleted with the GIL held: an import holds no context, and its Foreign releases the GIL
  // itself where its release takes a lock (releases.cpp).
  return std::make_shared<Array>();
}

/// The protocols' names, interned once (a lookup by C string makes a new str each call).
struct Names {
  PyObject* dlpack = PyUnicode_InternFromString("__dlpack__");
  PyObject* dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
  PyObject* cai = PyUnicode_InternFromString("__cuda_array_interface__");
  PyObject* stream_kw = Py_BuildValue("(s)", "stream");  // kwnames of __dlpack__(stream=...)
};
const Names& names() {
  static const auto* n = new Names;  // never freed: lives as long as the module
  return *n;
}

/// `obj.name`, or null (no error set) where `obj` has no such attribute.
py::object optional_attr(const py::handle& obj, PyObject* name) {
  PyObject* r = PyObject_GetAttr(obj.ptr(), name);
  if (r == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw py::error_already_set();
    PyErr_Clear();
  }
  return py::reinterpret_steal<py::object>(r);
}

bool has_attr(const py::handle& obj, PyObject* name) {
  return static_cast<bool>(optional_attr(obj, name));
}

/// What `__dlpack_device__()` returned: (device type, device id).
std::pair<int, int> device_pair(const py::object& r) {
  if (PyTuple_CheckExact(r.ptr()) && PyTuple_GET_SIZE(r.ptr()) == 2) {
    const long type = PyLong_AsLong(PyTuple_GET_ITEM(r.ptr(), 0));
    const long id = PyLong_AsLong(PyTuple_GET_ITEM(r.ptr(), 1));
    if (PyErr_Occurred()) throw py::error_already_set();
    return {static_cast<int>(type), static_cast<int>(id)};
  }
  return r.cast<std::pair<int, int>>();
}

/// `obj.__dlpack__()`, or `obj.__dlpack__(stream=stream)`, called without building a dict.
py::object call_dlpack(const py::handle& obj, std::optional<std::int64_t> stream) {
  PyObject* r = nullptr;
  if (stream) {
    py::int_ s(*stream);
    PyObject* args[3] = {nullptr, obj.ptr(), s.ptr()};
    r = PyObject_VectorcallMethod(names().dlpack, args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                  names().stream_kw);
  } else {
    PyObject* args[2] = {nullptr, obj.ptr()};
    r = PyObject_VectorcallMethod(names().dlpack, args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                  nullptr);
  }
  if (r == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(r);
}

void check_compact(const std::vector<std::int64_t>& shape, const std::int64_t* strides,
                   std::size_t itemsize_or_one, bool strides_in_bytes, std::source_location loc) {
  if (strides == nullptr) return;
  std::int64_t expect = strides_in_bytes ? static_cast<std::int64_t>(itemsize_or_one) : 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expect) {
      throw Error(Errc::unsupported,
                  "sluice works on contiguous (C-order) arrays only; this one is strided: make it "
                  "contiguous first (e.g. .contiguous(), numpy.ascontiguousarray)",
                  loc);
    }
    expect *= shape[i];
  }
}

/// Picks the context that orders an import of memory of `device`.
Context import_context(const Device& device, const std::optional<Context>& ctx,
                       std::source_location loc) {
  if (ctx) {
    if (!(ctx->device() == device)) {
      throw Error(Errc::invalid_argument,
                  "the array lives on " + device.to_string() + " but the context '" + ctx->name() +
                      "' is on " + ctx->device().to_string() + "; pass a context of " +
                      device.to_string() + " (or none)",
                  loc);
    }
    return *ctx;
  }
  Context cur = current_context();
  if (cur.device() == device) return cur;
  return default_context(device);
}

/// `obj.__dlpack__(stream=-1)` (no ordering by the producer), or null (no error set) where the
/// producer refused it as an argument error (then the caller takes the handshake).
py::object call_dlpack_opt_out(const py::handle& obj) {
  try {
    return call_dlpack(obj, -1);
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError) && !e.matches(PyExc_ValueError) &&
        !e.matches(PyExc_BufferError)) {
      throw;
    }
  }
  return {};
}

/// The capsule of an array of PyTorch or CuPy (producers::device_in_capsule), ordered after the
/// producer's current stream: `__dlpack__(stream=-1)` first, the device read from the capsule
/// (their `__dlpack_device__` is Python code that costs more than sluice's whole import), then
/// that device's current stream. False, with nothing taken, where the library refused -1 or its
/// stream was not found: the caller takes the general path.
bool take_known(const py::handle& obj, const std::optional<Context>& ctx, std::source_location loc,
                py::object& capsule, std::optional<Context>& orderer, interop::Producer& producer) {
  py::object c = call_dlpack_opt_out(obj);
  if (!c) {
    producers::refuse_opt_out(obj.ptr());
    return false;
  }
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c.ptr(), "dltensor"));
  if (m == nullptr) {
    PyErr_Clear();
    return false;  // not a capsule we take: the general path says so
  }
  const DLDevice d = m->dl_tensor.device;
  if (d.device_type == kDLCUDA) {
    auto known = producers::current_stream(obj.ptr(), kDLCUDA, d.device_id);
    if (!known) return false;  // the unconsumed capsule hands the tensor back
    orderer = import_context(Device{"cuda", d.device_id}, ctx, loc);
    producer = *known;
    producers::count(producers::Path::known_stream);
  }  // their host memory is written synchronously: nothing to order
  capsule = std::move(c);
  return true;
}

std::shared_ptr<Array> import_dlpack(const py::handle& obj, const std::optional<Context>& ctx,
                                     bool sync, std::source_location loc) {
  py::object capsule;
  std::optional<Context> orderer;
  interop::Producer producer;  // what the orderer waits for (nothing: ordered already, or not)
  if (PyCapsule_CheckExact(obj.ptr())) {
    capsule = py::reinterpret_borrow<py::object>(obj);
  } else if (sync && producers::device_in_capsule(obj.ptr()) &&
             take_known(obj, ctx, loc, capsule, orderer, producer)) {
    // PyTorch or CuPy, ordered after its stream.
  } else {
    std::pair<int, int> dev{kDLCPU, 0};
    if (auto device_fn = optional_attr(obj, names().dlpack_device)) {
      PyObject* r = PyObject_CallNoArgs(device_fn.ptr());
      if (r == nullptr) throw py::error_already_set();
      dev = device_pair(py::reinterpret_steal<py::object>(r));
    }
    // The producer's current stream, where sluice knows how to find it (producers.hpp): looked
    // up before __dlpack__, so that the point recorded there follows what the producer queued.
    std::optional<interop::Producer> known;
    if (sync) known = producers::current_stream(obj.ptr(), dev.first, dev.second);
    if (known) {
      capsule = dev.first == kDLCUDA ? call_dlpack_opt_out(obj) : call_dlpack(obj, std::nullopt);
      if (!capsule) {
        producers::refuse_opt_out(obj.ptr());
        known.reset();
      }
    }
    if (dev.first == kDLCUDA) {
      orderer = import_context(Device{"cuda", dev.second}, ctx, loc);
      if (known) {
        producer = *known;
        producers::count(producers::Path::known_stream);
      } else if (sync) {
        // The protocol's handshake: the producer makes the orderer's stream wait for its work.
        capsule = call_dlpack(obj, static_cast<std::int64_t>(
                                       reinterpret_cast<std::uintptr_t>(orderer->native_handle())));
        producers::count(producers::Path::handshake);
      } else {
        capsule = call_dlpack(obj, -1);
      }
    } else {
      if (!capsule) capsule = call_dlpack(obj, std::nullopt);
      if (known) {
        // Host memory that a producer's queue still writes (a registered source): any context
        // may use host memory, so the orderer is the caller's.
        orderer = context_or_current(ctx);
        producer = *known;
        producers::count(producers::Path::known_stream);
      }
    }
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (managed == nullptr) {
    PyErr_Clear();
    throw Error(Errc::invalid_argument,
                "from_dlpack: not a DLPack capsule, or one consumed already", loc);
  }
  const DLTensor& t = managed->dl_tensor;
  auto a = new_import();
  a->dtype = from_dl_dtype(t.dtype, loc);
  a->shape.assign(t.shape, t.shape + t.ndim);
  check_compact(a->shape, t.strides, 1, false, loc);
  a->data = static_cast<std::byte*>(t.data) + t.byte_offset;
  a->nbytes = elements(a->shape) * a->dtype.itemsize();
  MemoryType type = MemoryType::host;
  switch (t.device.device_type) {
    case kDLCPU:
      a->device = Device{"host", 0};
      a->memory = Memory::host;
      break;
    case kDLCUDAHost:
      a->device = Device{"host", 0};
      a->memory = Memory::pinned;
      type = MemoryType::pinned;
      break;
    case kDLCUDA:
      a->device = Device{"cuda", t.device.device_id};
      a->memory = Memory::device;
      type = MemoryType::device;
      break;
    default:
      throw Error(Errc::unsupported,
                  "from_dlpack: DLPack device type " + std::to_string(t.device.device_type) +
                      " is not supported (CPU, CUDA and CUDA-pinned memory are)",
                  loc);
  }
  // Taken: from here on the tensor is ours to release.
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  if (a->nbytes == 0) {
    if (managed->deleter) managed->deleter(managed);
    a->keep = std::make_shared<int>(0);
    return a;
  }
  try {
    const Region region = register_or_find(a->data, a->nbytes, type, a->device, loc);
    a->id = region.id;
    a->offset = region.offset;
    a->keep =
        std::make_shared<Foreign>(a->device, region.id, region.registered_here, PyRef(), managed);
  } catch (...) {
    if (managed->deleter) managed->deleter(managed);
    throw;
  }
  if (orderer) {
    nogil([&] { interop::order_after_stream(*orderer, a->id, a->range(), producer, loc); });
  }
  return a;
}

std::shared_ptr<Array> import_cai(const py::handle& obj, const std::optional<Context>& ctx,
                                  bool sync, std::source_location loc) {
  py::dict d = py::reinterpret_borrow<py::object>(obj).attr(py::handle(names().cai));
  auto a = new_import();
  a->shape = to_shape(d["shape"]);
  const std::string typestr = d["typestr"].cast<std::string>();
  if (typestr.size() < 3 || typestr[0] == '>') {
    throw Error(Errc::unsupported, "__cuda_array_interface__ type '" + typestr + "'", loc);
  }
  const std::size_t itemsize = std::stoul(typestr.substr(2));
  const char k = typestr[1];
  const auto bits = static_cast<std::uint8_t>(itemsize * 8);
  a->dtype = k == 'f'   ? DType{DType::Code::float_, bits}
             : k == 'c' ? DType{DType::Code::complex, bits}
             : k == 'i' ? DType{DType::Code::int_, bits}
             : k == 'u' ? DType{DType::Code::uint, bits}
             : k == 'b' ? DType{DType::Code::bool_, 8}
                        : throw Error(Errc::unsupported,
                                      "__cuda_array_interface__ type '" + typestr + "'", loc);
  if (d.contains("strides") && !d["strides"].is_none()) {
    std::vector<std::int64_t> strides;
    for (auto s : d["strides"]) strides.push_back(s.cast<std::int64_t>());
    check_compact(a->shape, strides.data(), itemsize, true, loc);
  }
  auto data = d["data"].cast<std::pair<std::uintptr_t, bool>>();
  a->data = reinterpret_cast<void*>(data.first);
  a->readonly = data.second;
  a->nbytes = elements(a->shape) * itemsize;
  a->memory = Memory::device;
  // The device the pointer belongs to (the CUDA runtime knows); the importing context orders it.
  const int owner = a->data != nullptr ? interop::cuda::device_of(a->data, loc) : -1;
  Context orderer = import_context(owner >= 0 ? Device{"cuda", owner}
                                   : ctx      ? ctx->device()
                                              : Device{"cuda", 0},
                                   ctx, loc);
  a->device = orderer.device();
  std::optional<std::uintptr_t> producer;
  if (sync && d.contains("stream") && !d["stream"].is_none()) {
    producer = d["stream"].cast<std::uintptr_t>();
  }
  if (a->nbytes == 0) {
    a->keep = std::make_shared<int>(0);
    return a;
  }
  const Region region = register_or_find(a->data, a->nbytes, MemoryType::device, a->device, loc);
  a->id = region.id;
  a->offset = region.offset;
  a->keep = std::make_shared<Foreign>(a->device, region.id, region.registered_here,
                                      PyRef(py::reinterpret_borrow<py::object>(obj)), nullptr);
  nogil([&] {
    interop::order_after_stream(orderer, a->id, a->range(), {producer, std::nullopt}, loc);
  });
  return a;
}

PyObject* from_dlpack(PyObject*, PyObject* const* args, Py_ssize_t nargs,
                      PyObject* kwnames) noexcept {
  try {
    static const char* const names[] = {"obj", "ctx", "sync"};
    const fastcall::Args<3> in("from_dlpack", names, 3, args, nargs, kwnames);
    if (in.slot[0] == nullptr) throw py::type_error("from_dlpack() missing argument 'obj'");
    std::optional<Context> ctx;
    if (PyObject* c = in.given(1)) {
      const Context* p = fastcall::instance_of<Context>(c);
      if (p == nullptr) {
        throw py::type_error("from_dlpack(): ctx must be a sluice.Context or None, not " +
                             std::string(py::str(py::type::of(c))));
      }
      ctx = *p;
    }
    bool sync = true;
    if (in.slot[2] != nullptr) {
      const int truth = PyObject_IsTrue(in.slot[2]);
      if (truth < 0) throw py::error_already_set();
      sync = truth != 0;
    }
    const auto loc = caller();
    collect();
    return fastcall::wrap_exact(import_dlpack(in.slot[0], ctx, sync, loc)).release().ptr();
  } catch (...) {
    return fastcall::set_error();
  }
}

PyMethodDef g_from_dlpack_def{
    "from_dlpack", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(from_dlpack)),
    METH_FASTCALL | METH_KEYWORDS,
    "from_dlpack(obj, ctx=None, sync=True)\n--\n\n"
    "Imports an object exporting DLPack (or a DLPack capsule) without a copy. On cuda, sluice's "
    "later work on the memory, on any context, follows the producer's pending work: for PyTorch "
    "and CuPy sluice finds the producer's current stream itself, asks for no synchronization "
    "(stream -1) and makes the stream of `ctx` (default: the current context if on that device, "
    "else the device's default context) wait for it on the device; other producers make that "
    "stream wait themselves (the protocol's stream handshake). sync=False asks the producer for "
    "no ordering (stream -1): then nothing orders sluice after it."};

/// Installs a vectorcall function in a module.
void add_function(py::module_& m, PyMethodDef* def) {
  PyObject* f = PyCFunction_NewEx(def, nullptr, m.attr("__name__").ptr());
  if (f == nullptr || PyModule_AddObject(m.ptr(), def->ml_name, f) != 0) {
    Py_XDECREF(f);
    throw py::error_already_set();
  }
}

std::shared_ptr<Array> import_buffer(const py::handle& obj, std::source_location loc) {
  // A memoryview holds the exporter's buffer for as long as we keep it.
  py::object mv;
  bool readonly = false;
  try {
    mv = py::reinterpret_steal<py::object>(PyMemoryView_FromObject(obj.ptr()));
    if (!mv) throw py::error_already_set();
  } catch (py::error_already_set&) {
    throw py::type_error("sluice: " + std::string(py::str(py::type::of(obj))) +
                         " is neither a sluice array nor exports DLPack, the CUDA array interface "
                         "or the buffer protocol");
  }
  Py_buffer* view = PyMemoryView_GET_BUFFER(mv.ptr());
  readonly = view->readonly != 0;
  if (!PyBuffer_IsContiguous(view, 'C')) {
    throw Error(Errc::unsupported,
                "sluice works on contiguous (C-order) arrays only; make it contiguous first "
                "(numpy.ascontiguousarray)",
                loc);
  }
  auto a = new_import();
  a->dtype = DType::from_format(view->format ? view->format : "B",
                                static_cast<std::size_t>(view->itemsize));
  if (view->ndim == 0) {
    a->shape = {};
  } else if (view->shape == nullptr) {
    a->shape = {static_cast<std::int64_t>(view->len / view->itemsize)};
  } else {
    a->shape.assign(view->shape, view->shape + view->ndim);
  }
  a->data = view->buf;
  a->nbytes = static_cast<std::size_t>(view->len);
  a->readonly = readonly;
  a->device = Device{"host", 0};
  a->memory = Memory::host;
  if (a->nbytes == 0) {
    a->keep = std::make_shared<PyRef>(mv);
    return a;
  }
  const Region region = register_or_find(a->data, a->nbytes, MemoryType::host, a->device, loc);
  a->id = region.id;
  a->offset = region.offset;
  a->keep =
      std::make_shared<Foreign>(a->device, region.id, region.registered_here, PyRef(mv), nullptr);
  return a;
}

}  // namespace

std::shared_ptr<Array> as_array(const py::handle& obj, const std::optional<Context>& ctx,
                                std::source_location loc) {
  if (py::isinstance<Array>(obj)) return obj.cast<std::shared_ptr<Array>>();
  collect();
  if (has_attr(obj, names().dlpack)) {
    try {
      return import_dlpack(obj, ctx, true, loc);
    } catch (py::error_already_set& e) {
      // NumPy refuses to export read-only arrays through DLPack: the buffer protocol can.
      if (!e.matches(PyExc_BufferError) && !e.matches(PyExc_TypeError)) throw;
    }
  }
  if (has_attr(obj, names().cai)) return import_cai(obj, ctx, true, loc);
  return import_buffer(obj, loc);
}

py::object numpy_over(const std::shared_ptr<Array>& a) {
  auto np = py::module_::import("numpy");
  // A memoryview over the bytes, with the array as its owner, without the wait getbuffer does.
  auto* buf = static_cast<char*>(a->data);
  py::object mv = py::reinterpret_steal<py::object>(PyMemoryView_FromMemory(
      a->nbytes ? buf : reinterpret_cast<char*>(&const_cast<Array&>(*a)),
      static_cast<Py_ssize_t>(a->nbytes), a->readonly ? PyBUF_READ : PyBUF_WRITE));
  py::object flat = np.attr("frombuffer")(mv, py::arg("dtype") = a->dtype.name());
  py::object arr = flat.attr("reshape")(shape_tuple(a->shape));
  return arr;
}

py::object numpy_view(const std::shared_ptr<Array>& a, Access mode, std::source_location loc) {
  if (a->id != 0) nogil([&] { interop::host_wait(a->id, a->range(), mode, loc); });
  return numpy_over(a);
}

py::object wrap_array(std::shared_ptr<Array> a) {
  return py::cast(std::move(a));
}

namespace {

// ---- copies and fills ---------------------------------------------------------------------------

void check_same_bytes(const Array& dst, const Array& src, std::source_location loc) {
  if (dst.nbytes != src.nbytes) {
    throw Error(Errc::invalid_argument,
                "copy: the destination holds " + std::to_string(dst.nbytes) +
                    " bytes but the source " + std::to_string(src.nbytes) +
                    "; both sides must be the same size",
                loc);
  }
  if (!(dst.dtype == src.dtype)) {
    throw Error(Errc::invalid_argument,
                "copy: the destination's dtype is " + dst.dtype.name() + " but the source's " +
                    src.dtype.name() + "; copies move bytes, not values: use arrays of one dtype",
                loc);
  }
}

Context copy_context(const Array& dst, const Array& src, const std::optional<Context>& ctx) {
  if (ctx) return *ctx;
  // Warp's rule: the destination's device if it is a device, else the source's, else the
  // current context.
  for (const Array* a : {&dst, &src}) {
    if (a->memory == Memory::device) {
      Context cur = current_context();
      return cur.device() == a->device ? cur : default_context(a->device);
    }
  }
  return current_context();
}

void do_copy(const std::shared_ptr<Array>& dst, const std::shared_ptr<Array>& src,
             const Context& ctx, std::source_location loc) {
  dst->check_live(loc);
  src->check_live(loc);
  check_same_bytes(*dst, *src, loc);
  if (dst->readonly) throw Error(Errc::invalid_argument, "copy: the destination is read-only", loc);
  nogil([&] {
    sluice::copy(ctx, std::span(static_cast<std::byte*>(dst->data), dst->nbytes),
                 std::span(static_cast<const std::byte*>(src->data), src->nbytes), loc);
  });
}

}  // namespace

void tracked_host_task(const Context& ctx, const py::function& fn, const py::tuple& args,
                       const std::string& what, std::source_location loc) {
  std::vector<Marked> marks;
  py::list passed;
  for (auto arg : args) {
    if (py::isinstance<Marked>(arg)) {
      marks.push_back(arg.cast<Marked>());
      if (!marks.back().array->host_accessible()) {
        throw Error(Errc::invalid_argument,
                    "host_task: an argument is in " + marks.back().array->device.to_string() +
                        " device memory, which a host task cannot touch",
                    loc);
      }
      marks.back().array->check_live(loc);
      passed.append(numpy_over(marks.back().array));
    } else {
      passed.append(arg);
    }
  }
  PyCall call{py::object(fn)};
  PyRef held_args{py::object(py::tuple(passed))};
  // The Python objects of the arrays, so that their memory outlives the task; dropped, like
  // everything the task holds, on a Python thread (PyRef).
  py::list owners;
  for (const auto& m : marks) owners.append(py::cast(m.array));
  PyRef keep{py::object(owners)};
  auto task = [call, held_args, keep] {
    if (finalizing()) throw PythonTaskError("the Python interpreter is shutting down");
    PythonWork work;
    try {
      py::handle(call.ref().get())(*py::reinterpret_borrow<py::tuple>(held_args.get()));
    } catch (py::error_already_set& e) {
      throw PythonTaskError(format_python_error(e));
    }
  };
  nogil([&] {
    for (const auto& m : marks)
      mark_intent_begin(ctx, m.array->id, m.mode, what, m.array->range(), loc);
    std::exception_ptr failure;
    try {
      ctx.host_task(task, what, loc);
    } catch (...) {
      failure = std::current_exception();
    }
    for (const auto& m : marks)
      mark_intent_end(ctx, m.array->id, m.mode, what, m.array->range(), loc);
    if (failure) std::rethrow_exception(failure);
  });
}

void bind_arrays(py::module_& m) {
  py::class_<Array, std::shared_ptr<Array>> array(
      m, "Array", py::buffer_protocol(),
      "Tracked memory with a dtype and a shape: a sluice buffer, or another library's array "
      "imported without a copy (sluice.asarray, sluice.from_dlpack).\n\n"
      "It exports itself without a copy through __dlpack__, __cuda_array_interface__ (cuda "
      "device memory) and the buffer protocol (host-accessible memory), ordered by the tracker: "
      "the consumer's stream waits (on the device) for sluice's pending work on it; a host "
      "consumer waits on the host for that work only.");
  enable_buffer(array);
  // The hand-off's calls, through vectorcall (fastcall.hpp).
  add_method(array, &g_dlpack_def);
  add_method(array, &g_dlpack_device_def);
  array.def_property_readonly("shape", [](const Array& a) { return shape_tuple(a.shape); })
      .def_property_readonly("dtype", [](const Array& a) { return a.dtype.name(); })
      .def_property_readonly("ndim", [](const Array& a) { return a.shape.size(); })
      .def_property_readonly("size", &Array::size)
      .def_property_readonly("nbytes", [](const Array& a) { return a.nbytes; })
      .def_property_readonly("itemsize", [](const Array& a) { return a.dtype.itemsize(); })
      .def_property_readonly("device", [](const Array& a) { return a.device; })
      .def_property_readonly(
          "memory",
          [](const Array& a) {
            return a.memory == Memory::device   ? "device"
                   : a.memory == Memory::pinned ? "pinned"
                                                : "host";
          },
          "'device', 'pinned' or 'host' (another library's pageable memory).")
      .def_property_readonly(
          "ptr", [](const Array& a) { return reinterpret_cast<std::uintptr_t>(a.data); })
      .def_property_readonly(
          "object_id", [](const Array& a) { return a.id; },
          "The tracker's id of the memory region the array lies in.")
      .def_property_readonly("readonly", [](const Array& a) { return a.readonly; })
      .def_property_readonly(
          "context",
          [](const Array& a) -> py::object {
            if (!a.home) return py::none();
            return py::cast(share(*a.home));
          },
          "The context it was allocated on (None for imports).")
      .def("__len__",
           [](const Array& a) {
             if (a.shape.empty()) throw py::type_error("len() of a 0-d array");
             return a.shape[0];
           })
      .def_property_readonly(
          "__cuda_array_interface__",
          [](const std::shared_ptr<Array>& a) { return cuda_array_interface(a); },
          "Version 3, for cuda device memory: 'stream' is a stream of sluice's that follows the "
          "pending work on the array; a consumer waits on it before using the data.")
      .def(
          "numpy",
          [](const py::object& self) -> py::object {
            const auto loc = caller();
            auto a = self.cast<std::shared_ptr<Array>>();
            a->check_live(loc);
            auto np = py::module_::import("numpy");
            // The buffer protocol: waits for the pending work, and the view keeps `self` alive.
            if (a->host_accessible()) return np.attr("asarray")(self);
            py::object out =
                np.attr("empty")(shape_tuple(a->shape), py::arg("dtype") = a->dtype.name());
            auto host = as_array(out, std::nullopt, loc);
            Context ctx = a->home ? *a->home : default_context(a->device);
            do_copy(host, a, ctx, loc);
            nogil([&] { interop::host_wait(host->id, host->range(), Access::read_write, loc); });
            return out;
          },
          "The data as a NumPy array: a view without a copy where the host can read the memory "
          "(after waiting for the pending work on it), else a copy (waiting for that copy only).")
      .def(
          "reshape",
          [](const std::shared_ptr<Array>& a, const py::args& args) {
            py::object shape = args.size() == 1 ? py::object(args[0]) : py::object(args);
            auto s = to_shape(shape);
            if (elements(s) != a->size()) {
              throw Error(Errc::invalid_argument,
                          "reshape: " + std::to_string(a->size()) + " elements do not fit shape " +
                              std::string(py::str(shape_tuple(s))),
                          caller());
            }
            auto view = std::shared_ptr<Array>(new Array(*a), NogilDelete{});
            view->shape = s;
            return view;
          },
          "A view with another shape of the same number of elements.")
      .def("__repr__", [](const Array& a) {
        return "<sluice." +
               std::string(dynamic_cast<const DeviceBufferArray*>(&a)   ? "DeviceBuffer"
                           : dynamic_cast<const PinnedBufferArray*>(&a) ? "PinnedBuffer"
                                                                        : "Array") +
               " " + std::string(py::str(shape_tuple(a.shape))) + " " + a.dtype.name() + " on " +
               a.device.to_string() + ">";
      });

  py::class_<DeviceBufferArray, Array, std::shared_ptr<DeviceBufferArray>> device_buffer(
      m, "DeviceBuffer", py::buffer_protocol(),
      "An owning array in a device's memory, allocated in stream order on a context (default: "
      "the current one). Uninitialized. Destroying it while queued work uses it is safe.");
  enable_buffer(device_buffer);
  device_buffer.def(py::init([](const py::object& shape, const py::object& dtype,
                                const std::optional<Context>& ctx) {
                      const auto loc = caller();
                      collect();
                      auto a = make_device_buffer(to_shape(shape), DType::from_python(dtype),
                                                  context_or_current(ctx), loc);
                      return std::static_pointer_cast<DeviceBufferArray>(a);
                    }),
                    py::arg("shape"), py::arg("dtype") = "float64", py::arg("ctx") = py::none());

  py::class_<PinnedBufferArray, Array, std::shared_ptr<PinnedBufferArray>> pinned_buffer(
      m, "PinnedBuffer", py::buffer_protocol(),
      "An owning array in page-locked host memory suited to a device (default: the current "
      "context's), for truly asynchronous copies. The host reads it through the buffer protocol "
      "or numpy(), which wait for the work that writes it.");
  enable_buffer(pinned_buffer);
  pinned_buffer.def(
      py::init([](const py::object& shape, const py::object& dtype, const py::object& device) {
        const auto loc = caller();
        collect();
        auto d = to_device(device);
        auto a = make_pinned_buffer(to_shape(shape), DType::from_python(dtype),
                                    d ? *d : current_context().device(), loc);
        return std::static_pointer_cast<PinnedBufferArray>(a);
      }),
      py::arg("shape"), py::arg("dtype") = "float64", py::arg("device") = py::none());

  py::class_<Marked>(m, "Marked",
                     "An array and how work accesses it: sluice.read(a), write(a), read_write(a).")
      .def_property_readonly("array", [](const Marked& mk) { return mk.array; })
      .def_property_readonly("mode", [](const Marked& mk) {
        return mk.mode == Access::read ? "read" : mk.mode == Access::write ? "write" : "read_write";
      });
  auto mark = [](Access mode) {
    return [mode](const py::object& a) {
      return Marked{as_array(a, std::nullopt, caller()), mode};
    };
  };
  m.def("read", mark(Access::read), py::arg("array"), "The work reads `array`.");
  m.def("write", mark(Access::write), py::arg("array"), "The work writes `array`.");
  m.def("read_write", mark(Access::read_write), py::arg("array"),
        "The work reads and writes `array`.");

  m.def(
      "asarray",
      [](const py::object& obj, const std::optional<Context>& ctx) {
        return as_array(obj, ctx, caller());
      },
      py::arg("obj"), py::arg("ctx") = py::none(),
      "`obj` as a sluice Array without a copy: a sluice array as is; else an import through "
      "DLPack, the CUDA array interface or the buffer protocol. A device import is ordered "
      "after the producer's stream: sluice's next use of the memory waits for it.");
  add_function(m, &g_from_dlpack_def);
  m.def(
      "from_cuda_array_interface",
      [](const py::object& obj, const std::optional<Context>& ctx, bool sync) {
        collect();
        return import_cai(obj, ctx, sync, caller());
      },
      py::arg("obj"), py::arg("ctx") = py::none(), py::arg("sync") = true,
      "Imports an object exporting __cuda_array_interface__ without a copy; sluice's later work "
      "on it waits (on the device) for the producer's 'stream' entry.");

  m.def(
      "copy",
      [](const py::object& dst, const py::object& src, const std::optional<Context>& ctx) {
        const auto loc = caller();
        collect();
        auto d = as_array(dst, ctx, loc);
        auto s = as_array(src, ctx, loc);
        do_copy(d, s, copy_context(*d, *s, ctx), loc);
        // Another library's pageable host memory: the copy completes before this returns (as
        // Warp's copies of unpinned arrays do), so the caller may read or reuse it at once.
        nogil([&] {
          if (d->memory == Memory::host && d->id != 0) {
            interop::host_wait(d->id, d->range(), Access::read, loc);
          }
          if (s->memory == Memory::host && s->id != 0) {
            interop::host_wait(s->id, s->range(), Access::read_write, loc);
          }
        });
      },
      py::arg("dst"), py::arg("src"), py::arg("ctx") = py::none(),
      "Copies all of `src` into `dst` (same dtype and size), asynchronously on `ctx` (default: "
      "the current context, or the device's default context for device memory of another "
      "device). Either side may be any array sluice.asarray takes. A copy from or to another "
      "library's ordinary (pageable) host memory, such as a NumPy array, has completed when "
      "this returns (it waits for that copy only); with sluice buffers it is asynchronous.");
  m.def(
      "memset",
      [](const py::object& dst, int value, const std::optional<Context>& ctx) {
        const auto loc = caller();
        auto d = as_array(dst, ctx, loc);
        d->check_live(loc);
        if (d->readonly) throw Error(Errc::invalid_argument, "memset: the array is read-only", loc);
        Context c = copy_context(*d, *d, ctx);
        nogil([&] {
          sluice::memset(c, std::span(static_cast<std::byte*>(d->data), d->nbytes), value, loc);
          if (d->memory == Memory::host && d->id != 0) {
            interop::host_wait(d->id, d->range(), Access::read, loc);
          }
        });
      },
      py::arg("dst"), py::arg("value"), py::arg("ctx") = py::none(),
      "Sets every byte of `dst` to `value`, asynchronously on `ctx` (the rules of sluice.copy: "
      "another library's pageable memory is set before this returns).");
  m.def(
      "fill",
      [](const py::object& dst, const py::object& value, const std::optional<Context>& ctx) {
        const auto loc = caller();
        auto d = as_array(dst, ctx, loc);
        d->check_live(loc);
        if (d->readonly) throw Error(Errc::invalid_argument, "fill: the array is read-only", loc);
        // The element's bytes, as NumPy converts the value to the dtype.
        auto np = py::module_::import("numpy");
        const std::string pattern = np.attr("array")(value, py::arg("dtype") = d->dtype.name())
                                        .attr("tobytes")()
                                        .cast<std::string>();
        Context c = copy_context(*d, *d, ctx);
        nogil([&] {
          detail::fill_bytes(c, d->data, pattern.data(), d->dtype.itemsize(), d->size(), loc);
          if (d->memory == Memory::host && d->id != 0) {
            interop::host_wait(d->id, d->range(), Access::read, loc);
          }
        });
      },
      py::arg("dst"), py::arg("value"), py::arg("ctx") = py::none(),
      "Sets every element of `dst` to `value` (converted to its dtype), asynchronously on `ctx` "
      "(the rules of sluice.copy: another library's pageable memory is filled before this "
      "returns).");
  m.def(
      "empty",
      [](const py::object& shape, const py::object& dtype, const std::optional<Context>& ctx) {
        const auto loc = caller();
        return make_device_buffer(to_shape(shape), DType::from_python(dtype),
                                  context_or_current(ctx), loc);
      },
      py::arg("shape"), py::arg("dtype") = "float64", py::arg("ctx") = py::none(),
      "An uninitialized DeviceBuffer on `ctx` (default: the current context).");
  m.def(
      "zeros",
      [](const py::object& shape, const py::object& dtype, const std::optional<Context>& ctx) {
        const auto loc = caller();
        Context c = context_or_current(ctx);
        auto a = make_device_buffer(to_shape(shape), DType::from_python(dtype), c, loc);
        nogil([&] {
          sluice::memset(c, std::span(static_cast<std::byte*>(a->data), a->nbytes), 0, loc);
        });
        return a;
      },
      py::arg("shape"), py::arg("dtype") = "float64", py::arg("ctx") = py::none(),
      "A DeviceBuffer of zeros on `ctx`, set asynchronously.");
  m.def(
      "array",
      [](const py::object& data, const py::object& dtype, const std::optional<Context>& ctx) {
        const auto loc = caller();
        collect();
        py::object src = data;
        if (!py::isinstance<Array>(data) && !py::hasattr(data, "__dlpack__") &&
            !py::hasattr(data, "__cuda_array_interface__")) {
          auto np = py::module_::import("numpy");
          src = dtype.is_none() ? np.attr("ascontiguousarray")(data)
                                : np.attr("ascontiguousarray")(
                                      data, py::arg("dtype") = DType::from_python(dtype).name());
        }
        auto s = as_array(src, std::nullopt, loc);
        Context c = context_or_current(ctx);
        auto a = make_device_buffer(s->shape, s->dtype, c, loc);
        do_copy(a, s, c, loc);
        return a;
      },
      py::arg("data"), py::arg("dtype") = py::none(), py::arg("ctx") = py::none(),
      "A new DeviceBuffer on `ctx` holding a copy of `data` (a NumPy array, a list, any array): "
      "issued asynchronously; `data` is kept alive until the copy ran.");
  m.def(
      "task_view",
      [](const py::object& a) {
        auto arr = as_array(a, std::nullopt, caller());
        if (!arr->host_accessible()) {
          throw Error(Errc::invalid_argument,
                      "task_view: the array is in " + arr->device.to_string() + " device memory",
                      caller());
        }
        return numpy_over(arr);
      },
      py::arg("array"),
      "A NumPy array over a host-accessible array's memory, without waiting: for use inside host "
      "tasks and graph host nodes whose accesses are declared (their work is ordered already; a "
      "host wait there would wait for the task itself). The view does not keep the array alive.");
  m.def(
      "host_task",
      [](const py::function& fn, const py::args& args, const std::optional<Context>& ctx,
         const std::string& what) {
        const auto loc = caller();
        tracked_host_task(context_or_current(ctx), fn, args, what, loc);
      },
      py::arg("fn"), py::kw_only(), py::arg("ctx") = py::none(), py::arg("what") = "host_task",
      "Runs `fn(*args)` as a host task of `ctx` (default: the current context). Arguments made "
      "with sluice.read / write / read_write of host-accessible arrays arrive as NumPy arrays "
      "over the memory (no copy), and are tracked: the task starts after the work it conflicts "
      "with on any context, and later work that conflicts waits for it. The task takes the GIL "
      "while it runs; an exception it raises is reported, with its traceback, as WorkFailed.");
  producers::bind(m);
}

}  // namespace sluice::python
