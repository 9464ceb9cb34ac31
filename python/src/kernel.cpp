// Kernels from the kernel layer: `KernelSpec` (PTX, cubin, fatbin, CUDA source through NVRTC,
// and a Python host implementation) and `Kernel`, a spec loaded for one device with a parameter
// list given as type names. On cuda the kernel layer loads and checks it (name, parameter count
// and sizes) and launches it as one operation of a context, tracked through the arguments made
// with sluice.read / write / read_write; on the host the Python implementation runs as a tracked
// host task.

#include <array>
#include <cstring>

#include <pybind11/complex.h>

#include "arrays.hpp"
#include "kernel_py.hpp"
#include "sluice/kernel.hpp"

namespace sluice::python {
namespace {

/// The type a Python Kernel's signature stands for on the kernel layer's host loader; Python
/// specs never carry a C++ host implementation, so it only has to differ from every real one.
struct PythonSignature {};

Param parse_param(std::string text) {
  Param p;
  auto trim = [](std::string& s) {
    while (!s.empty() && s.front() == ' ') s.erase(s.begin());
    while (!s.empty() && s.back() == ' ') s.pop_back();
  };
  trim(text);
  if (text.rfind("const ", 0) == 0) {
    p.is_const = true;
    text.erase(0, 6);
    trim(text);
  }
  if (!text.empty() && text.back() == '*') {
    p.pointer = true;
    text.pop_back();
    trim(text);
  }
  p.dtype = DType::parse(text);
  return p;
}

std::string param_text(const Param& p) {
  return (p.is_const ? "const " : "") + p.dtype.name() + (p.pointer ? "*" : "");
}

/// One argument's bytes, checked against its parameter.
void pack(const Param& p, const py::handle& arg, std::size_t index, std::vector<std::byte>& out,
          std::vector<Use>& accesses, std::vector<std::shared_ptr<Array>>& keep,
          const std::string& kernel) {
  auto fail = [&](const std::string& why) {
    throw Error(Errc::invalid_argument,
                "kernel " + kernel + ", argument " + std::to_string(index) + " (" + param_text(p) +
                    "): " + why,
                caller());
  };
  auto put = [&](const void* v, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(v);
    out.insert(out.end(), b, b + n);
  };
  if (p.pointer) {
    void* ptr = nullptr;
    if (py::isinstance<Marked>(arg)) {
      const auto& m = arg.cast<const Marked&>();
      if (!(m.array->dtype == p.dtype)) {
        fail("the array holds " + m.array->dtype.name() + ", the parameter points to " +
             p.dtype.name());
      }
      if (m.mode != Access::read && p.is_const) fail("a const pointer cannot be written");
      m.array->check_live(caller());
      ptr = m.array->data;
      if (m.array->id != 0) accesses.push_back({m.array->id, m.mode, m.array->range()});
      keep.push_back(m.array);
    } else if (py::isinstance<Array>(arg)) {
      fail(
          "pass a sluice array as sluice.read(a), sluice.write(a) or sluice.read_write(a), so "
          "that the tracker orders the launch (or a.ptr for an untracked pointer)");
    } else if (arg.is_none()) {
      ptr = nullptr;
    } else if (py::isinstance<py::int_>(arg)) {
      ptr = reinterpret_cast<void*>(arg.cast<std::uintptr_t>());
    } else {
      fail("expected sluice.read/write/read_write(array), an int address or None");
    }
    put(&ptr, sizeof ptr);
    return;
  }
  using C = DType::Code;
  const DType& t = p.dtype;
  auto integer = [&]() -> long long {
    if (!py::isinstance<py::int_>(arg)) fail("expected a Python int");
    return arg.cast<long long>();
  };
  if (t.code == C::float_ && t.bits == 32) {
    const float v = arg.cast<float>();
    put(&v, sizeof v);
  } else if (t.code == C::float_ && t.bits == 64) {
    const double v = arg.cast<double>();
    put(&v, sizeof v);
  } else if (t.code == C::int_ || t.code == C::uint || t.code == C::bool_) {
    const long long v = integer();
    const std::size_t n = t.itemsize();
    const bool sign = t.code == C::int_;
    if (n < 8) {
      const long long lo = sign ? -(1LL << (n * 8 - 1)) : 0;
      const long long hi = sign ? (1LL << (n * 8 - 1)) - 1 : (1LL << (n * 8)) - 1;
      if (v < lo || v > hi) fail(std::to_string(v) + " does not fit " + t.name());
    } else if (!sign && v < 0) {
      fail("a negative value for an unsigned parameter");
    }
    put(&v, n);  // little-endian: the low bytes
  } else if (t.code == C::complex) {
    const auto c = arg.cast<std::complex<double>>();
    if (t.bits == 64) {
      const std::complex<float> v(static_cast<float>(c.real()), static_cast<float>(c.imag()));
      put(&v, sizeof v);
    } else {
      put(&c, sizeof c);
    }
  } else {
    fail("unsupported parameter type");
  }
}

Dims to_dims(const py::handle& o) {
  if (py::isinstance<py::int_>(o)) return Dims(o.cast<unsigned>());
  auto v = o.cast<std::vector<unsigned>>();
  if (v.empty() || v.size() > 3) throw py::value_error("launch dimensions are 1 to 3 integers");
  return Dims(v[0], v.size() > 1 ? v[1] : 1, v.size() > 2 ? v[2] : 1);
}

}  // namespace

std::shared_ptr<PyKernel> load(const std::shared_ptr<PySpec>& spec,
                               const std::vector<std::string>& params, const Device& device,
                               std::source_location loc) {
  auto k = std::make_shared<PyKernel>();
  k->spec = spec;
  k->device = device;
  for (const auto& p : params) k->params.push_back(parse_param(p));
  if (device.backend == "host") {
    if (!spec->host) {
      throw Error(Errc::unsupported,
                  "kernel " + spec->spec.name() +
                      ": the spec has no host implementation, so it cannot run on " +
                      device.to_string() + "; add one with spec.add_host(fn)",
                  loc);
    }
    return k;
  }
  std::vector<std::size_t> sizes;
  for (const auto& p : k->params) sizes.push_back(p.pointer ? sizeof(void*) : p.dtype.itemsize());
  const detail::KernelSignature signature{typeid(PythonSignature), std::span(sizes)};
  k->loaded = nogil([&] { return detail::load_kernel(device, spec->spec, signature, loc); });
  return k;
}

void launch(const PyKernel& k, const Context& ctx, const py::handle& grid, const py::handle& block,
            std::size_t shared, const py::tuple& args, std::source_location loc) {
  const std::string& name = k.spec->spec.name();
  if (args.size() != k.params.size()) {
    throw Error(Errc::invalid_argument,
                "kernel " + name + " takes " + std::to_string(k.params.size()) +
                    " arguments, not " + std::to_string(args.size()),
                loc);
  }
  const Dims g = to_dims(grid), b = to_dims(block);
  if (!(ctx.device() == k.device)) {
    throw Error(Errc::invalid_argument,
                "kernel " + name + " was loaded for " + k.device.to_string() +
                    " but launched on context '" + ctx.name() + "' of " + ctx.device().to_string() +
                    ": load it for that device too",
                loc);
  }
  std::vector<std::byte> blob;
  std::vector<Use> accesses;
  std::vector<std::shared_ptr<Array>> keep;
  std::vector<std::size_t> offsets;
  for (std::size_t i = 0; i < args.size(); ++i) {  // checks every argument on every backend
    offsets.push_back(blob.size());
    pack(k.params[i], args[i], i, blob, accesses, keep, name);
    blob.resize((blob.size() + 7) / 8 * 8);  // each value at an 8-byte boundary of the blob
  }
  if (!k.loaded) {
    // The host: the Python implementation, once per launch, over every thread index.
    py::list call_args;
    call_args.append(g.count() * b.count());
    for (std::size_t i = 0; i < args.size(); ++i) {
      const Param& p = k.params[i];
      if (p.pointer && py::isinstance<Array>(args[i])) {
        throw Error(Errc::invalid_argument,
                    "kernel " + name + ", argument " + std::to_string(i) +
                        ": pass a sluice array as sluice.read(a), write(a) or read_write(a)",
                    loc);
      }
      call_args.append(args[i]);
    }
    tracked_host_task(ctx, k.spec->host.object().cast<py::function>(), py::tuple(call_args),
                      "kernel " + name, loc);
    return;
  }
  std::vector<void*> pointers;
  for (auto off : offsets) pointers.push_back(blob.data() + off);
  if (pointers.empty()) pointers.push_back(nullptr);
  const Grid gr(g, loc);
  const Block bl(b, shared);
  nogil([&] { detail::launch_kernel(ctx, k.loaded.get(), gr, bl, pointers.data(), accesses); });
}

void bind_kernel(py::module_& m) {
  py::class_<PySpec, std::shared_ptr<PySpec>>(
      m, "KernelSpec",
      "Where a kernel's code is, in one or more formats (the kernel layer's KernelSpec): PTX, "
      "cubin, fatbin, CUDA source compiled by NVRTC (cached), and a Python implementation for "
      "the host backend. Files are read and source compiled when a Kernel is loaded.")
      .def(py::init([](const std::string& name, std::optional<std::size_t> arity) {
             return std::make_shared<PySpec>(PySpec{KernelSpec(name, arity), {}});
           }),
           py::arg("name"), py::arg("arity") = py::none())
      .def_property_readonly("name", [](const PySpec& s) { return s.spec.name(); })
      .def(
          "add_ptx",
          [](const std::shared_ptr<PySpec>& s, const std::string& ptx) {
            s->spec.add_ptx_in_memory(ptx);
            return s;
          },
          py::arg("ptx"))
      .def(
          "add_ptx_file",
          [](const std::shared_ptr<PySpec>& s, const std::string& path) {
            s->spec.add_ptx_on_disk(path);
            return s;
          },
          py::arg("path"))
      .def(
          "add_cubin",
          [](const std::shared_ptr<PySpec>& s, const py::bytes& data, int arch) {
            s->spec.add_cubin_in_memory(std::string(data), arch);
            return s;
          },
          py::arg("data"), py::arg("arch"))
      .def(
          "add_cubin_file",
          [](const std::shared_ptr<PySpec>& s, const std::string& path, int arch) {
            s->spec.add_cubin_on_disk(path, arch);
            return s;
          },
          py::arg("path"), py::arg("arch"))
      .def(
          "add_fatbin",
          [](const std::shared_ptr<PySpec>& s, const py::bytes& data) {
            s->spec.add_fatbin_in_memory(std::string(data));
            return s;
          },
          py::arg("data"))
      .def(
          "add_fatbin_file",
          [](const std::shared_ptr<PySpec>& s, const std::string& path) {
            s->spec.add_fatbin_on_disk(path);
            return s;
          },
          py::arg("path"))
      .def(
          "add_cuda_source",
          [](const std::shared_ptr<PySpec>& s, const std::string& source,
             const std::vector<std::string>& options) {
            s->spec.add_cuda_source(source, options);
            return s;
          },
          py::arg("source"), py::arg("options") = std::vector<std::string>{},
          "CUDA C++ source compiled by NVRTC for the device at load time (cached in memory and on "
          "disk). Name the kernel extern \"C\" or give its name as written.")
      .def(
          "add_host",
          [](const std::shared_ptr<PySpec>& s, const py::function& fn) {
            s->host = PyRef(fn);
            return s;
          },
          py::arg("fn"),
          "The host backend's implementation: fn(threads, *args) runs once per launch, as a "
          "host task, with the number of threads (grid x block) and the arguments, arrays as "
          "NumPy arrays over their memory (write it vectorized). Returns the spec.");

  py::class_<PyKernel, std::shared_ptr<PyKernel>>(
      m, "Kernel",
      "A KernelSpec loaded for one device, with its parameter types: e.g. ['float64', "
      "'const float64*', 'float64*', 'int32']. Loading checks the kernel's name, parameter count "
      "and sizes against the module.")
      .def(py::init([](const std::shared_ptr<PySpec>& spec, const std::vector<std::string>& params,
                       const py::object& device) {
             auto d = to_device(device);
             return load(spec, params, d ? *d : current_context().device(), caller());
           }),
           py::arg("spec"), py::arg("params"), py::arg("device") = py::none())
      .def_property_readonly("name", [](const PyKernel& k) { return k.spec->spec.name(); })
      .def_property_readonly("device", [](const PyKernel& k) { return k.device; })
      .def_property_readonly(
          "format",
          [](const PyKernel& k) {
            return k.loaded ? std::string(to_string(detail::kernel_format(*k.loaded))) : "host";
          })
      .def_property_readonly("params",
                             [](const PyKernel& k) {
                               std::vector<std::string> out;
                               for (const auto& p : k.params) out.push_back(param_text(p));
                               return out;
                             })
      .def(
          "launch",
          [](const PyKernel& k, const py::object& grid, const py::object& block,
             const py::args& args, const std::optional<Context>& ctx, std::size_t shared) {
            launch(k, context_or_current(ctx), grid, block, shared, args, caller());
          },
          py::arg("grid"), py::arg("block"), py::arg("ctx") = py::none(), py::arg("shared") = 0,
          "Launches on `ctx` (default: the current context) as one operation of it: "
          "launch(grid, block, *args, ctx=None, shared=0). Arrays passed as sluice.read(a), "
          "write(a), read_write(a) order the launch after the conflicting work on other "
          "contexts, and later work after it.")
      .def("__repr__", [](const PyKernel& k) {
        return "<sluice.Kernel " + k.spec->spec.name() + " on " + k.device.to_string() + ">";
      });
}

}  // namespace sluice::python
