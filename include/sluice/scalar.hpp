#pragma once
/// @file
/// Device scalars: `Managed<T>`, a future for one value that lives on a device, and expression
/// templates that compute with such values on the device (reference 000, §2.3 and §3.2).
///
/// Arithmetic on `Managed` values builds a typed expression tree instead of computing anything.
/// `eval(expr, ctx)` freezes the tree into a small flat program (common subexpressions merged,
/// constants folded, only value-preserving rewrites unless asked otherwise) and runs it as ONE
/// launch on `ctx`'s stream; the result is a new `Managed`. Values never leave the device unless
/// the host asks for one with `value()`, which waits only for the work that produced it.
///
/// @code
/// sluice::Context ctx;                                   // an asynchronous context
/// sluice::Managed<double> alpha(2.0, ctx);                // on ctx's device
/// alpha = sluice::eval(1.0 / alpha, ctx);                 // one launch, asynchronous
/// auto p = sluice::compile(sqrt(alpha * alpha + 1.0));    // reusable program
/// sluice::Managed<double> r;
/// p.run(r, ctx);                                          // again one launch
/// double host = r.value();                                // waits for r's producer only
/// @endcode
///
/// Values of a `Managed` are ordered across contexts by the dependency tracker like any tracked
/// memory: a value produced on context a and used by an eval on context b needs no manual wait.
/// Destroying a `Managed` while work that uses it is queued is safe.
///
/// Types: float, double, std::complex<float>, std::complex<double>, std::int32_t, std::int64_t.
/// Mixing rules of binary operations (after host constants took the other operand's type):
/// equal types; a complex type with its own real type (computed as C++ computes `z * 2.0`,
/// component-wise, not by promoting 2.0 to complex); an integer with a wider integer or with a
/// floating-point or complex type (the integer is converted first). Mixing float and double
/// precision is a compile error: say which one you mean with `cast<T>(x)`.
/// Comparisons give `std::int32_t` 0 or 1. Integer arithmetic wraps, and integer division by zero
/// gives 0 (never undefined behaviour, on every backend).
///
/// Thread safety: distinct `Managed` objects may be used from different threads; one `Managed`
/// must not be assigned on one thread while another thread uses it (like any C++ value).
/// `ExecutableExpression` is immutable: any number of threads may run one at once.

#include "sluice/scalar/expression.hpp"
#include "sluice/scalar/managed.hpp"
#include "sluice/scalar/operators.hpp"
#include "sluice/scalar/options.hpp"
