// `sluice.Managed`, `sluice.Expr`, `sluice.Program`: device scalars with Python operators.
//
// Operators build expressions (nothing runs); `eval`, `Managed.assign` and `Program.run` issue
// one launch on a context; `.value()` reads on the host, waiting for the producer only. The C++
// typing rules hold (docs/scalar.md): a Python constant takes the other operand's type (an int
// next to an int32 is an int32; a float next to an integer expression is a TypeError), float and
// double precision never mix silently, comparisons give int32.

#include "scalar.hpp"

#include <pybind11/complex.h>

#include <array>
#include <limits>

namespace sluice::python {
namespace {

using i32 = std::int32_t;
using i64 = std::int64_t;
using c32 = std::complex<float>;
using c64 = std::complex<double>;

template <class T>
struct tag {
  using type = T;
};

template <class T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, i32>) return "int32";
  if constexpr (std::is_same_v<T, i64>) return "int64";
  if constexpr (std::is_same_v<T, float>) return "float32";
  if constexpr (std::is_same_v<T, double>) return "float64";
  if constexpr (std::is_same_v<T, c32>) return "complex64";
  if constexpr (std::is_same_v<T, c64>) return "complex128";
}

template <class T>
using traits = sluice::detail::scalar_traits<T>;

/// Calls `f(tag<T>{})` for the value type named `dtype`.
template <class F>
decltype(auto) with_type(const DType& dtype, F&& f) {
  using C = DType::Code;
  if (dtype == DType{C::int_, 32}) return f(tag<i32>{});
  if (dtype == DType{C::int_, 64}) return f(tag<i64>{});
  if (dtype == DType{C::float_, 32}) return f(tag<float>{});
  if (dtype == DType{C::float_, 64}) return f(tag<double>{});
  if (dtype == DType{C::complex, 64}) return f(tag<c32>{});
  if (dtype == DType{C::complex, 128}) return f(tag<c64>{});
  throw py::type_error(
      "sluice.Managed holds int32, int64, float32, float64, complex64 or "
      "complex128, not " +
      dtype.name());
}

template <class T>
T from_python(const py::handle& o) {
  if constexpr (traits<T>::is_complex) {
    const auto c = o.cast<std::complex<double>>();
    return T(static_cast<typename T::value_type>(c.real()),
             static_cast<typename T::value_type>(c.imag()));
  } else if constexpr (traits<T>::is_integer) {
    if (!py::isinstance<py::int_>(o)) {
      throw py::type_error(std::string("an ") + type_name<T>() + " value needs a Python int");
    }
    const auto v = o.cast<long long>();
    if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
      throw py::value_error(std::to_string(v) + " does not fit " + type_name<T>());
    }
    return static_cast<T>(v);
  } else {
    if (py::isinstance<py::float_>(o) || py::isinstance<py::int_>(o)) {
      return static_cast<T>(o.cast<double>());
    }
    throw py::type_error(std::string("a ") + type_name<T>() + " value needs a Python float or int");
  }
}

template <class T>
py::object to_python(const T& v) {
  if constexpr (traits<T>::is_complex) {
    return py::cast(std::complex<double>(v.real(), v.imag()));
  } else if constexpr (traits<T>::is_integer) {
    return py::int_(static_cast<long long>(v));
  } else {
    return py::float_(static_cast<double>(v));
  }
}

bool is_python_number(const py::handle& o) {
  return py::isinstance<py::int_>(o) || py::isinstance<py::float_>(o) || PyComplex_Check(o.ptr());
}

DType type_of_python_number(const py::handle& o) {
  if (PyComplex_Check(o.ptr())) return DType::parse("complex128");
  if (py::isinstance<py::float_>(o)) return DType::parse("float64");
  return DType::parse("int64");
}

// ---- operands -----------------------------------------------------------------------------------

AnyExpression expression_of(const PyManaged& m) {
  return std::visit(
      [](const auto& v) -> AnyExpression {
        using T = typename std::decay_t<decltype(v)>::value_type;
        return AnyExpr<T>(v);
      },
      m.value);
}

