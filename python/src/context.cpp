// Backends and devices, `Context` (with `with ctx:` as the current context), events and timers,
// host tasks that call Python; and the module-wide pieces of the GIL rules (common.hpp).

#include <pybind11/functional.h>

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "common.hpp"
#include "sluice/event.hpp"
#include "sluice/kernel.hpp"

namespace sluice::python {

// ---- Python objects held by C++ work ------------------------------------------------------------

namespace {
bool interpreter_finalizing() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}
}  // namespace

bool finalizing() noexcept {
  return !Py_IsInitialized() || interpreter_finalizing();
}

PyRef::PyRef(py::object o) : holder_(std::make_shared<Holder>()) {
  holder_->obj = o.release().ptr();
}

py::object PyRef::object() const {
  return py::reinterpret_borrow<py::object>(get());
}

PyRef::Holder::~Holder() {
  if (obj == nullptr) return;
  if (PyGILState_Check()) {
    Py_DECREF(obj);
    return;
  }
  // Dropped by C++ work on a thread without the GIL (a worker after a host task, a consumer's
  // DLPack deleter): released by the next call into the module on a Python thread, so that no
  // Python object is deallocated (and no sluice object destroyed) on a worker thread.
  bury(obj);
}

namespace {
thread_local bool in_python_work = false;
}  // namespace

PythonWork::PythonWork() : outer_(std::exchange(in_python_work, true)) {}
PythonWork::~PythonWork() {
  in_python_work = outer_;
}
bool PythonWork::active() noexcept {
  return in_python_work;
}

void PyCall::operator()() const {
  call();
}

std::string format_python_error(py::error_already_set& e) {
  try {
    auto traceback = py::module_::import("traceback");
    py::list lines = traceback.attr("format_exception")(e.type(), e.value(), e.trace());
    std::string text;
    for (auto line : lines) text += line.cast<std::string>();
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  } catch (py::error_already_set& inner) {
    return std::string(e.what()) + " (its traceback could not be formatted: " + inner.what() + ")";
  }
}

// ---- the current context ----------------------------------------------------------------------

namespace {
// The scopes `with ctx:`, `ctx.scope()` and `with device:` opened on this thread, innermost
// last: C++ ScopedContexts and ScopedDevices (sluice/context.hpp), so that C++ code called from
// here sees the same current device and context. A `with` block ends on the thread that began
// it, in reverse order.
struct OpenScope {
  std::unique_ptr<ScopedContext> context;
  std::unique_ptr<ScopedDevice> device;
};
thread_local std::vector<OpenScope> t_scopes;

// The contexts Python holds, so that a failure nobody waited for is reported at exit under the
// context's name (synchronize(device) below would report only the first, unnamed).
struct Held {
  std::mutex mutex;
  std::vector<std::weak_ptr<Context>> contexts;
};
Held& held() {
  static auto* h = new Held;  // never destroyed: handles may be dropped during shutdown
  return *h;
}

// Waits for everything issued, so that no Python host task runs while the interpreter shuts
// down: first the contexts Python holds, then every context of every device (defaults, wrapped
// streams, contexts whose handles are gone). Failures nobody waited for are written to stderr, as
// the C++ library does for a destroyed context.
void drain_at_exit() {
  std::vector<std::shared_ptr<Context>> live;
  {
    auto& h = held();
    std::lock_guard lock(h.mutex);
    for (auto& w : h.contexts) {
      auto c = w.lock();
      if (c && std::none_of(live.begin(), live.end(), [&](const auto& l) { return *l == *c; })) {
        live.push_back(std::move(c));
      }
    }
  }
  nogil([&] {
    for (auto& c : live) {
      try {
        c->synchronize();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "sluice: context '%s' had an unreported failure at exit: %s\n",
                     c->name().c_str(), e.what());
      }
    }
    for (const auto& info : devices()) {
      try {
        synchronize(info.device);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "sluice: unreported failure on %s at exit: %s\n",
                     info.device.to_string().c_str(), e.what());
      }
    }
  });
}
}  // namespace

std::shared_ptr<Context> share(Context ctx) {
  std::shared_ptr<Context> p(new Context(std::move(ctx)), NogilDelete{});
  auto& h = held();
  std::lock_guard lock(h.mutex);
  if (h.contexts.size() >= 64 && h.contexts.size() % 64 == 0) {
    std::erase_if(h.contexts, [](const auto& w) { return w.expired(); });
  }
  h.contexts.push_back(p);
  return p;
}

