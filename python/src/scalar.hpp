#pragma once
// `sluice.Managed` (a future for one value on a device) and `sluice.Expr` (a scalar expression),
// type-erased over the six value types of Managed<T>.

#include <complex>
#include <cstdint>
#include <variant>

#include "common.hpp"
#include "sluice/scalar.hpp"

namespace sluice::python {

using AnyManaged =
    std::variant<Managed<std::int32_t>, Managed<std::int64_t>, Managed<float>, Managed<double>,
                 Managed<std::complex<float>>, Managed<std::complex<double>>>;
using AnyExpression =
    std::variant<AnyExpr<std::int32_t>, AnyExpr<std::int64_t>, AnyExpr<float>, AnyExpr<double>,
                 AnyExpr<std::complex<float>>, AnyExpr<std::complex<double>>>;

struct PyManaged {
  AnyManaged value;
};
struct PyExpr {
  AnyExpression value;
};

/// The Managed<double> inside a Python object (a Managed of dtype float64), or an Error naming
/// what was passed instead.
[[nodiscard]] Managed<double>& managed_double(const py::handle& o, const char* what);
/// A scalar argument of the la layer: a Python number, a Managed of float64, or an expression
/// (evaluated on `ctx` first) — as a Managed<double>, or a host double.
struct DoubleArg {
  std::optional<double> host;
  Managed<double>* device = nullptr;  // a Python Managed's value, or `owned`
  std::shared_ptr<Managed<double>> owned;
};
[[nodiscard]] DoubleArg double_arg(const py::handle& o, const Context& ctx, const char* what,
                                   std::source_location loc);

}  // namespace sluice::python
