// `sluice.la`: vectors (also sluice Arrays: they go to NumPy, CuPy, PyTorch and JAX without a
// copy), sparse and matrix-free matrices (from SciPy, Matrix Market files, stencils) and the
// Krylov solvers in sync, async and graph modes.
//
// Scalar arguments follow the C++ overloads: a Python number takes the synchronous form; a
// float64 Managed (or an expression, evaluated on the context first) the asynchronous one.
// Reductions return a float, or write into `out=` (a float64 Managed) asynchronously.

#include <pybind11/functional.h>

#include "arrays.hpp"
#include "scalar.hpp"
#include "sluice/la.hpp"

namespace sluice::python {
namespace {

namespace la = sluice::la;

/// A la::Vec that is also a sluice Array over its memory.
struct PyVec : Array {
  std::shared_ptr<la::Vec> vec;
};

std::shared_ptr<PyVec> wrap_vec(la::Vec v) {
  auto p = std::shared_ptr<PyVec>(new PyVec, NogilDelete{});
  p->vec = std::shared_ptr<la::Vec>(new la::Vec(std::move(v)), NogilDelete{});
  p->data = p->vec->data();
  p->nbytes = p->vec->size() * sizeof(double);
  p->id = p->vec->object_id();
  p->device = p->vec->device();
  p->memory = Memory::device;
  p->dtype = kFloat64;
  p->shape = {static_cast<std::int64_t>(p->vec->size())};
  p->keep = p->vec;
  p->home = p->vec->context();
  return p;
}

std::vector<double> host_values(const py::handle& values) {
  auto np = py::module_::import("numpy");
  py::object a = np.attr("ascontiguousarray")(values, py::arg("dtype") = "float64").attr("ravel")();
  py::buffer_info info = py::buffer(a).request();
  const auto* p = static_cast<const double*>(info.ptr);
  return std::vector<double>(p, p + info.size);
}

la::NormType parse_norm(const std::string& t) {
  if (t == "one" || t == "1") return la::NormType::one;
  if (t == "two" || t == "2") return la::NormType::two;
  if (t == "infinity" || t == "inf") return la::NormType::infinity;
  throw Error(Errc::invalid_argument, "norm type '" + t + "': use one, two or infinity", caller());
}

/// The context an operation runs on: the given one, else C++'s default (the written vector's).
const Context& ctx_of(const std::optional<Context>& ctx, const la::Vec& v) {
  return ctx ? *ctx : v.context();
}

la::Vec& V(const py::handle& o) {
  return *o.cast<PyVec&>().vec;
}

/// Host-scalar and device-scalar forms of y = f(y, alpha, ...).
template <class Host, class Device>
void scalar_op(const py::handle& alpha, const std::optional<Context>& ctx, const la::Vec& written,
               const char* what, Host host, Device device) {
  const auto loc = caller();
  const Context& c = ctx_of(ctx, written);
  auto a = double_arg(alpha, c, what, loc);
  nogil([&] {
    if (a.host) {
      host(*a.host, c, loc);
    } else {
      device(*a.device, c, loc);
    }
  });
}

py::object reduction(
    const std::optional<Context>& ctx, const la::Vec& x, const py::object& out, const char* what,
    const std::function<double(const Context&, std::source_location)>& sync,
    const std::function<void(Managed<double>&, const Context&, std::source_location)>& async) {
  const auto loc = caller();
  const Context& c = ctx_of(ctx, x);
  if (out.is_none()) return py::float_(nogil([&] { return sync(c, loc); }));
  auto& m = managed_double(out, what);
  nogil([&] { async(m, c, loc); });
  return out;
}

la::KspOptions parse_options(const py::kwargs& kw, la::KspOptions o) {
  for (auto item : kw) {
    const auto key = item.first.cast<std::string>();
    const py::handle v = item.second;
    if (key == "type")
      o.type = la::parse_ksp_type(v.cast<std::string>());
    else if (key == "pc")
      o.pc = la::parse_pc_type(v.cast<std::string>());
    else if (key == "norm_type")
      o.norm_type = la::parse_norm_type(v.cast<std::string>());
    else if (key == "cg_variant")
      o.cg_variant = la::parse_cg_variant(v.cast<std::string>());
    else if (key == "rtol")
      o.rtol = v.cast<double>();
    else if (key == "atol")
      o.atol = v.cast<double>();
    else if (key == "dtol")
      o.dtol = v.cast<double>();
    else if (key == "max_it")
      o.max_it = v.cast<int>();
    else if (key == "fixed_iterations")
      o.fixed_iterations = v.cast<bool>();
    else if (key == "initial_guess_nonzero")
      o.initial_guess_nonzero = v.cast<bool>();
    else if (key == "mode")
      o.mode = la::parse_solve_mode(v.cast<std::string>());
    else if (key == "check_every")
      o.check_every = v.cast<int>();
    else if (key == "history")
      o.history = v.cast<bool>();
    else if (key == "monitor") {
      if (v.is_none()) {
        o.monitor = nullptr;
      } else {
        PyRef fn{py::reinterpret_borrow<py::object>(v)};
        // Called with the norm as a float (its value() waits for that norm alone); takes the GIL.
        o.monitor = [fn](int iteration, const Managed<double>& rnorm) {
          const double value = rnorm.value();
          PythonWork work;
          fn.object()(iteration, value);
        };
      }
    } else {
      throw py::type_error("Ksp: unknown option '" + key +
                           "' (type, pc, cg_variant, norm_type, rtol, atol, dtol, max_it, "
                           "fixed_iterations, "
                           "initial_guess_nonzero, mode, check_every, history, monitor)");
    }
  }
  return o;
}

py::dict options_dict(const la::KspOptions& o) {
  py::dict d;
  d["type"] = std::string(la::to_string(o.type));
  d["pc"] = std::string(la::to_string(o.pc));
  d["cg_variant"] = std::string(la::to_string(o.cg_variant));
  d["norm_type"] = std::string(la::to_string(o.norm_type));
  d["rtol"] = o.rtol;
  d["atol"] = o.atol;
  d["dtol"] = o.dtol;
  d["max_it"] = o.max_it;
  d["fixed_iterations"] = o.fixed_iterations;
  d["initial_guess_nonzero"] = o.initial_guess_nonzero;
  d["mode"] = std::string(la::to_string(o.mode));
  d["check_every"] = o.check_every;
  d["history"] = o.history;
  return d;
}

struct PyKsp {
  la::Ksp ksp;
};

}  // namespace

void bind_la(py::module_& parent) {
  py::module_ m = parent.def_submodule(
      "la",
      "Linear algebra on any context (reference 000): Vec, Mat, the Krylov solvers CG and TFQMR "
      "in sync, async and graph modes. Operations mark what they read and write, so calls on any "
      "mix of contexts interleave without user synchronization. Argument order follows PETSc "
      "(axpy(y, a, x) is y += a x); the context is the last argument, by default the context of "
      "the vector written (of the first vector for reductions).");

  py::class_<PyVec, Array, std::shared_ptr<PyVec>> vec(
      m, "Vec", py::buffer_protocol(),
      "A vector of float64 in a device's memory, made on a context (default: the current one): "
      "Vec(n) is uninitialized, Vec(values) a copy of an array or sequence. It is a sluice.Array: "
      "NumPy, CuPy, PyTorch and JAX read and write it without a copy.");
  enable_buffer(vec);
  vec.def(
         py::init([](const py::object& n_or_values, const std::optional<Context>& ctx) {
           const auto loc = caller();
           Context c = context_or_current(ctx);
           if (py::isinstance<py::int_>(n_or_values)) {
             const auto n = n_or_values.cast<std::size_t>();
             return wrap_vec(nogil([&] { return la::Vec(c, n, loc); }));
           }
           auto values = host_values(n_or_values);
           return wrap_vec(nogil([&] { return la::Vec(c, std::span<const double>(values), loc); }));
         }),
         py::arg("n_or_values"), py::arg("ctx") = py::none())
      .def(
          "duplicate",
          [](const PyVec& v) {
            const auto loc = caller();
            return wrap_vec(nogil([&] { return v.vec->duplicate(loc); }));
          },
          "A new vector of the same size on the same context (values not copied).")
      .def(
          "to_numpy",
          [](const PyVec& v, const std::optional<Context>& ctx) {
            const auto loc = caller();
            auto values =
                nogil([&] { return ctx ? v.vec->to_vector(*ctx, loc) : v.vec->to_vector(loc); });
            auto np = py::module_::import("numpy");
            py::object out = np.attr("empty")(values.size());
            py::buffer_info info = py::buffer(out).request(true);
            std::copy(values.begin(), values.end(), static_cast<double*>(info.ptr));
            return out;
          },
          py::arg("ctx") = py::none(),
          "The values as a new NumPy array; waits only for the work that produced them.")
      .def(
          "assign",
          [](PyVec& v, const py::object& values, const std::optional<Context>& ctx) {
            const auto loc = caller();
            auto host = host_values(values);
            nogil([&] {
              if (ctx) {
                v.vec->assign(host, *ctx, loc);
              } else {
                v.vec->assign(host, loc);
              }
            });
          },
          py::arg("values"), py::arg("ctx") = py::none(),
          "Overwrites the values (same size), staged: asynchronous, and `values` may change once "
          "this returns.")
      .def("__repr__", [](const PyVec& v) {
        return "<sluice.la.Vec of " + std::to_string(v.vec->size()) + " on " +
               v.vec->device().to_string() + ">";
      });

  m.def(
      "set",
      [](const py::object& x, const py::object& alpha, const std::optional<Context>& ctx) {
        auto& v = V(x);
        scalar_op(
            alpha, ctx, v, "la.set",
            [&](double a, const Context& c, auto loc) { la::set(v, a, c, loc); },
            [&](const Managed<double>& a, const Context& c, auto loc) { la::set(v, a, c, loc); });
      },
      py::arg("x"), py::arg("alpha"), py::arg("ctx") = py::none(), "x[i] = alpha.");
  m.def(
      "scale",
      [](const py::object& x, const py::object& alpha, const std::optional<Context>& ctx) {
        auto& v = V(x);
        scalar_op(
            alpha, ctx, v, "la.scale",
            [&](double a, const Context& c, auto loc) { la::scale(v, a, c, loc); },
            [&](const Managed<double>& a, const Context& c, auto loc) { la::scale(v, a, c, loc); });
      },
      py::arg("x"), py::arg("alpha"), py::arg("ctx") = py::none(), "x = alpha x.");
  m.def(
      "axpy",
      [](const py::object& y, const py::object& alpha, const py::object& x,
         const std::optional<Context>& ctx) {
        auto& vy = V(y);
        const auto& vx = V(x);
        scalar_op(
            alpha, ctx, vy, "la.axpy",
            [&](double a, const Context& c, auto loc) { la::axpy(vy, a, vx, c, loc); },
            [&](const Managed<double>& a, const Context& c, auto loc) {
              la::axpy(vy, a, vx, c, loc);
            });
      },
      py::arg("y"), py::arg("alpha"), py::arg("x"), py::arg("ctx") = py::none(),
      "y = y + alpha x.");
  m.def(
      "aypx",
      [](const py::object& y, const py::object& beta, const py::object& x,
         const std::optional<Context>& ctx) {
        auto& vy = V(y);
        const auto& vx = V(x);
        scalar_op(
            beta, ctx, vy, "la.aypx",
            [&](double b, const Context& c, auto loc) { la::aypx(vy, b, vx, c, loc); },
            [&](const Managed<double>& b, const Context& c, auto loc) {
              la::aypx(vy, b, vx, c, loc);
            });
      },
      py::arg("y"), py::arg("beta"), py::arg("x"), py::arg("ctx") = py::none(), "y = x + beta y.");
  m.def(
      "waxpy",
      [](const py::object& w, const py::object& alpha, const py::object& x, const py::object& y,
         const std::optional<Context>& ctx) {
        auto& vw = V(w);
        const auto& vx = V(x);
        const auto& vy = V(y);
        scalar_op(
            alpha, ctx, vw, "la.waxpy",
            [&](double a, const Context& c, auto loc) { la::waxpy(vw, a, vx, vy, c, loc); },
            [&](const Managed<double>& a, const Context& c, auto loc) {
              la::waxpy(vw, a, vx, vy, c, loc);
            });
      },
      py::arg("w"), py::arg("alpha"), py::arg("x"), py::arg("y"), py::arg("ctx") = py::none(),
      "w = alpha x + y.");
  m.def(
      "axpby",
      [](const py::object& y, const py::object& alpha, const py::object& beta, const py::object& x,
         const std::optional<Context>& ctx) {
        const auto loc = caller();
        auto& vy = V(y);
        const auto& vx = V(x);
        const Context& c = ctx_of(ctx, vy);
        auto a = double_arg(alpha, c, "la.axpby", loc);
        auto b = double_arg(beta, c, "la.axpby", loc);
        nogil([&] {
          if (a.host && b.host) {
            la::axpby(vy, *a.host, *b.host, vx, c, loc);
            return;
          }
          // One device scalar: the other becomes one too (the async form takes two).
          Managed<double> ma, mb;
          if (a.host) ma.assign(*a.host, c, loc);
          if (b.host) mb.assign(*b.host, c, loc);
          la::axpby(vy, a.host ? ma : *a.device, b.host ? mb : *b.device, vx, c, loc);
        });
      },
      py::arg("y"), py::arg("alpha"), py::arg("beta"), py::arg("x"), py::arg("ctx") = py::none(),
      "y = alpha x + beta y.");
  m.def(
      "copy",
      [](const py::object& x, const py::object& y, const std::optional<Context>& ctx) {
        const auto loc = caller();
        auto& vy = V(y);
        const auto& vx = V(x);
        nogil([&] { la::copy(vx, vy, ctx_of(ctx, vy), loc); });
      },
      py::arg("x"), py::arg("y"), py::arg("ctx") = py::none(), "y = x (VecCopy).");
  m.def(
      "pointwise_mult",
      [](const py::object& w, const py::object& x, const py::object& y,
         const std::optional<Context>& ctx) {
        const auto loc = caller();
        auto& vw = V(w);
        nogil([&] { la::pointwise_mult(vw, V(x), V(y), ctx_of(ctx, vw), loc); });
      },
      py::arg("w"), py::arg("x"), py::arg("y"), py::arg("ctx") = py::none(), "w = x .* y.");
  m.def(
      "pointwise_divide",
      [](const py::object& w, const py::object& x, const py::object& y,
         const std::optional<Context>& ctx) {
        const auto loc = caller();
        auto& vw = V(w);
        nogil([&] { la::pointwise_divide(vw, V(x), V(y), ctx_of(ctx, vw), loc); });
      },
      py::arg("w"), py::arg("x"), py::arg("y"), py::arg("ctx") = py::none(), "w = x ./ y.");
  m.def(
      "dot",
      [](const py::object& x, const py::object& y, const std::optional<Context>& ctx,
         const py::object& out) {
        const auto& vx = V(x);
        const auto& vy = V(y);
        return reduction(
            ctx, vx, out, "la.dot",
            [&](const Context& c, auto loc) { return la::dot(vx, vy, c, loc); },
            [&](Managed<double>& o, const Context& c, auto loc) { la::dot(vx, vy, o, c, loc); });
      },
      py::arg("x"), py::arg("y"), py::arg("ctx") = py::none(), py::arg("out") = py::none(),
      "x'y: a float (waits for this reduction only), or into `out` (a float64 Managed), "
      "asynchronously.");
  m.def(
      "norm",
      [](const py::object& x, const std::string& type, const std::optional<Context>& ctx,
         const py::object& out) {
        const auto& vx = V(x);
        const auto t = parse_norm(type);
        return reduction(
            ctx, vx, out, "la.norm",
            [&](const Context& c, auto loc) { return la::norm(vx, t, c, loc); },
            [&](Managed<double>& o, const Context& c, auto loc) { la::norm(vx, t, o, c, loc); });
      },
      py::arg("x"), py::arg("type") = "two", py::arg("ctx") = py::none(),
      py::arg("out") = py::none(), "||x|| (type: one, two, infinity).");
  for (const char* name : {"sum", "max", "min"}) {
    const std::string n = name;
    m.def(
        name,
        [n](const py::object& x, const std::optional<Context>& ctx, const py::object& out) {
          const auto& vx = V(x);
          return reduction(
              ctx, vx, out, "la reduction",
              [&](const Context& c, auto loc) {
                return n == "sum"   ? la::sum(vx, c, loc)
                       : n == "max" ? la::max(vx, c, loc)
                                    : la::min(vx, c, loc);
              },
              [&](Managed<double>& o, const Context& c, auto loc) {
                if (n == "sum")
                  la::sum(vx, o, c, loc);
                else if (n == "max")
                  la::max(vx, o, c, loc);
                else
                  la::min(vx, o, c, loc);
              });
        },
        py::arg("x"), py::arg("ctx") = py::none(), py::arg("out") = py::none());
  }

  py::class_<la::Mat>(m, "Mat",
                      "A sparse matrix on a device: CSR (32-bit indices) or a matrix-free "
                      "stencil. Immutable once built; copies share it.")
      .def_static(
          "from_triplets",
          [](std::int64_t rows, std::int64_t cols, const py::object& row, const py::object& col,
             const py::object& val, const std::optional<Context>& ctx) {
            const auto loc = caller();
            auto np = py::module_::import("numpy");
            auto r = np.attr("ascontiguousarray")(row, py::arg("dtype") = "int64");
            auto c = np.attr("ascontiguousarray")(col, py::arg("dtype") = "int64");
            auto v = np.attr("ascontiguousarray")(val, py::arg("dtype") = "float64");
            py::buffer_info ri = py::buffer(r).request(), ci = py::buffer(c).request(),
                            vi = py::buffer(v).request();
            if (ri.size != ci.size || ri.size != vi.size) {
              throw Error(Errc::invalid_argument,
                          "Mat.from_triplets: row, col and val differ in length", loc);
            }
            std::vector<la::Triplet> t(static_cast<std::size_t>(ri.size));
            for (std::size_t i = 0; i < t.size(); ++i) {
              t[i] = {static_cast<const std::int64_t*>(ri.ptr)[i],
                      static_cast<const std::int64_t*>(ci.ptr)[i],
                      static_cast<const double*>(vi.ptr)[i]};
            }
            Context cx = context_or_current(ctx);
            return nogil([&] { return la::Mat::from_triplets(cx, rows, cols, t, loc); });
          },
          py::arg("rows"), py::arg("cols"), py::arg("row"), py::arg("col"), py::arg("val"),
          py::arg("ctx") = py::none(), "CSR from (row, col, value) arrays; duplicates are summed.")
      .def_static(
          "from_scipy",
          [](const py::object& a, const std::optional<Context>& ctx) {
            py::object coo = a.attr("tocoo")();
            auto shape = coo.attr("shape").cast<std::pair<std::int64_t, std::int64_t>>();
            return py::module_::import("sluice").attr("la").attr("Mat").attr("from_triplets")(
                shape.first, shape.second, coo.attr("row"), coo.attr("col"), coo.attr("data"),
                py::arg("ctx") = ctx);
          },
          py::arg("matrix"), py::arg("ctx") = py::none(),
          "CSR from a SciPy sparse matrix (any format).")
      .def_static(
          "read_matrix_market",
          [](const std::string& path, const std::optional<Context>& ctx) {
            const auto loc = caller();
            Context cx = context_or_current(ctx);
            return nogil([&] { return la::Mat::read_matrix_market(cx, path, loc); });
          },
          py::arg("path"), py::arg("ctx") = py::none(),
          "CSR from a Matrix Market file (coordinate; real, integer or pattern; general or "
          "symmetric).")
      .def_static(
          "stencil",
          [](const std::string& kind, std::int64_t nx, std::int64_t ny, std::int64_t nz,
             const std::optional<Context>& ctx) {
            const auto loc = caller();
            Context cx = context_or_current(ctx);
            const auto s = la::parse_stencil(kind);
            return nogil([&] { return la::Mat::stencil(cx, s, nx, ny, nz, loc); });
          },
          py::arg("kind"), py::arg("nx"), py::arg("ny"), py::arg("nz") = 1,
          py::arg("ctx") = py::none(),
          "A matrix-free Laplacian: kind '2d5', '2d9', '3d7' or '3d27' on an nx x ny (x nz) grid.")
      .def_static(
          "stencil_csr",
          [](const std::string& kind, std::int64_t nx, std::int64_t ny, std::int64_t nz,
             const std::optional<Context>& ctx) {
            const auto loc = caller();
            Context cx = context_or_current(ctx);
            const auto s = la::parse_stencil(kind);
            return nogil([&] { return la::Mat::stencil_csr(cx, s, nx, ny, nz, loc); });
          },
          py::arg("kind"), py::arg("nx"), py::arg("ny"), py::arg("nz") = 1,
          py::arg("ctx") = py::none(), "The same operator assembled as CSR.")
      .def_property_readonly("rows", &la::Mat::rows)
      .def_property_readonly("cols", &la::Mat::cols)
      .def_property_readonly("nnz", &la::Mat::nnz)
      .def_property_readonly("shape",
                             [](const la::Mat& a) { return py::make_tuple(a.rows(), a.cols()); })
      .def_property_readonly("is_matrix_free", &la::Mat::is_matrix_free)
      .def_property_readonly("device", [](const la::Mat& a) { return a.device(); })
      .def_property_readonly("context", [](const la::Mat& a) { return share(a.context()); })
      .def(
          "to_scipy",
          [](const la::Mat& a) {
            const auto loc = caller();
            if (a.is_matrix_free()) {
              throw Error(Errc::unsupported,
                          "to_scipy: a matrix-free stencil has no stored entries; build it with "
                          "Mat.stencil_csr",
                          loc);
            }
            auto csr = nogil([&] { return a.to_host(loc); });
            auto np = py::module_::import("numpy");
            auto sp = py::module_::import("scipy.sparse");
            return sp.attr("csr_matrix")(
                py::make_tuple(np.attr("array")(csr.val), np.attr("array")(csr.col),
                               np.attr("array")(csr.row_ptr)),
                py::arg("shape") = py::make_tuple(a.rows(), a.cols()));
          },
          "The CSR arrays as a scipy.sparse.csr_matrix (waits for the upload only).")
      .def("__repr__", [](const la::Mat& a) {
        return "<sluice.la.Mat " + std::to_string(a.rows()) + "x" + std::to_string(a.cols()) +
               ", " + std::to_string(a.nnz()) + " nonzeros" +
               (a.is_matrix_free() ? ", matrix-free" : "") + ">";
      });

  m.def(
      "mult",
      [](const la::Mat& A, const py::object& x, const py::object& y,
         const std::optional<Context>& ctx) {
        const auto loc = caller();
        auto& vy = V(y);
        nogil([&] { la::mult(A, V(x), vy, ctx_of(ctx, vy), loc); });
      },
      py::arg("A"), py::arg("x"), py::arg("y"), py::arg("ctx") = py::none(), "y = A x.");
  m.def(
      "multadd",
      [](const la::Mat& A, const py::object& x, const py::object& y, const py::object& z,
         const std::optional<Context>& ctx) {
        const auto loc = caller();
        auto& vz = V(z);
        nogil([&] { la::multadd(A, V(x), V(y), vz, ctx_of(ctx, vz), loc); });
      },
      py::arg("A"), py::arg("x"), py::arg("y"), py::arg("z"), py::arg("ctx") = py::none(),
      "z = y + A x.");
  m.def(
      "diagonal",
      [](const la::Mat& A, const py::object& d, const std::optional<Context>& ctx) {
        const auto loc = caller();
        auto& vd = V(d);
        nogil([&] { la::diagonal(A, vd, ctx_of(ctx, vd), loc); });
      },
      py::arg("A"), py::arg("d"), py::arg("ctx") = py::none(), "d[i] = A(i, i).");

  py::class_<la::KspResult>(m, "KspResult")
      .def_readonly("iterations", &la::KspResult::iterations)
      .def_readonly("residual_norm", &la::KspResult::residual_norm)
      .def_property_readonly(
          "reason", [](const la::KspResult& r) { return std::string(la::to_string(r.reason)); })
      .def_readonly("history", &la::KspResult::history)
      .def_property_readonly("converged", &la::KspResult::converged)
      .def("__repr__", [](const la::KspResult& r) {
        return "<sluice.la.KspResult " + std::to_string(r.iterations) + " iterations, " +
               std::string(la::to_string(r.reason)) + ", residual " +
               std::to_string(r.residual_norm) + ">";
      });

  py::class_<PyKsp, std::shared_ptr<PyKsp>>(
      m, "Ksp",
      "A Krylov solver for A x = b (KSP). Options: type ('cg', 'tfqmr'), pc ('jacobi', 'none'), "
      "cg_variant ('classic', 'single-reduction'), norm_type, rtol, atol, dtol, max_it, "
      "fixed_iterations, initial_guess_nonzero, mode "
      "('sync', 'async', 'graph'), check_every, history, monitor (fn(iteration, rnorm)).")
      .def(py::init([](const la::Mat& A, const py::kwargs& kw) {
             auto o = parse_options(kw, {});
             return std::shared_ptr<PyKsp>(new PyKsp{la::Ksp(A, std::move(o))}, NogilDelete{});
           }),
           py::arg("A"))
      .def_property_readonly("options",
                             [](const PyKsp& k) { return options_dict(k.ksp.options()); })
      .def("set_options",
           [](PyKsp& k, const py::kwargs& kw) {
             k.ksp.set_options(parse_options(kw, k.ksp.options()));
           })
      .def_property_readonly("check_interval",
                             [](const PyKsp& k) { return k.ksp.check_interval(); })
      .def(
          "solve",
          [](PyKsp& k, const py::object& b, const py::object& x,
             const std::optional<Context>& ctx) {
            const auto loc = caller();
            const auto& vb = V(b);
            auto& vx = V(x);
            return nogil(
                [&] { return ctx ? k.ksp.solve(vb, vx, *ctx, loc) : k.ksp.solve(vb, vx, loc); });
          },
          py::arg("b"), py::arg("x"), py::arg("ctx") = py::none(),
          "Solves A x = b on `ctx` (default: x's context); returns when the solve stopped (the "
          "GIL released meanwhile).");
}

}  // namespace sluice::python