Context default_context(const Device& device) {
  // The current context of `device` on this thread: its innermost scope, else its default.
  ScopedDevice on(device);
  return sluice::current_context();
}

Context current_context() {
  return sluice::current_context();
}

void push_context(const Context& ctx, bool sync_enter, bool sync_exit, std::source_location loc) {
  auto scope = nogil([&] {
    return std::make_unique<ScopedContext>(
        ctx, ScopeOptions{.sync_enter = sync_enter, .sync_exit = sync_exit}, loc);
  });
  t_scopes.push_back(OpenScope{std::move(scope), nullptr});
}

void push_device(const Device& device) {
  auto scope = nogil([&] { return std::make_unique<ScopedDevice>(device); });
  t_scopes.push_back(OpenScope{nullptr, std::move(scope)});
}

void pop_scope() {
  if (t_scopes.empty()) return;
  auto scope = std::move(t_scopes.back());
  t_scopes.pop_back();
  nogil([&] {
    scope.context.reset();
    scope.device.reset();
  });
}

std::optional<Device> to_device(const py::object& o) {
  if (o.is_none()) return std::nullopt;
  if (py::isinstance<Device>(o)) return o.cast<Device>();
  if (py::isinstance<Context>(o)) return o.cast<const Context&>().device();
  if (py::isinstance<py::str>(o)) return Device::parse(o.cast<std::string>());
  throw py::type_error(
      "expected a sluice.Device, a device name such as 'cuda:0' or 'host', a "
      "sluice.Context or None");
}