std::optional<AnyExpression> as_expression(const py::handle& o) {
  if (py::isinstance<PyExpr>(o)) return o.cast<const PyExpr&>().value;
  if (py::isinstance<PyManaged>(o)) return expression_of(o.cast<const PyManaged&>());
  return std::nullopt;
}

/// A Python number next to an expression of type Other: the constant's type is Other's (its real
/// type for a real constant), as in C++.
template <class Other>
AnyExpression constant_beside(const py::handle& c) {
  using R = sluice::detail::real_t<Other>;
  if (PyComplex_Check(c.ptr())) {
    if constexpr (traits<Other>::is_integer) {
      throw py::type_error(
          "a complex constant cannot be combined with an integer expression; "
          "convert the expression first, e.g. sluice.cast(n, 'complex128')");
    } else {
      return AnyExpr<std::complex<R>>(from_python<std::complex<R>>(c));
    }
  } else if (py::isinstance<py::float_>(c)) {
    if constexpr (traits<Other>::is_integer) {
      throw py::type_error(
          "a float constant cannot be combined with an integer expression; "
          "convert the expression first, e.g. sluice.cast(n, 'float64')");
    } else {
      return AnyExpr<R>(from_python<R>(c));
    }
  } else {
    if constexpr (traits<Other>::is_integer) {
      return AnyExpr<R>(from_python<R>(c));
    } else {
      return AnyExpr<R>(static_cast<R>(c.cast<double>()));
    }
  }
}

std::pair<AnyExpression, AnyExpression> operands(const py::handle& a, const py::handle& b) {
  auto ea = as_expression(a);
  auto eb = as_expression(b);
  if (ea && eb) return {*ea, *eb};
  if (ea && is_python_number(b)) {
    return {*ea, std::visit(
                     [&](const auto& x) {
                       return constant_beside<typename std::decay_t<decltype(x)>::value_type>(b);
                     },
                     *ea)};
  }
  if (eb && is_python_number(a)) {
    return {std::visit(
                [&](const auto& x) {
                  return constant_beside<typename std::decay_t<decltype(x)>::value_type>(a);
                },
                *eb),
            *eb};
  }
  throw py::type_error(
      "sluice scalar expressions combine sluice.Managed, sluice.Expr and "
      "Python numbers");
}

// ---- operations ---------------------------------------------------------------------------------

enum class Op { add, sub, mul, div, eq, ne, lt, le, gt, ge, min, max, pow };

constexpr const char* op_name(Op op) {
  constexpr std::array<const char*, 13> names{"+",  "-", "*",  "/",   "==",  "!=", "<",
                                              "<=", ">", ">=", "min", "max", "pow"};
  return names[static_cast<int>(op)];
}

template <Op O, class A, class B>
constexpr bool op_ok() {
  if constexpr (!sluice::detail::binary_types_ok<AnyExpr<A>, AnyExpr<B>>()) {
    return false;
  } else {
    using R = sluice::detail::binary_result_t<AnyExpr<A>, AnyExpr<B>>;
    if constexpr (O == Op::lt || O == Op::le || O == Op::gt || O == Op::ge || O == Op::min ||
                  O == Op::max) {
      return !traits<R>::is_complex;
    } else if constexpr (O == Op::pow) {
      return !traits<R>::is_integer;
    } else {
      return true;
    }
  }
}

template <Op O, class A, class B>
auto apply(const AnyExpr<A>& a, const AnyExpr<B>& b) {
  if constexpr (O == Op::add) return a + b;
  if constexpr (O == Op::sub) return a - b;
  if constexpr (O == Op::mul) return a * b;
  if constexpr (O == Op::div) return a / b;
  if constexpr (O == Op::eq) return a == b;
  if constexpr (O == Op::ne) return a != b;
  if constexpr (O == Op::lt) return a < b;
  if constexpr (O == Op::le) return a <= b;
  if constexpr (O == Op::gt) return a > b;
  if constexpr (O == Op::ge) return a >= b;
  if constexpr (O == Op::min) return sluice::min(a, b);
  if constexpr (O == Op::max) return sluice::max(a, b);
  if constexpr (O == Op::pow) return sluice::pow(a, b);
}

