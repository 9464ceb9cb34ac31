#pragma once
/// @file
/// The scalar layer's plain types (sluice/scalar.hpp): how `compile` may transform an
/// expression, what it made of one, the layer's counters, and the forward declarations of its
/// class templates.

#include <cstddef>
#include <cstdint>

namespace sluice {

template <class T>
class Managed;
template <class Node>
class Expr;
template <class T>
class AnyExpr;
template <class T>
class ExecutableExpression;

/// How `compile` and `eval` may transform an expression.
struct CompileOptions {
  /// Also apply rewrites that are exact in real arithmetic but may change floating-point results
  /// (NaN, infinities, signed zeros, rounding): (x / y) * y → x, x - x → 0, x + 0 → x, ... See
  /// docs/scalar.md for the list. Off by default: the program then computes exactly what the
  /// expression says, operation by operation.
  bool algebraic = false;
};

/// What `compile` made of an expression.
struct ExpressionInfo {
  std::size_t nodes = 0;         ///< nodes of the expression as written (a tree)
  std::size_t merged = 0;        ///< of them, equal to an earlier node: merged into it
  std::size_t folded = 0;        ///< operations on constants only, computed at compile time
  std::size_t rewritten = 0;     ///< operations replaced by a simpler equivalent
  std::size_t instructions = 0;  ///< instructions of the program (each computes one value)
  std::size_t loads = 0;         ///< distinct Managed inputs
  std::size_t constants = 0;     ///< distinct constants
};

namespace scalar {
/// Process-wide counters (monotonic), for tests and benchmarks.
struct Stats {
  std::uint64_t launches = 0;    ///< programs run: each is exactly one launch on its context
  std::uint64_t compiled = 0;    ///< expressions compiled into programs
  std::uint64_t host_reads = 0;  ///< values read by the host with `Managed::value()`
};
[[nodiscard]] Stats stats();
}  // namespace scalar

}  // namespace sluice
