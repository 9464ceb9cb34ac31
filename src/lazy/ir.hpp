#pragma once
// The lazy layer's two IRs. `Node` is the user's DAG of array operations, as built by
// sluice/lazy.hpp (with the shapes of the declared placeholders). `Ex` is an element expression:
// the body of an index lambda, and, after lowering (lower.hpp), of every generated kernel.

#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <vector>

#include "sluice/lazy.hpp"

namespace sluice::lazy::detail {

enum class NodeKind : std::uint8_t {
  placeholder,
  constant,
  fill,
  unary,
  binary,
  where,
  cast,
  reduce,
  einsum,
  take,
  take_along_axis,
  index,
  reshape,
  transpose,
  concatenate,
  stack,
  roll,
  broadcast_to,
  lambda,
};

/// A parsed einsum spec: one letter string per operand and the output's.
struct EinsumSpec {
  std::vector<std::string> inputs;
  std::string output;
};

struct Node {
  NodeKind kind = NodeKind::fill;
  DType dtype = DType::f64;
  Shape shape;  // with the declared placeholder shapes
  std::vector<NodePtr>
      in;  // operands (index: the array, then its index arrays; lambda: arrays read)
  std::source_location where;
  std::uint64_t uid = 0;  // creation order, process-wide

  std::string name;                      // placeholder
  Op op{};                               // unary, binary
  ReduceOp rop{};                        // reduce
  std::optional<std::vector<int>> axes;  // reduce (nullopt: all), transpose (perm)
  bool keepdims = false;
  Literal lit;  // fill
  EinsumSpec spec;
  std::string spec_text;
  std::optional<int> axis;       // take, take_along_axis, concatenate, stack, roll
  std::int64_t shift = 0;        // roll
  Shape target;                  // fill, reshape, broadcast_to, lambda
  std::vector<IndexItem> items;  // index
  ExPtr body;                    // lambda (loads name arrays by NodePtr)
  // constant
  std::shared_ptr<const void> owner;
  const void* data = nullptr;
  ObjectId id = 0;
  std::size_t bytes = 0;
};

/// The operation's name in messages: "add", "einsum 'ij,jk->ik'", "placeholder 'x'", ...
[[nodiscard]] std::string op_name(const Node& n);
/// "op_name (file:line)".
[[nodiscard]] std::string op_where(const Node& n);
/// The shape of `n` given its operands' shapes (its own `shape` for sources, `placeholder` the
/// bound one). Throws Error naming the operation and the shapes when they do not fit.
[[nodiscard]] Shape infer_shape(const Node& n, std::span<const Shape> in);

enum class ExKind : std::uint8_t {
  literal,
  var,     // index variable `var`
  load,    // element of an array at `args` (one index per axis): `array` or, lowered, `slot`
  unary,   // op(args[0])
  binary,  // op(args[0], args[1]); operands of one type (comparisons give bool)
  where,   // args[0] ? args[1] : args[2]
  cast,    // args[0] converted to dtype
  bound,   // args[0] as an index into an axis of extent args[1]: wrapped (if `wrap`), checked in
           // debug mode (site `site`), clamped into range
  acc,     // the reduction's result, in a reduction's epilogue
};

struct Ex {
  ExKind kind = ExKind::literal;
  DType dtype = DType::i64;
  Op op{};
  std::vector<ExPtr> args;
  Literal lit;
  int var = 0;
  NodePtr array;      // load, before lowering
  int slot = -1;      // load, after lowering: the lowered node read
  int site = -1;      // bound: which check (debug messages)
  bool wrap = false;  // bound
  bool lazy = false;  // where: a branch may only be evaluated when taken
  std::uint64_t hash = 0;
};

// Constructors that fold constants and trivial identities (x + 0, x * 1, 0 * i for integers).
ExPtr ex_lit(Literal v);
ExPtr ex_int(std::int64_t v);
ExPtr ex_var(int k);
ExPtr ex_load_slot(int slot, DType dtype, std::vector<ExPtr> indices);
ExPtr ex_op1(Op op, ExPtr a);
ExPtr ex_op2(Op op, ExPtr a, ExPtr b);  // operands converted to a common type first
ExPtr ex_select(ExPtr c, ExPtr a, ExPtr b, bool lazy = false);
ExPtr ex_convert(ExPtr a, DType to);
ExPtr ex_bound(ExPtr index, ExPtr extent, int site, bool wrap);
ExPtr ex_acc(DType dtype);
inline ExPtr ex_add(ExPtr a, ExPtr b) {
  return ex_op2(Op::add, std::move(a), std::move(b));
}
inline ExPtr ex_mul(ExPtr a, ExPtr b) {
  return ex_op2(Op::mul, std::move(a), std::move(b));
}
inline ExPtr ex_sub(ExPtr a, ExPtr b) {
  return ex_op2(Op::sub, std::move(a), std::move(b));
}

/// Result type of `op` on operands of types a and b (Error for float with double).
[[nodiscard]] DType result_dtype(Op op, DType a, DType b);
[[nodiscard]] bool is_comparison(Op op) noexcept;
[[nodiscard]] bool is_logical(Op op) noexcept;
[[nodiscard]] bool is_unary(Op op) noexcept;
[[nodiscard]] const char* op_symbol(Op op) noexcept;
[[nodiscard]] bool is_float(DType t) noexcept;
[[nodiscard]] bool is_int(DType t) noexcept;  // int32, int64
[[nodiscard]] std::optional<std::int64_t> int_value(const Ex& e) noexcept;

/// Structural equality (pointer-equal subtrees short-cut).
[[nodiscard]] bool same(const ExPtr& a, const ExPtr& b);
/// `e` with index variable k replaced by vars[k] (all of them must be given), memoized so that
/// shared subtrees stay shared.
[[nodiscard]] ExPtr substitute(const ExPtr& e, std::span<const ExPtr> vars);
/// `e` with every load of `slot` (at any index) replaced by what `replace(load)` returns.
template <class F>
ExPtr rewrite_loads(const ExPtr& e, F&& replace);
/// Calls f(load) for every load in `e` (each distinct node once).
template <class F>
void for_each_load(const ExPtr& e, F&& f);
/// A compact text of `e` (tests, messages, keys).
[[nodiscard]] std::string to_text(const ExPtr& e);

}  // namespace sluice::lazy::detail

#include "lazy/ir_walk.hpp"