template <Op O>
PyExpr binary(const py::handle& x, const py::handle& y) {
  auto [a, b] = operands(x, y);
  return std::visit(
      [](const auto& ea, const auto& eb) -> PyExpr {
        using A = typename std::decay_t<decltype(ea)>::value_type;
        using B = typename std::decay_t<decltype(eb)>::value_type;
        if constexpr (op_ok<O, A, B>()) {
          auto e = apply<O>(ea, eb);
          using R = sluice::detail::value_t<decltype(e)>;
          return PyExpr{AnyExpr<R>(e)};
        } else {
          std::string why;
          if constexpr (!sluice::detail::binary_types_ok<AnyExpr<A>, AnyExpr<B>>()) {
            why =
                "the operands mix float and double precision; say which one you mean with "
                "sluice.cast(x, 'float64') or sluice.cast(x, 'float32')";
          } else if constexpr (O == Op::pow) {
            why =
                "pow needs a floating-point or complex operand; convert integers with "
                "sluice.cast(n, 'float64')";
          } else {
            why = "complex numbers have no ordering; compare sluice.real(z) or sluice.abs(z)";
          }
          throw py::type_error(std::string("sluice: ") + type_name<A>() + " " + op_name(O) + " " +
                               type_name<B>() + ": " + why);
        }
      },
      a, b);
}

enum class Fn { neg, abs, sqrt, exp, log, sin, cos, tan, conj, real, imag };

template <Fn F>
PyExpr unary(const py::handle& x) {
  auto e = as_expression(x);
  if (!e) {
    throw py::type_error(
        "expected a sluice.Managed or sluice.Expr (use Python's math for numbers)");
  }
  return std::visit(
      [](const auto& a) -> PyExpr {
        using T = typename std::decay_t<decltype(a)>::value_type;
        if constexpr (F == Fn::neg) return PyExpr{AnyExpr<T>(-a)};
        if constexpr (F == Fn::abs) {
          return PyExpr{AnyExpr<sluice::detail::real_t<T>>(sluice::abs(a))};
        }
        if constexpr (F == Fn::conj) return PyExpr{AnyExpr<T>(sluice::conj(a))};
        if constexpr (F == Fn::real) {
          return PyExpr{AnyExpr<sluice::detail::real_t<T>>(sluice::real(a))};
        }
        if constexpr (F == Fn::imag) {
          return PyExpr{AnyExpr<sluice::detail::real_t<T>>(sluice::imag(a))};
        }
        if constexpr (F == Fn::sqrt || F == Fn::exp || F == Fn::log || F == Fn::sin ||
                      F == Fn::cos || F == Fn::tan) {
          if constexpr (traits<T>::is_integer) {
            throw py::type_error(std::string("sluice: this function needs a floating-point or "
                                             "complex operand, not ") +
                                 type_name<T>() + "; convert with sluice.cast(n, 'float64')");
          } else {
            if constexpr (F == Fn::sqrt) return PyExpr{AnyExpr<T>(sluice::sqrt(a))};
            if constexpr (F == Fn::exp) return PyExpr{AnyExpr<T>(sluice::exp(a))};
            if constexpr (F == Fn::log) return PyExpr{AnyExpr<T>(sluice::log(a))};
            if constexpr (F == Fn::sin) return PyExpr{AnyExpr<T>(sluice::sin(a))};
            if constexpr (F == Fn::cos) return PyExpr{AnyExpr<T>(sluice::cos(a))};
            if constexpr (F == Fn::tan) return PyExpr{AnyExpr<T>(sluice::tan(a))};
          }
        }
      },
      *e);
}

