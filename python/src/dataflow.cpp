// `sluice.dataflow`: SYCL-style queues, buffers and accessors whose modes build the task graph
// (reference 004), from Python. A command group is a Python function of a Handler: it declares
// accessors and dependencies, then names one kernel — a kernel of the kernel layer
// (`h.launch(kernel, grid, block, *args)`, on the host through its Python implementation), or a
// Python host function (`h.single_task(fn, *args)`, `h.parallel_for(n, fn, *args)`, host
// backend). Buffers are one-dimensional in bytes underneath, typed and shaped in Python;
// accessors cover the whole buffer or a range of its elements in flat (C) order.

#include <array>
#include <cstring>

#include "arrays.hpp"
#include "interop.hpp"
#include "kernel_py.hpp"
#include "sluice/dataflow.hpp"

namespace sluice::python {
namespace {

namespace df = sluice::dataflow;

struct PyBuffer {
  std::optional<df::Buffer<std::byte, 1>> buffer;
  DType dtype;
  std::vector<std::int64_t> shape;
  PyRef host;  // the host array the buffer is made over (written back to on destruction)
  ~PyBuffer() {
    // Destruction waits for the command groups that use the buffer and writes back.
    nogil([&] { buffer.reset(); });
  }
  [[nodiscard]] std::size_t elements() const {
    std::size_t n = 1;
    for (auto s : shape) n *= static_cast<std::size_t>(s);
    return n;
  }
};

struct HostAccess;

struct PyAccessor {
  void* ptr = nullptr;
  std::size_t count = 0;  // elements
  DType dtype;
  Access mode = Access::read_write;
  std::vector<std::int64_t> shape;  // the buffer's shape for a whole-buffer access, else {count}
};

struct PyHandler {
  df::Handler* h = nullptr;
  Device device;            // the queue's
  std::vector<PyRef> keep;  // what the kernel's closure refers to
  df::Handler& get() const {
    if (h == nullptr) {
      throw Error(Errc::invalid_state,
                  "a dataflow Handler is valid only inside the command-group function that "
                  "received it",
                  caller());
    }
    return *h;
  }
};

struct HostAccess {
  std::shared_ptr<PyBuffer> buffer;
  Access mode = Access::read_write;
  bool begun = false;
};

// SYCL 2020's modes (sluice::Access); its no_init property replaced SYCL 1.2's discard_write.
Access parse_mode(const std::string& m) {
  if (m == "read") return Access::read;
  if (m == "write") return Access::write;
  if (m == "read_write") return Access::read_write;
  if (m == "discard_write") {
    throw Error(Errc::invalid_argument,
                "access mode 'discard_write' is SYCL 1.2's: write mode='write', no_init=True",
                caller());
  }
  throw Error(Errc::invalid_argument, "access mode '" + m + "': use read, write or read_write",
              caller());
}

/// A NumPy array over an accessor's memory (valid while its command group's kernel runs).
py::object accessor_view(const PyAccessor& a) {
  auto np = py::module_::import("numpy");
  char dummy = 0;
  py::object mv = py::reinterpret_steal<py::object>(
      PyMemoryView_FromMemory(a.count ? static_cast<char*>(a.ptr) : &dummy,
                              static_cast<Py_ssize_t>(a.count * a.dtype.itemsize()),
                              a.mode == Access::read ? PyBUF_READ : PyBUF_WRITE));
  py::tuple shape(a.shape.size());
  for (std::size_t i = 0; i < a.shape.size(); ++i) shape[i] = a.shape[i];
  return np.attr("frombuffer")(mv, py::arg("dtype") = a.dtype.name()).attr("reshape")(shape);
}

/// A Python host function as the kernel of a command group (host backend): runs once, with the
/// GIL, accessors as NumPy arrays over the queue's copy of the data.
struct PythonTask {
  PyRef fn;
  PyRef args;  // a tuple; PyAccessor entries become NumPy views
  std::optional<std::size_t> range;
  void operator()() const {
    if (finalizing()) throw PythonTaskError("the Python interpreter is shutting down");
    PythonWork work;
    try {
      py::list call;
      if (range) call.append(*range);
      for (auto a : py::reinterpret_borrow<py::tuple>(args.get())) {
        if (py::isinstance<PyAccessor>(a)) {
          call.append(accessor_view(a.cast<const PyAccessor&>()));
        } else {
          call.append(a);
        }
      }
      fn.object()(*py::tuple(call));
    } catch (py::error_already_set& e) {
      throw PythonTaskError(format_python_error(e));
    }
  }
};

void host_kernel(PyHandler& ph, const py::function& fn, const py::args& args,
                 std::optional<std::size_t> range, const char* what) {
  PythonTask task{PyRef(fn), PyRef(py::tuple(args)), range};
  const auto loc = caller();
  df::Handler& h = ph.get();
  (void)what;
  nogil([&] { h.single_task(task, loc); });
}

#ifdef SLUICE_PYTHON_CUDA
/// A kernel-layer kernel launched by the dataflow layer on its context's stream (cuda).
struct NativeTask {
  const void* kernel = nullptr;
  Dims grid, block;
  std::size_t shared = 0;
  std::vector<std::byte> blob;
  std::vector<std::size_t> offsets;
  static void host_run(const void*, std::size_t) {
    throw Error(Errc::unsupported, "a cuda kernel cannot run on the host");
  }
  static const char* device_launch(void* stream, const void* t, std::size_t, void* /*scratch*/) {
    const auto& task = *static_cast<const NativeTask*>(t);
    std::vector<void*> pointers;
    for (auto off : task.offsets)
      pointers.push_back(const_cast<std::byte*>(task.blob.data()) + off);
    if (pointers.empty()) pointers.push_back(nullptr);
    return interop::cuda::launch_native(stream, task.kernel, task.grid, task.block, task.shared,
                                        pointers.data());
  }
};
#endif

void launch_kernel_in_group(PyHandler& ph, const PyKernel& k, const py::object& grid,
                            const py::object& block, const py::args& args, std::size_t shared,
                            const Device& queue_device) {
  const auto loc = caller();
  const std::string& name = k.spec->spec.name();
  if (!(k.device == queue_device)) {
    throw Error(Errc::invalid_argument,
                "kernel " + name + " was loaded for " + k.device.to_string() +
                    " but the queue is on " + queue_device.to_string(),
                loc);
  }
  if (args.size() != k.params.size()) {
    throw Error(Errc::invalid_argument,
                "kernel " + name + " takes " + std::to_string(k.params.size()) +
                    " arguments, not " + std::to_string(args.size()),
                loc);
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    const Param& p = k.params[i];
    if (py::isinstance<PyAccessor>(args[i])) {
      const py::object item = args[i];  // the cast refers into it: it must outlive `a`
      const auto& a = item.cast<const PyAccessor&>();
      if (!p.pointer || !(a.dtype == p.dtype)) {
        throw Error(Errc::invalid_argument,
                    "kernel " + name + ", argument " + std::to_string(i) + ": an accessor of " +
                        a.dtype.name() + " for a parameter of another type",
                    loc);
      }
    }
  }
  auto dims = [](const py::object& o) {
    if (py::isinstance<py::int_>(o)) return Dims(o.cast<unsigned>());
    auto v = o.cast<std::vector<unsigned>>();
    return Dims(v.at(0), v.size() > 1 ? v[1] : 1, v.size() > 2 ? v[2] : 1);
  };
  const Dims g = dims(grid), b = dims(block);
  if (!k.loaded) {
    if (!k.spec->host) {
      throw Error(Errc::unsupported, "kernel " + name + " has no host implementation", loc);
    }
    py::list call;
    for (auto a : args) call.append(a);
    PythonTask task{k.spec->host, PyRef(py::tuple(call)), g.count() * b.count()};
    df::Handler& h = ph.get();
    nogil([&] { h.single_task(task, loc); });
    return;
  }
#ifdef SLUICE_PYTHON_CUDA
  NativeTask task;
  if (k.native == nullptr) k.native = interop::cuda::native_kernel(k.spec->spec, k.device, loc);
  task.kernel = k.native;
  task.grid = g;
  task.block = b;
  task.shared = shared;
  for (std::size_t i = 0; i < args.size(); ++i) {
    task.offsets.push_back(task.blob.size());
    const Param& p = k.params[i];
    const std::size_t n = p.pointer ? sizeof(void*) : p.dtype.itemsize();
    task.blob.resize(task.blob.size() + (n + 7) / 8 * 8);
    std::byte* dst = task.blob.data() + task.offsets.back();
    if (py::isinstance<PyAccessor>(args[i])) {
      void* ptr = args[i].cast<const PyAccessor&>().ptr;
      std::memcpy(dst, &ptr, sizeof ptr);
    } else if (p.pointer) {
      void* ptr =
          args[i].is_none() ? nullptr : reinterpret_cast<void*>(args[i].cast<std::uintptr_t>());
      std::memcpy(dst, &ptr, sizeof ptr);
    } else if (p.dtype.code == DType::Code::float_) {
      if (p.dtype.bits == 32) {
        const float v = args[i].cast<float>();
        std::memcpy(dst, &v, sizeof v);
      } else {
        const double v = args[i].cast<double>();
        std::memcpy(dst, &v, sizeof v);
      }
    } else {
      const long long v = args[i].cast<long long>();
      std::memcpy(dst, &v, n);
    }
  }
  df::detail::KernelDesc desc;
  desc.what = "kernel";
  desc.task = &task;
  desc.copy = &df::detail::copy_task<NativeTask>;
  desc.host_run = &NativeTask::host_run;
  desc.device_launch = &NativeTask::device_launch;
  df::Handler& h = ph.get();
  nogil([&] { df::detail::launch(h.state(), desc, loc); });
#else
  (void)shared;
  throw Error(Errc::unsupported, "this sluice module was built without the cuda backend", loc);
#endif
}

void bind_dataflow_events(py::module_& m) {
  py::class_<df::Event>(m, "Event", "The completion of one command group.")
      .def(
          "wait",
          [](const df::Event& e) {
            const auto loc = caller();
            nogil([&] { e.wait(loc); });
          },
          "Blocks until the command group completed; raises WorkFailed (once) if it failed.")
      .def_property_readonly(
          "complete", [](const df::Event& e) { return nogil([&] { return e.complete(); }); });
  m.def(
      "wait_all",
      [](const std::vector<df::Event>& events) {
        const auto loc = caller();
        nogil([&] { df::wait_all(events, loc); });
      },
      py::arg("events"));
}

}  // namespace

void bind_dataflow(py::module_& parent) {
  py::module_ m = parent.def_submodule(
      "dataflow",
      "SYCL-style queues, buffers and accessors (reference 004): the accessors' modes build the "
      "task graph through sluice's dependency tracker.");
  bind_dataflow_events(m);

  py::class_<df::Queue>(m, "Queue",
                        "A queue of command groups on one device: out-of-order by default (only "
                        "accessors and depends_on order them; independent ones overlap on "
                        "several contexts), or in-order.")
      .def(py::init([](const py::object& device, bool in_order, std::size_t contexts,
                       const std::string& name) {
             df::QueueOptions o;
             o.device = to_device(device);
             if (!o.device) o.device = current_context().device();
             o.in_order = in_order;
             o.contexts = contexts;
             o.name = name;
             const auto loc = caller();
             return nogil([&] { return df::Queue(o, loc); });
           }),
           py::arg("device") = py::none(), py::arg("in_order") = false, py::arg("contexts") = 0,
           py::arg("name") = "")
      .def(
          "submit",
          [](df::Queue& q, py::object cgf) {
            const auto loc = caller();
            PyRef f{std::move(cgf)};
            return nogil([&] {
              return q.submit(
                  [&](df::Handler& h) {
                    py::gil_scoped_acquire gil;
                    auto ph = std::make_shared<PyHandler>();
                    ph->h = &h;
                    ph->device = q.device();
                    py::object handler = py::cast(ph);
                    try {
                      f.object()(handler);
                    } catch (...) {
                      ph->h = nullptr;
                      throw;
                    }
                    ph->h = nullptr;
                  },
                  loc);
            });
          },
          py::arg("cgf"),
          "Builds and issues one command group: cgf(handler) declares accessors "
          "(buffer.access(h, mode)) and dependencies (h.depends_on), then names one kernel. "
          "Returns the group's Event at once.")
      .def(
          "wait",
          [](const df::Queue& q) {
            const auto loc = caller();
            nogil([&] { q.wait(loc); });
          },
          "Blocks until every command group submitted so far completed.")
      .def_property_readonly("device", [](const df::Queue& q) { return q.device(); })
      .def_property_readonly("in_order", &df::Queue::in_order)
      .def_property_readonly("contexts", [](const df::Queue& q) {
        std::vector<std::shared_ptr<Context>> out;
        for (const auto& c : q.contexts()) out.push_back(share(c));
        return out;
      });

  py::class_<PyHandler, std::shared_ptr<PyHandler>>(m, "Handler", "The command group being built.")
      .def(
          "depends_on",
          [](PyHandler& ph, const py::object& events) {
            const auto loc = caller();
            std::vector<df::Event> list;
            if (py::isinstance<df::Event>(events)) {
              list.push_back(events.cast<df::Event>());
            } else {
              list = events.cast<std::vector<df::Event>>();
            }
            df::Handler& h = ph.get();
            nogil([&] { h.depends_on(list, loc); });
          },
          py::arg("events"), "The command group starts after `events` (an Event or a list).")
      .def(
          "single_task",
          [](PyHandler& ph, const py::function& fn, const py::args& args) {
            host_kernel(ph, fn, args, std::nullopt, "single_task");
          },
          py::arg("fn"),
          "A Python host function as the kernel (host backend): fn(*args), accessors arriving as "
          "NumPy arrays over the queue's copy of the data.")
      .def(
          "parallel_for",
          [](PyHandler& ph, std::size_t n, const py::function& fn, const py::args& args) {
            host_kernel(ph, fn, args, n, "parallel_for");
          },
          py::arg("n"), py::arg("fn"),
          "A Python host function over n work-items, called once as fn(n, *args) (write it "
          "vectorized); host backend.")
      .def(
          "launch",
          [](PyHandler& ph, const PyKernel& k, const py::object& grid, const py::object& block,
             const py::args& args, std::size_t shared) {
            launch_kernel_in_group(ph, k, grid, block, args, shared, ph.device);
          },
          py::arg("kernel"), py::arg("grid"), py::arg("block"), py::arg("shared") = 0,
          "A kernel of the kernel layer (sluice.Kernel) as the command group's kernel: "
          "launch(kernel, grid, block, *args); accessors pass the queue's device pointer.");

  py::class_<PyAccessor>(m, "Accessor", "A buffer's access inside a command group.")
      .def_property_readonly(
          "ptr", [](const PyAccessor& a) { return reinterpret_cast<std::uintptr_t>(a.ptr); })
      .def_property_readonly("size", [](const PyAccessor& a) { return a.count; })
      .def_property_readonly("dtype", [](const PyAccessor& a) { return a.dtype.name(); });

  py::class_<PyBuffer, std::shared_ptr<PyBuffer>>(
      m, "Buffer",
      "Data the runtime moves between host and device on demand. Buffer(shape, dtype): "
      "uninitialized; Buffer(array): over a NumPy array's memory, written back to it when the "
      "buffer goes (a read-only array is never written back).")
      .def(py::init([](const py::object& shape_or_array, const py::object& dtype) {
             const auto loc = caller();
             auto b = std::make_shared<PyBuffer>();
             if (py::isinstance<py::int_>(shape_or_array) ||
                 py::isinstance<py::tuple>(shape_or_array) ||
                 py::isinstance<py::list>(shape_or_array)) {
               b->dtype = DType::from_python(dtype);
               if (py::isinstance<py::int_>(shape_or_array)) {
                 b->shape = {shape_or_array.cast<std::int64_t>()};
               } else {
                 b->shape = shape_or_array.cast<std::vector<std::int64_t>>();
               }
               const std::size_t bytes = b->elements() * b->dtype.itemsize();
               b->buffer.emplace(df::range<1>(bytes), loc);
               return b;
             }
             py::object mv =
                 py::reinterpret_steal<py::object>(PyMemoryView_FromObject(shape_or_array.ptr()));
             if (!mv) throw py::error_already_set();
             Py_buffer* view = PyMemoryView_GET_BUFFER(mv.ptr());
             if (!PyBuffer_IsContiguous(view, 'C')) {
               throw Error(Errc::unsupported, "dataflow.Buffer needs a contiguous (C-order) array",
                           loc);
             }
             b->dtype = DType::from_format(view->format ? view->format : "B",
                                           static_cast<std::size_t>(view->itemsize));
             b->shape.assign(view->shape, view->shape + view->ndim);
             b->host = PyRef(mv);
             if (view->readonly) {
               b->buffer.emplace(static_cast<const std::byte*>(view->buf),
                                 df::range<1>(static_cast<std::size_t>(view->len)), loc);
             } else {
               b->buffer.emplace(static_cast<std::byte*>(view->buf),
                                 df::range<1>(static_cast<std::size_t>(view->len)), loc);
             }
             return b;
           }),
           py::arg("shape_or_array"), py::arg("dtype") = "float64")
      .def_property_readonly("shape",
                             [](const PyBuffer& b) { return py::tuple(py::cast(b.shape)); })
      .def_property_readonly("dtype", [](const PyBuffer& b) { return b.dtype.name(); })
      .def_property_readonly("size", &PyBuffer::elements)
      .def(
          "set_write_back", [](PyBuffer& b, bool on) { b.buffer->set_write_back(on); },
          py::arg("on"))
      .def(
          "access",
          [](PyBuffer& b, PyHandler& ph, const std::string& mode, std::optional<std::size_t> count,
             std::size_t offset, bool no_init) {
            const auto loc = caller();
            const Access m = parse_mode(mode);
            if (no_init && m == Access::read) {
              throw Error(Errc::invalid_argument,
                          "dataflow access: no_init with mode 'read' (there is nothing to read); "
                          "use mode 'write' or 'read_write'",
                          loc);
            }
            const std::size_t item = b.dtype.itemsize();
            const std::size_t n = count ? *count : b.elements() - std::min(offset, b.elements());
            if (offset + n > b.elements()) {
              throw Error(Errc::invalid_argument,
                          "dataflow access: elements [" + std::to_string(offset) + ", " +
                              std::to_string(offset + n) + ") lie outside a buffer of " +
                              std::to_string(b.elements()),
                          loc);
            }
            df::Handler& h = ph.get();
            PyAccessor a;
            a.dtype = b.dtype;
            a.mode = m;
            a.count = n;
            a.shape = (offset == 0 && n == b.elements())
                          ? b.shape
                          : std::vector<std::int64_t>{static_cast<std::int64_t>(n)};
            nogil([&] {
              const df::range<1> r(n * item);
              const df::id<1> off(offset * item);
              switch (m) {
                case Access::read:
                  a.ptr = const_cast<std::byte*>(
                      b.buffer->get_access<Access::read>(h, r, off, loc).get_pointer());
                  break;
                case Access::write:
                  a.ptr = no_init
                              ? b.buffer->get_access<Access::write>(h, r, off, df::no_init, loc)
                                    .get_pointer()
                              : b.buffer->get_access<Access::write>(h, r, off, loc).get_pointer();
                  break;
                case Access::read_write:
                  a.ptr =
                      no_init
                          ? b.buffer->get_access<Access::read_write>(h, r, off, df::no_init, loc)
                                .get_pointer()
                          : b.buffer->get_access<Access::read_write>(h, r, off, loc).get_pointer();
                  break;
              }
            });
            return a;
          },
          py::arg("handler"), py::arg("mode") = "read_write", py::arg("count") = py::none(),
          py::arg("offset") = 0, py::arg("no_init") = false,
          "Accesses the buffer (or `count` elements from `offset`, in flat C order) in the "
          "command group of `handler`: mode read, write or read_write (sluice.Access, SYCL "
          "2020's access_mode); no_init=True (write modes) overwrites it without copying its "
          "previous contents in (SYCL 2020's no_init).")
      .def(
          "host_access",
          [](const std::shared_ptr<PyBuffer>& b, const std::string& mode) {
            return HostAccess{b, parse_mode(mode), false};
          },
          py::arg("mode") = "read_write",
          "`with buf.host_access(mode) as a:` — a NumPy view of the data on the host; entering "
          "blocks until the data is there (waiting only for the command groups that write it); "
          "command groups on the buffer wait until the block ends.");

  py::class_<HostAccess>(m, "HostAccess", "What Buffer.host_access returns: a `with` block.")
      .def("__enter__",
           [](HostAccess& h) {
             const auto loc = caller();
             void* p = nogil([&] {
               return df::detail::host_access_begin(*h.buffer->buffer->state(), h.mode, loc);
             });
             h.begun = true;
             PyAccessor a;
             a.ptr = p;
             a.count = h.buffer->elements();
             a.dtype = h.buffer->dtype;
             a.mode = h.mode;
             a.shape = h.buffer->shape;
             return accessor_view(a);
           })
      .def("__exit__", [](HostAccess& h, const py::args&) {
        if (h.begun) df::detail::host_access_end(*h.buffer->buffer->state(), h.mode);
        h.begun = false;
      });
}

}  // namespace sluice::python