namespace {

StreamKind parse_kind(const std::string& kind) {
  if (kind == "async") return StreamKind::async;
  if (kind == "blocking") return StreamKind::blocking;
  throw Error(Errc::invalid_argument,
              "unknown context kind '" + kind + "': use 'async' (the default) or 'blocking'",
              caller());
}

/// `with ctx.scope(sync_enter=..., sync_exit=...)`: Warp's ScopedStream.
struct Scope {
  Context ctx;
  bool sync_enter = true;
  bool sync_exit = false;
};

void bind_device(py::module_& m) {
  py::class_<Device>(m, "Device",
                     "Names one device: a backend and an index, written 'cuda:0' or 'host'.")
      .def(py::init([](const std::string& text) { return Device::parse(text); }), py::arg("name"),
           "Parses 'cuda', 'cuda:1' or 'host'.")
      .def(py::init([](const std::string& backend, int index) {
             return Device{backend, index};
           }),
           py::arg("backend"), py::arg("index"))
      .def_readonly("backend", &Device::backend)
      .def_readonly("index", &Device::index)
      .def("__str__", &Device::to_string)
      .def("__repr__", [](const Device& d) { return "sluice.Device('" + d.to_string() + "')"; })
      .def("__eq__", [](const Device& a, const Device& b) { return a == b; })
      .def("__hash__", [](const Device& d) { return py::hash(py::str(d.to_string())); })
      .def(
          "__enter__",
          [](const Device& d) {
            push_device(d);
            return d;
          },
          "Warp's ScopedDevice: makes this the current device of this thread until the `with` "
          "block ends (current_context() is then its current context).")
      .def("__exit__", [](const Device&, const py::args&) { pop_scope(); });
  py::implicitly_convertible<py::str, Device>();

  py::class_<DeviceInfo>(m, "DeviceInfo", "What a backend says about one of its devices.")
      .def_readonly("device", &DeviceInfo::device)
      .def_readonly("name", &DeviceInfo::name)
      .def_readonly("total_memory", &DeviceInfo::total_memory)
      .def_readonly("compute_units", &DeviceInfo::compute_units)
      .def_readonly("priority_lowest", &DeviceInfo::priority_lowest)
      .def_readonly("priority_highest", &DeviceInfo::priority_highest)
      .def_readonly("details", &DeviceInfo::details)
      .def_readonly("compute_capability_major", &DeviceInfo::compute_capability_major)
      .def_readonly("compute_capability_minor", &DeviceInfo::compute_capability_minor)
      .def_readonly("multiprocessors", &DeviceInfo::multiprocessors)
      .def_readonly("clock_khz", &DeviceInfo::clock_khz)
      .def_readonly("memory_bandwidth_gbs", &DeviceInfo::memory_bandwidth_gbs)
      .def_readonly("l2_cache_bytes", &DeviceInfo::l2_cache_bytes)
      .def_readonly("warp_size", &DeviceInfo::warp_size)
      .def_readonly("peer_access", &DeviceInfo::peer_access)
      .def("__repr__", [](const DeviceInfo& d) {
        return "<sluice.DeviceInfo " + d.device.to_string() + ": " + d.name + ">";
      });

  py::class_<BackendInfo>(m, "BackendInfo", "One registered backend and whether it has devices.")
      .def_readonly("name", &BackendInfo::name)
      .def_readonly("device_count", &BackendInfo::device_count)
      .def_readonly("unavailable_reason", &BackendInfo::unavailable_reason)
      .def("__repr__", [](const BackendInfo& b) {
        return "<sluice.BackendInfo " + b.name + ": " + std::to_string(b.device_count) +
               " device(s)" +
               (b.unavailable_reason.empty() ? "" : " (" + b.unavailable_reason + ")") + ">";
      });

  m.def(
      "backends", [] { return nogil([] { return backends(); }); },
      "Every registered backend, in registration order.");
  m.def(
      "devices", [] { return nogil([] { return devices(); }); }, "Every device of every backend.");
  m.def(
      "device_info",
      [](const py::object& device) {
        auto d = to_device(device);
        const auto loc = caller();
        (void)loc;
        return nogil([&] { return device_info(d ? *d : default_device()); });
      },
      py::arg("device") = py::none(), "Properties of one device (default: the default device).");
  m.def(
      "current_device", [] { return current_device(); },
      "The current device of this thread: the innermost `with device:` or `with ctx:`, else "
      "default_device().");
  m.def(
      "synchronize_device",
      [](const py::object& device) {
        const auto loc = caller();
        auto d = to_device(device);
        const Device dev = d ? *d : current_device();
        nogil([&] { synchronize(dev, loc); });
      },
      py::arg("device") = py::none(),
      "Blocks until the work issued so far on every context of `device` (default: the current "
      "device) completed, as Warp's synchronize_device; raises the first unreported failure "
      "among them as WorkFailed, after waiting for all. Streams sluice does not know are not "
      "waited for. The GIL is released while waiting.");
  m.def(
      "default_device", [] { return default_device(); },
      "The device a context uses when none is named: $SLUICE_DEVICE if set, else the largest "
      "accelerator, else the host.");
  m.def(
      "has_backend",
      [](const std::string& name) {
        for (const auto& b : nogil([] { return backends(); })) {
          if (b.name == name) return b.device_count > 0;
        }
        return false;
      },
      py::arg("name"), "True if backend `name` is registered and has at least one device.");
}

void bind_contexts(py::module_& m) {
  py::class_<Context, std::shared_ptr<Context>> ctx(
      m, "Context",
      "A device plus one ordered stream of work.\n\n"
      "Work issued on one context runs in issue order, asynchronously to the host and to other\n"
      "contexts; sluice orders work across contexts from what it reads and writes. Copies of\n"
      "the Python object refer to the same stream. `with ctx:` makes it the current context of\n"
      "this thread: calls that take no context issue on it.");
  ctx.def(py::init([](const py::object& device, const std::string& kind, int priority,
                      const std::string& name) {
            ContextOptions o;
            o.device = to_device(device);
            o.kind = parse_kind(kind);
            o.priority = priority;
            o.name = name;
            return share(nogil([&] { return Context(o); }));
          }),
          py::arg("device") = py::none(), py::arg("kind") = "async", py::arg("priority") = 0,
          py::arg("name") = "",
          "A context on `device` (default: the default device). kind: 'async' (asynchronous to\n"
          "the host and to other contexts) or 'blocking' (each operation waits for all earlier\n"
          "work on the device and is complete when the call returns). priority: lower is more\n"
          "urgent (CUDA's and Warp's convention), clamped to the device's range\n"
          "[priority_highest, priority_lowest].")
      .def_static(
          "wrap",
          [](const py::object& device, std::uintptr_t stream, const std::string& name) {
            auto d = to_device(device);
            const auto loc = caller();
            (void)loc;
            return share(nogil([&] {
              return Context::wrap(d ? *d : default_device(), reinterpret_cast<void*>(stream),
                                   name);
            }));
          },
          py::arg("device"), py::arg("stream"), py::arg("name") = "",
          "Wraps a native stream (a cudaStream_t as an int) without owning it; keep the stream "
          "alive while the context and its work live.")
      .def_property_readonly("device", [](const Context& c) { return c.device(); })
      .def_property_readonly(
          "kind",
          [](const Context& c) { return c.kind() == StreamKind::async ? "async" : "blocking"; })
      .def_property_readonly("priority", &Context::priority)
      .def_property_readonly("name", [](const Context& c) { return c.name(); })
      .def_property_readonly(
          "native_handle",
          [](const Context& c) { return reinterpret_cast<std::uintptr_t>(c.native_handle()); },
          "The native stream (a cudaStream_t as an int on cuda, 0 on the host).")
      .def(
          "wait_for",
          [](const Context& self, const Context& other) {
            const auto loc = caller();
            nogil([&] { self.wait_for(other, loc); });
          },
          py::arg("other"),
          "Work issued here from now on waits for all work issued on `other` so far (no host "
          "wait).")
      .def(
          "wait_stream",
          [](const Context& self, const Context& other) {
            const auto loc = caller();
            nogil([&] { self.wait_for(other, loc); });
          },
          py::arg("other"), "Warp's name for wait_for.")
      .def(
          "wait",
          [](const Context& self, const Event& e) {
            const auto loc = caller();
            nogil([&] { self.wait(e, loc); });
          },
          py::arg("event"), "Work issued here from now on waits for the point `event` recorded.")
      .def(
          "wait_event",
          [](const Context& self, const Event& e) {
            const auto loc = caller();
            nogil([&] { self.wait(e, loc); });
          },
          py::arg("event"), "Warp's name for wait.")
      .def(
          "record_event",
          [](const Context& self, std::optional<Event> e) {
            Event ev = e ? *e : Event();
            const auto loc = caller();
            nogil([&] { ev.record(self, loc); });
            return ev;
          },
          py::arg("event") = py::none(),
          "Records `event` (a new one if None) at the current end of this context's work and "
          "returns it.")
      .def(
          "idle", [](const Context& c) { return nogil([&] { return c.idle(); }); },
          "True if all work issued so far completed (never blocks, never raises for failed "
          "work).")
      .def(
          "synchronize",
          [](const Context& c) {
            const auto loc = caller();
            nogil([&] { c.synchronize(loc); });
          },
          "Blocks until all work issued so far completed; raises WorkFailed (once) if any of it "
          "failed. The GIL is released while waiting.")
      .def(
          "fork",
          [](const Context& c, std::size_t n) {
            const auto loc = caller();
            auto children = nogil([&] { return c.fork(n, loc); });
            std::vector<std::shared_ptr<Context>> out;
            for (auto& child : children) out.push_back(share(std::move(child)));
            return out;
          },
          py::arg("n"),
          "`n` new contexts on the same device, kind and priority, each starting after all work "
          "issued here so far.")
      .def(
          "join",
          [](const Context& c, const std::vector<std::shared_ptr<Context>>& children) {
            std::vector<Context> list;
            for (const auto& child : children) list.push_back(*child);
            const auto loc = caller();
            nogil([&] { c.join(list, loc); });
          },
          py::arg("children"),
          "Work issued here from now on waits for everything issued so far on each child.")
      .def(
          "host_task",
          [](const Context& c, py::function fn, const std::string& what) {
            const auto loc = caller();
            PyCall call{py::object(std::move(fn))};
            nogil([&] { c.host_task(call, what, loc); });
          },
          py::arg("fn"), py::arg("what") = "host_task",
          "Runs `fn()` on a host thread after all earlier work here completed. It takes the GIL "
          "while it runs. An exception it raises is reported, with its traceback, as WorkFailed "
          "by the next call that waits on this context (naming `what` and your line). On cuda, "
          "`fn` must not call CUDA (it runs on CUDA's host-function thread).")
      .def(
          "__enter__",
          [](const std::shared_ptr<Context>& c) {
            push_context(*c, true, false, caller());
            return c;
          },
          "Makes this the current context of its device on this thread until the `with` block "
          "ends (C++'s ScopedContext with its defaults: on entering, it waits, on the device, for "
          "the work issued so far on the context it replaces).")
      .def("__exit__", [](const Context&, const py::args&) { pop_scope(); })
      .def(
          "scope",
          [](const Context& c, bool sync_enter, bool sync_exit) {
            return Scope{c, sync_enter, sync_exit};
          },
          py::arg("sync_enter") = true, py::arg("sync_exit") = false,
          "Warp's ScopedStream: `with ctx.scope():` makes ctx current; on entry it waits for the "
          "previous current context of its device (sync_enter); on exit the previous one waits "
          "for it (sync_exit).")
      .def("__eq__", [](const Context& a, const Context& b) { return a == b; })
      .def("__hash__", [](const Context& c) { return reinterpret_cast<std::uintptr_t>(&c.impl()); })
      .def("__repr__", [](const Context& c) {
        return "<sluice.Context '" + c.name() + "' on " + c.device().to_string() + ", " +
               (c.kind() == StreamKind::async ? "async" : "blocking") + ">";
      });

  py::class_<Scope>(m, "ContextScope", "What Context.scope returns: a `with` block.")
      .def("__enter__",
           [](Scope& s) {
             push_context(s.ctx, s.sync_enter, s.sync_exit, caller());
             return share(s.ctx);
           })
      .def("__exit__", [](Scope&, const py::args&) { pop_scope(); });

  m.def(
      "current_context", [] { return share(current_context()); },
      "The current context of this thread: the innermost `with ctx:` of the current device, "
      "else that device's default context (sluice::current_context()).");
  m.def(
      "default_context",
      [](const py::object& device) {
        auto d = to_device(device);
        return share(default_context(d ? *d : default_device()));
      },
      py::arg("device") = py::none(),
      "The current context of `device` on this thread: its innermost `with ctx:`, else sluice's "
      "default context of that device (async; one per device and process).");
  m.def(
      "synchronize",
      [] {
        const auto loc = caller();
        auto c = current_context();
        nogil([&] { c.synchronize(loc); });
      },
      "Synchronizes the current context.");
  m.def("_drain_at_exit", &drain_at_exit);
}

void bind_events(py::module_& m) {
  py::class_<Event>(m, "Event",
                    "A point recorded on a context, for cross-context waits, interop and timing. "
                    "Copies share the recorded point.")
      .def(py::init([](bool timing) { return Event(Event::Options{.timing = timing}); }),
           py::arg("timing") = false)
      .def(
          "record",
          [](Event& e, const std::optional<Context>& ctx) {
            const auto loc = caller();
            Context c = context_or_current(ctx);
            nogil([&] { e.record(c, loc); });
          },
          py::arg("ctx") = py::none(),
          "Records the current end of `ctx`'s work (default: the current context).")
      .def_property_readonly("recorded", &Event::recorded)
      .def(
          "query", [](const Event& e) { return nogil([&] { return e.query(); }); },
          "True once the recorded work completed (never blocks, never raises for failed work).")
      .def(
          "synchronize",
          [](const Event& e) {
            const auto loc = caller();
            nogil([&] { e.synchronize(loc); });
          },
          "Blocks until the recorded work completed; raises WorkFailed (once) if it failed.")
      .def_static(
          "elapsed_ms",
          [](const Event& start, const Event& stop) {
            const auto loc = caller();
            return nogil([&] { return Event::elapsed_ms(start, stop, loc); });
          },
          py::arg("start"), py::arg("stop"),
          "Milliseconds from `start` to `stop`, both recorded with timing=True; waits for stop.");

  py::class_<Timer>(m, "Timer", "Elapsed time between two points of a context's work.")
      .def(py::init<>())
      .def(
          "start",
          [](Timer& t, const std::optional<Context>& ctx) {
            const auto loc = caller();
            Context c = context_or_current(ctx);
            nogil([&] { t.start(c, loc); });
          },
          py::arg("ctx") = py::none())
      .def(
          "stop",
          [](Timer& t, const std::optional<Context>& ctx) {
            const auto loc = caller();
            Context c = context_or_current(ctx);
            nogil([&] { t.stop(c, loc); });
          },
          py::arg("ctx") = py::none())
      .def("elapsed_ms", [](const Timer& t) {
        const auto loc = caller();
        return nogil([&] { return t.elapsed_ms(loc); });
      });
}

}  // namespace

void bind_context(py::module_& m) {
  bind_device(m);
  bind_contexts(m);
  bind_events(m);
  py::module_::import("atexit").attr("register")(m.attr("_drain_at_exit"));
}

}  // namespace sluice::python