PyExpr cast_to(const py::handle& x, const DType& dtype) {
  auto e = as_expression(x);
  if (!e) throw py::type_error("sluice.cast needs a sluice.Managed or sluice.Expr");
  return with_type(dtype, [&](auto to) -> PyExpr {
    using U = typename decltype(to)::type;
    return std::visit(
        [](const auto& a) -> PyExpr {
          using T = typename std::decay_t<decltype(a)>::value_type;
          if constexpr (traits<T>::is_complex && !traits<U>::is_complex) {
            throw py::type_error(
                "sluice.cast cannot drop an imaginary part; use sluice.real(z), "
                "sluice.imag(z) or sluice.abs(z)");
          } else if constexpr (!traits<T>::is_integer && traits<U>::is_integer) {
            throw py::type_error(
                "sluice.cast from floating-point or complex to an integer type "
                "is not supported");
          } else {
            return PyExpr{AnyExpr<U>(sluice::cast<U>(a))};
          }
        },
        *e);
  });
}

/// `e` as an expression of T, for assignment to a Managed<T>: only conversions that never lose
/// the imaginary part, the fraction or precision, as in C++.
template <class T>
AnyExpr<T> assignable(const AnyExpression& e) {
  return std::visit(
      [](const auto& a) -> AnyExpr<T> {
        using From = typename std::decay_t<decltype(a)>::value_type;
        if constexpr (sluice::detail::implicit_conversion_v<From, T>) {
          return AnyExpr<T>(a);
        } else {
          throw py::type_error(std::string("sluice: a ") + type_name<From>() +
                               " expression does not convert implicitly to " + type_name<T>() +
                               ": that would drop the imaginary part, the fraction or precision; "
                               "say what you mean with sluice.real, sluice.abs or sluice.cast");
        }
      },
      e);
}

CompileOptions options(bool algebraic) {
  return CompileOptions{.algebraic = algebraic};
}

DType dtype_of(const AnyExpression& e) {
  return std::visit(
      [](const auto& a) {
        return DType::parse(type_name<typename std::decay_t<decltype(a)>::value_type>());
      },
      e);
}
DType dtype_of(const AnyManaged& m) {
  return std::visit(
      [](const auto& v) {
        return DType::parse(type_name<typename std::decay_t<decltype(v)>::value_type>());
      },
      m);
}

std::shared_ptr<PyManaged> new_managed(AnyManaged m) {
  return std::shared_ptr<PyManaged>(new PyManaged{std::move(m)}, NogilDelete{});
}

std::shared_ptr<PyManaged> evaluate(const AnyExpression& e, const Context& ctx, bool algebraic,
                                    std::source_location loc) {
  return std::visit(
      [&](const auto& a) {
        return new_managed(nogil([&] { return sluice::eval(a, ctx, options(algebraic), loc); }));
      },
      e);
}

/// A Python value (number, Managed or Expr) assigned to `m` on ctx, asynchronously.
void assign_to(PyManaged& m, const py::handle& x, const Context& ctx, bool algebraic,
               std::source_location loc) {
  std::visit(
      [&](auto& target) {
        using T = typename std::decay_t<decltype(target)>::value_type;
        if (is_python_number(x)) {
          const T v = from_python<T>(x);
          nogil([&] { target.assign(v, ctx, loc); });
          return;
        }
        auto e = as_expression(x);
        if (!e) throw py::type_error("Managed.assign takes a number, a Managed or an Expr");
        auto typed = assignable<T>(*e);
        nogil([&] { target.assign(typed, ctx, options(algebraic), loc); });
      },
      m.value);
}

// ---- compiled programs --------------------------------------------------------------------------

using AnyProgram = std::variant<ExecutableExpression<i32>, ExecutableExpression<i64>,
                                ExecutableExpression<float>, ExecutableExpression<double>,
                                ExecutableExpression<c32>, ExecutableExpression<c64>>;
struct PyProgram {
  AnyProgram value;
};

py::dict info_dict(const ExpressionInfo& i) {
  py::dict d;
  d["nodes"] = i.nodes;
  d["merged"] = i.merged;
  d["folded"] = i.folded;
  d["rewritten"] = i.rewritten;
  d["instructions"] = i.instructions;
  d["loads"] = i.loads;
  d["constants"] = i.constants;
  return d;
}

template <Op O>
void def_binary(py::class_<PyManaged, std::shared_ptr<PyManaged>>& m, py::class_<PyExpr>& e,
                const char* name, const char* rname) {
  auto f = [](const py::object& a, const py::object& b) { return binary<O>(a, b); };
  auto r = [](const py::object& a, const py::object& b) { return binary<O>(b, a); };
  m.def(name, f, py::is_operator());
  e.def(name, f, py::is_operator());
  if (rname != nullptr) {
    m.def(rname, r, py::is_operator());
    e.def(rname, r, py::is_operator());
  }
}

template <Fn F>
void def_unary(py::module_& mod, const char* name, const char* doc) {
  mod.def(
      name, [](const py::object& x) { return unary<F>(x); }, py::arg("x"), doc);
}

}  // namespace

Managed<double>& managed_double(const py::handle& o, const char* what) {
  if (py::isinstance<PyManaged>(o)) {
    auto& m = o.cast<PyManaged&>();
    if (auto* d = std::get_if<Managed<double>>(&m.value)) return *d;
    throw py::type_error(std::string(what) + ": needs a float64 Managed, not " +
                         dtype_of(m.value).name());
  }
  throw py::type_error(std::string(what) + ": needs a sluice.Managed of float64");
}

DoubleArg double_arg(const py::handle& o, const Context& ctx, const char* what,
                     std::source_location loc) {
  DoubleArg out;
  if (py::isinstance<py::int_>(o) || py::isinstance<py::float_>(o)) {
    out.host = o.cast<double>();
    return out;
  }
  if (py::isinstance<PyManaged>(o)) {
    out.device = &managed_double(o, what);
    return out;
  }
  if (py::isinstance<PyExpr>(o)) {
    auto typed = assignable<double>(o.cast<const PyExpr&>().value);
    out.owned = std::shared_ptr<Managed<double>>(
        new Managed<double>(nogil([&] { return sluice::eval(typed, ctx, {}, loc); })),
        NogilDelete{});
    out.device = out.owned.get();
    return out;
  }
  throw py::type_error(std::string(what) +
                       ": a scalar is a Python number, a float64 sluice.Managed or an expression");
}

void bind_scalar(py::module_& mod) {
  py::class_<PyManaged, std::shared_ptr<PyManaged>> managed(
      mod, "Managed",
      "A future for one value on a device (int32, int64, float32, float64, complex64 or "
      "complex128).\n\nArithmetic on Managed values builds a sluice.Expr (nothing runs); "
      "assigning or evaluating one runs it as one launch on a context; value() reads it on the "
      "host, waiting only for the work that produced it.");
  py::class_<PyExpr> expr(mod, "Expr",
                          "A scalar expression of Managed values and constants; evaluated only by "
                          "sluice.eval, Managed.assign or sluice.compile.");

  managed
      .def(py::init([](const py::object& value, const py::object& dtype,
                       const std::optional<Context>& ctx) {
             const auto loc = caller();
             DType t = !dtype.is_none()          ? DType::from_python(dtype)
                       : value.is_none()         ? kFloat64
                       : is_python_number(value) ? type_of_python_number(value)
                       : as_expression(value)    ? dtype_of(*as_expression(value))
                                                 : kFloat64;
             auto m = with_type(t, [](auto tg) {
               using T = typename decltype(tg)::type;
               return new_managed(AnyManaged(Managed<T>()));
             });
             if (!value.is_none()) assign_to(*m, value, context_or_current(ctx), false, loc);
             return m;
           }),
           py::arg("value") = py::none(), py::arg("dtype") = py::none(),
           py::arg("ctx") = py::none(),
           "A Managed holding `value` (a number, Managed or Expr), written asynchronously on `ctx` "
           "(default: the current context); unassigned if value is None. dtype defaults to the "
           "value's (int → int64, float → float64, complex → complex128).")
      .def_property_readonly("dtype", [](const PyManaged& m) { return dtype_of(m.value).name(); })
      .def_property_readonly("assigned",
                             [](const PyManaged& m) {
                               return std::visit([](const auto& v) { return v.assigned(); },
                                                 m.value);
                             })
      .def_property_readonly("device",
                             [](const PyManaged& m) {
                               return std::visit([](const auto& v) { return v.device(); }, m.value);
                             })
      .def_property_readonly("object_id",
                             [](const PyManaged& m) {
                               return std::visit([](const auto& v) { return v.object_id(); },
                                                 m.value);
                             })
      .def_property_readonly(
          "ptr",
          [](const PyManaged& m) {
            return std::visit(
                [](const auto& v) { return reinterpret_cast<std::uintptr_t>(v.device_ptr()); },
                m.value);
          })
      .def(
          "value",
          [](const PyManaged& m) {
            const auto loc = caller();
            return std::visit(
                [&](const auto& v) {
                  auto x = nogil([&] { return v.value(loc); });
                  return to_python(x);
                },
                m.value);
          },
          "The value on the host; waits only for the work that produced it (GIL released). "
          "Raises Error if never assigned, WorkFailed (once) if the producing work failed.")
      .def(
          "assign",
          [](const std::shared_ptr<PyManaged>& m, const py::object& x,
             const std::optional<Context>& ctx, bool algebraic) {
            assign_to(*m, x, context_or_current(ctx), algebraic, caller());
            return m;
          },
          py::arg("value"), py::arg("ctx") = py::none(), py::arg("algebraic") = false,
          "Evaluates `value` (a number, Managed or Expr) into this Managed's storage, "
          "asynchronously on `ctx` (default: the current context). Returns self.")
      .def(
          "copy",
          [](const PyManaged& m, const std::optional<Context>& ctx) {
            return evaluate(expression_of(m), context_or_current(ctx), false, caller());
          },
          py::arg("ctx") = py::none(), "A new Managed with this one's value (a device-side copy).")
      .def("__float__",
           [](const PyManaged& m) {
             const auto loc = caller();
             return std::visit(
                 [&](const auto& v) -> double {
                   using T = typename std::decay_t<decltype(v)>::value_type;
                   if constexpr (traits<T>::is_complex) {
                     throw py::type_error("float() of a complex Managed; use complex()");
                   } else {
                     return static_cast<double>(nogil([&] { return v.value(loc); }));
                   }
                 },
                 m.value);
           })
      .def("__int__",
           [](const PyManaged& m) {
             const auto loc = caller();
             return std::visit(
                 [&](const auto& v) -> long long {
                   using T = typename std::decay_t<decltype(v)>::value_type;
                   if constexpr (!traits<T>::is_integer) {
                     throw py::type_error("int() of a floating-point Managed; use float()");
                   } else {
                     return static_cast<long long>(nogil([&] { return v.value(loc); }));
                   }
                 },
                 m.value);
           })
      .def("__complex__",
           [](const PyManaged& m) {
             const auto loc = caller();
             return std::visit(
                 [&](const auto& v) {
                   auto x = nogil([&] { return v.value(loc); });
                   if constexpr (traits<std::decay_t<decltype(x)>>::is_complex) {
                     return std::complex<double>(x.real(), x.imag());
                   } else {
                     return std::complex<double>(static_cast<double>(x), 0.0);
                   }
                 },
                 m.value);
           })
      .def("__bool__",
           [](const PyManaged&) -> bool {
             throw py::type_error(
                 "the truth value of a sluice.Managed would wait for the device: read it "
                 "explicitly with .value()");
           })
      .def("__repr__", [](const PyManaged& m) {
        return std::visit(
            [&](const auto& v) {
              auto d = v.device();
              return "<sluice.Managed " + dtype_of(m.value).name() +
                     (d ? " on " + d->to_string() : std::string(" (no storage)")) +
                     (v.assigned() ? "" : ", unassigned") + ">";
            },
            m.value);
      });
  managed.attr("__hash__") = py::none();

  expr.def_property_readonly("dtype", [](const PyExpr& e) { return dtype_of(e.value).name(); })
      .def(
          "eval",
          [](const PyExpr& e, const std::optional<Context>& ctx, bool algebraic) {
            return evaluate(e.value, context_or_current(ctx), algebraic, caller());
          },
          py::arg("ctx") = py::none(), py::arg("algebraic") = false,
          "sluice.eval(self, ctx): one launch, asynchronous; returns a new Managed.")
      .def("__bool__",
           [](const PyExpr&) -> bool {
             throw py::type_error(
                 "a sluice.Expr has no value until it is evaluated: use sluice.eval(e).value()");
           })
      .def("__repr__",
           [](const PyExpr& e) { return "<sluice.Expr " + dtype_of(e.value).name() + ">"; });
  expr.attr("__hash__") = py::none();

  def_binary<Op::add>(managed, expr, "__add__", "__radd__");
  def_binary<Op::sub>(managed, expr, "__sub__", "__rsub__");
  def_binary<Op::mul>(managed, expr, "__mul__", "__rmul__");
  def_binary<Op::div>(managed, expr, "__truediv__", "__rtruediv__");
  def_binary<Op::pow>(managed, expr, "__pow__", "__rpow__");
  def_binary<Op::eq>(managed, expr, "__eq__", nullptr);
  def_binary<Op::ne>(managed, expr, "__ne__", nullptr);
  def_binary<Op::lt>(managed, expr, "__lt__", nullptr);
  def_binary<Op::le>(managed, expr, "__le__", nullptr);
  def_binary<Op::gt>(managed, expr, "__gt__", nullptr);
  def_binary<Op::ge>(managed, expr, "__ge__", nullptr);
  for (auto* cls : {static_cast<py::object*>(&managed), static_cast<py::object*>(&expr)}) {
    cls->attr("__neg__") = py::cpp_function([](const py::object& x) { return unary<Fn::neg>(x); },
                                            py::is_method(*cls));
    cls->attr("__abs__") = py::cpp_function([](const py::object& x) { return unary<Fn::abs>(x); },
                                            py::is_method(*cls));
  }

  mod.def(
      "minimum", [](const py::object& a, const py::object& b) { return binary<Op::min>(a, b); },
      py::arg("a"), py::arg("b"), "min(a, b) = b < a ? b : a, on the device.");
  mod.def(
      "maximum", [](const py::object& a, const py::object& b) { return binary<Op::max>(a, b); },
      py::arg("a"), py::arg("b"), "max(a, b) = a < b ? b : a, on the device.");
  mod.def(
      "pow", [](const py::object& a, const py::object& b) { return binary<Op::pow>(a, b); },
      py::arg("a"), py::arg("b"));
  def_unary<Fn::abs>(mod, "abs", "|x| (of a complex value: its modulus, a real value).");
  def_unary<Fn::sqrt>(mod, "sqrt", "Square root, on the device.");
  def_unary<Fn::exp>(mod, "exp", "e**x, on the device.");
  def_unary<Fn::log>(mod, "log", "Natural logarithm, on the device.");
  def_unary<Fn::sin>(mod, "sin", "Sine, on the device.");
  def_unary<Fn::cos>(mod, "cos", "Cosine, on the device.");
  def_unary<Fn::tan>(mod, "tan", "Tangent, on the device.");
  def_unary<Fn::conj>(mod, "conj", "Complex conjugate (of a real value: the value).");
  def_unary<Fn::real>(mod, "real", "Real part (of a real value: the value).");
  def_unary<Fn::imag>(mod, "imag", "Imaginary part (of a real value: 0).");
  mod.def(
      "cast",
      [](const py::object& x, const py::object& dtype) {
        return cast_to(x, DType::from_python(dtype));
      },
      py::arg("x"), py::arg("dtype"),
      "`x` converted to dtype (not complex to real, nor floating-point to integer).");
  mod.def(
      "constant",
      [](const py::object& v, const py::object& dtype) {
        DType t = dtype.is_none() ? type_of_python_number(v) : DType::from_python(dtype);
        return with_type(t, [&](auto tg) {
          using T = typename decltype(tg)::type;
          return PyExpr{AnyExpr<T>(from_python<T>(v))};
        });
      },
      py::arg("value"), py::arg("dtype") = py::none(), "A host value as an expression.");
  mod.def(
      "eval",
      [](const py::object& e, const std::optional<Context>& ctx, bool algebraic) {
        auto ex = as_expression(e);
        if (!ex) throw py::type_error("sluice.eval needs a sluice.Managed or sluice.Expr");
        return evaluate(*ex, context_or_current(ctx), algebraic, caller());
      },
      py::arg("expr"), py::arg("ctx") = py::none(), py::arg("algebraic") = false,
      "Evaluates `expr` asynchronously on `ctx` (default: the current context) into a new "
      "Managed: one launch. algebraic=True also allows rewrites that are exact in real "
      "arithmetic only (docs/scalar.md).");

  py::class_<PyProgram>(mod, "Program",
                        "A frozen expression (sluice.compile): runs any number of times, into any "
                        "target, on any context; each run is one launch that reads the values its "
                        "inputs hold at that point of the stream order.")
      .def(
          "run",
          [](const PyProgram& p, const py::object& target, const std::optional<Context>& ctx) {
            const auto loc = caller();
            Context c = context_or_current(ctx);
            auto& t = target.cast<PyManaged&>();
            std::visit(
                [&](const auto& prog) {
                  using T = typename std::decay_t<decltype(prog)>::value_type;
                  auto* m = std::get_if<Managed<T>>(&t.value);
                  if (m == nullptr) {
                    throw py::type_error(std::string("Program.run: the program computes ") +
                                         type_name<T>() + " but the target holds " +
                                         dtype_of(t.value).name());
                  }
                  nogil([&] { prog.run(*m, c, loc); });
                },
                p.value);
          },
          py::arg("target"), py::arg("ctx") = py::none(),
          "Computes the value into `target` (a Managed of the program's dtype), asynchronously.")
      .def(
          "__call__",
          [](const PyProgram& p, const std::optional<Context>& ctx) {
            const auto loc = caller();
            Context c = context_or_current(ctx);
            return std::visit(
                [&](const auto& prog) { return new_managed(nogil([&] { return prog(c, loc); })); },
                p.value);
          },
          py::arg("ctx") = py::none(), "Computes the value into a new Managed, asynchronously.")
      .def_property_readonly(
          "info",
          [](const PyProgram& p) {
            return std::visit([](const auto& prog) { return info_dict(prog.info()); }, p.value);
          })
      .def("disassemble",
           [](const PyProgram& p) {
             return std::visit([](const auto& prog) { return prog.disassemble(); }, p.value);
           })
      .def_property_readonly("dtype", [](const PyProgram& p) {
        return std::visit(
            [](const auto& prog) {
              return std::string(type_name<typename std::decay_t<decltype(prog)>::value_type>());
            },
            p.value);
      });
  mod.def(
      "compile",
      [](const py::object& e, bool algebraic) {
        auto ex = as_expression(e);
        if (!ex) throw py::type_error("sluice.compile needs a sluice.Managed or sluice.Expr");
        return std::visit(
            [&](const auto& a) {
              return PyProgram{AnyProgram(sluice::compile(a, options(algebraic)))};
            },
            *ex);
      },
      py::arg("expr"), py::arg("algebraic") = false,
      "Freezes `expr` into a Program (common subexpressions merged, constants folded).");
  mod.def("scalar_stats", [] {
    const auto s = scalar::stats();
    py::dict d;
    d["launches"] = s.launches;
    d["compiled"] = s.compiled;
    d["host_reads"] = s.host_reads;
    return d;
  });
}

}  // namespace sluice::python
