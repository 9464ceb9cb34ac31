// Element expressions: constructors with folding, structural equality, substitution, text.

#include <bit>
#include <cstring>
#include <functional>
#include <sstream>
#include <unordered_map>

#include "lazy/ir.hpp"
#include "sluice/error.hpp"

namespace sluice::lazy::detail {
namespace {

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

ExPtr finish(Ex e) {
  std::uint64_t h = mix(static_cast<std::uint64_t>(e.kind), static_cast<std::uint64_t>(e.dtype));
  h = mix(h, static_cast<std::uint64_t>(e.op));
  h = mix(h, std::bit_cast<std::uint64_t>(e.lit.f));
  h = mix(h, static_cast<std::uint64_t>(e.lit.i));
  h = mix(h, static_cast<std::uint64_t>(e.var));
  h = mix(h, static_cast<std::uint64_t>(e.slot));
  h = mix(h, static_cast<std::uint64_t>(e.site));
  h = mix(h, (e.wrap ? 1u : 0u) | (e.lazy ? 2u : 0u));
  h = mix(h, e.array ? e.array->uid : 0);
  for (const auto& a : e.args) h = mix(h, a->hash);
  e.hash = h;
  return std::make_shared<const Ex>(std::move(e));
}

std::int64_t wrap_int(std::int64_t v, DType t) {
  return t == DType::i32 ? static_cast<std::int64_t>(static_cast<std::int32_t>(v)) : v;
}

std::optional<std::int64_t> fold_int(Op op, std::int64_t a, std::int64_t b, DType t) {
  auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  switch (op) {
    case Op::add:
      return wrap_int(static_cast<std::int64_t>(u(a) + u(b)), t);
    case Op::sub:
      return wrap_int(static_cast<std::int64_t>(u(a) - u(b)), t);
    case Op::mul:
      return wrap_int(static_cast<std::int64_t>(u(a) * u(b)), t);
    case Op::div:
      if (b == 0) return 0;
      if (b == -1) return wrap_int(static_cast<std::int64_t>(0 - u(a)), t);
      return a / b;
    case Op::mod:
      if (b == 0 || b == -1) return 0;
      return a % b;
    case Op::minimum:
      return b < a ? b : a;
    case Op::maximum:
      return a < b ? b : a;
    default:
      return std::nullopt;
  }
}

bool is_lit(const ExPtr& e, std::int64_t v) {
  auto i = int_value(*e);
  return i && *i == v;
}

}  // namespace

bool is_float(DType t) noexcept {
  return t == DType::f32 || t == DType::f64;
}
bool is_int(DType t) noexcept {
  return t == DType::i32 || t == DType::i64;
}

std::optional<std::int64_t> int_value(const Ex& e) noexcept {
  if (e.kind == ExKind::literal && (is_int(e.dtype) || e.dtype == DType::boolean)) return e.lit.i;
  return std::nullopt;
}

bool is_comparison(Op op) noexcept {
  return op == Op::eq || op == Op::ne || op == Op::lt || op == Op::le || op == Op::gt ||
         op == Op::ge;
}
bool is_logical(Op op) noexcept {
  return op == Op::logical_and || op == Op::logical_or || op == Op::logical_not;
}
bool is_unary(Op op) noexcept {
  return op <= Op::bit_not;
}

const char* op_symbol(Op op) noexcept {
  switch (op) {
    case Op::neg:
      return "neg";
    case Op::abs:
      return "abs";
    case Op::sqrt:
      return "sqrt";
    case Op::exp:
      return "exp";
    case Op::log:
      return "log";
    case Op::sin:
      return "sin";
    case Op::cos:
      return "cos";
    case Op::tan:
      return "tan";
    case Op::tanh:
      return "tanh";
    case Op::floor:
      return "floor";
    case Op::ceil:
      return "ceil";
    case Op::logical_not:
      return "logical_not";
    case Op::bit_not:
      return "bit_not";
    case Op::add:
      return "add";
    case Op::sub:
      return "subtract";
    case Op::mul:
      return "multiply";
    case Op::div:
      return "divide";
    case Op::mod:
      return "remainder";
    case Op::pow:
      return "pow";
    case Op::minimum:
      return "minimum";
    case Op::maximum:
      return "maximum";
    case Op::eq:
      return "equal";
    case Op::ne:
      return "not_equal";
    case Op::lt:
      return "less";
    case Op::le:
      return "less_equal";
    case Op::gt:
      return "greater";
    case Op::ge:
      return "greater_equal";
    case Op::logical_and:
      return "logical_and";
    case Op::logical_or:
      return "logical_or";
    case Op::bit_and:
      return "bitwise_and";
    case Op::bit_or:
      return "bitwise_or";
    case Op::bit_xor:
      return "bitwise_xor";
  }
  return "?";
}

DType result_dtype(Op op, DType a, DType b) {
  auto common = [&]() -> DType {
    if (a == b) return a;
    if (a == DType::boolean || b == DType::boolean) {
      throw Error(Errc::invalid_argument, std::string("sluice::lazy: ") + op_symbol(op) + " of " +
                                              to_string(a) + " and " + to_string(b) +
                                              ": convert the bool operand first");
    }
    if (is_float(a) && is_float(b)) {
      throw Error(Errc::invalid_argument, std::string("sluice::lazy: ") + op_symbol(op) +
                                              " mixes float32 and float64: cast one first");
    }
    if (is_float(a)) return a;
    if (is_float(b)) return b;
    return DType::i64;
  };
  const DType c = common();
  if (is_comparison(op) || is_logical(op)) return DType::boolean;
  return c;
}

ExPtr ex_lit(Literal v) {
  Ex e;
  e.kind = ExKind::literal;
  e.dtype = v.dtype;
  e.lit = v;
  if (is_float(v.dtype)) {
    e.lit.i = 0;
    if (v.dtype == DType::f32) e.lit.f = static_cast<double>(static_cast<float>(v.f));
  } else {
    e.lit.f = 0;
    if (v.dtype == DType::i32) e.lit.i = static_cast<std::int32_t>(v.i);
    if (v.dtype == DType::boolean) e.lit.i = v.i != 0 ? 1 : 0;
  }
  return finish(std::move(e));
}

ExPtr ex_int(std::int64_t v) {
  return ex_lit(Literal{DType::i64, 0, v});
}

ExPtr ex_var(int k) {
  Ex e;
  e.kind = ExKind::var;
  e.dtype = DType::i64;
  e.var = k;
  return finish(std::move(e));
}

ExPtr ex_load_slot(int slot, DType dtype, std::vector<ExPtr> indices) {
  Ex e;
  e.kind = ExKind::load;
  e.dtype = dtype;
  e.slot = slot;
  e.args = std::move(indices);
  return finish(std::move(e));
}

ExPtr ex_acc(DType dtype) {
  Ex e;
  e.kind = ExKind::acc;
  e.dtype = dtype;
  return finish(std::move(e));
}

ExPtr ex_convert(ExPtr a, DType to) {
  if (a->dtype == to) return a;
  // A float literal converted to an integer type stays a cast (C++ leaves out-of-range values
  // undefined; the generated code decides alike on every backend).
  if (a->kind == ExKind::literal && !(is_float(a->dtype) && is_int(to))) {
    Literal l{to, 0, 0};
    if (is_float(a->dtype)) {
      if (is_float(to)) {
        l.f = a->lit.f;
      } else {
        l.i = a->lit.f != 0 ? 1 : 0;
      }
    } else if (is_float(to)) {
      l.f = static_cast<double>(a->lit.i);
    } else {
      l.i = to == DType::boolean ? (a->lit.i != 0 ? 1 : 0) : a->lit.i;
    }
    return ex_lit(l);
  }
  Ex e;
  e.kind = ExKind::cast;
  e.dtype = to;
  e.args = {std::move(a)};
  return finish(std::move(e));
}

ExPtr ex_op1(Op op, ExPtr a) {
  if (op == Op::neg && is_int(a->dtype)) {
    if (auto v = int_value(*a)) return ex_lit(Literal{a->dtype, 0, wrap_int(-*v, a->dtype)});
  }
  Ex e;
  e.kind = ExKind::unary;
  e.op = op;
  e.dtype = a->dtype;
  e.args = {std::move(a)};
  return finish(std::move(e));
}

ExPtr ex_op2(Op op, ExPtr a, ExPtr b) {
  const DType r = result_dtype(op, a->dtype, b->dtype);
  const DType operand =
      (is_comparison(op) || is_logical(op))
          ? (a->dtype == b->dtype ? a->dtype : result_dtype(Op::add, a->dtype, b->dtype))
          : r;
  a = ex_convert(std::move(a), operand);
  b = ex_convert(std::move(b), operand);
  if (is_int(operand) && !is_comparison(op)) {
    auto x = int_value(*a), y = int_value(*b);
    if (x && y) {
      if (auto v = fold_int(op, *x, *y, operand)) return ex_lit(Literal{operand, 0, *v});
    }
    switch (op) {
      case Op::add:
        if (is_lit(a, 0)) return b;
        if (is_lit(b, 0)) return a;
        break;
      case Op::sub:
        if (is_lit(b, 0)) return a;
        break;
      case Op::mul:
        if (is_lit(a, 1)) return b;
        if (is_lit(b, 1)) return a;
        if (is_lit(a, 0) || is_lit(b, 0)) return ex_lit(Literal{operand, 0, 0});
        break;
      case Op::div:
        if (is_lit(b, 1)) return a;
        break;
      case Op::mod:
        if (is_lit(b, 1)) return ex_lit(Literal{operand, 0, 0});
        break;
      default:
        break;
    }
  }
  Ex e;
  e.kind = ExKind::binary;
  e.op = op;
  e.dtype = r;
  e.args = {std::move(a), std::move(b)};
  return finish(std::move(e));
}

ExPtr ex_select(ExPtr c, ExPtr a, ExPtr b, bool lazy) {
  c = ex_convert(std::move(c), DType::boolean);
  if (a->dtype != b->dtype) {
    const DType t = result_dtype(Op::add, a->dtype, b->dtype);
    a = ex_convert(std::move(a), t);
    b = ex_convert(std::move(b), t);
  }
  if (auto v = int_value(*c)) return *v ? a : b;
  if (a == b) return a;
  Ex e;
  e.kind = ExKind::where;
  e.dtype = a->dtype;
  e.lazy = lazy;
  e.args = {std::move(c), std::move(a), std::move(b)};
  return finish(std::move(e));
}

ExPtr ex_bound(ExPtr index, ExPtr extent, int site, bool wrap) {
  index = ex_convert(std::move(index), DType::i64);
  auto i = int_value(*index), n = int_value(*extent);
  if (i && n) {
    std::int64_t v = *i;
    if (wrap && v < 0) v += *n;
    if (v >= 0 && v < *n) return ex_int(v);
  }
  Ex e;
  e.kind = ExKind::bound;
  e.dtype = DType::i64;
  e.site = site;
  e.wrap = wrap;
  e.args = {std::move(index), std::move(extent)};
  return finish(std::move(e));
}

ExPtr rebuild(const Ex& e, std::vector<ExPtr> args) {
  switch (e.kind) {
    case ExKind::unary:
      return ex_op1(e.op, std::move(args[0]));
    case ExKind::binary:
      return ex_op2(e.op, std::move(args[0]), std::move(args[1]));
    case ExKind::where:
      return ex_select(std::move(args[0]), std::move(args[1]), std::move(args[2]), e.lazy);
    case ExKind::cast:
      return ex_convert(std::move(args[0]), e.dtype);
    case ExKind::bound:
      return ex_bound(std::move(args[0]), std::move(args[1]), e.site, e.wrap);
    default: {
      Ex c = e;
      c.args = std::move(args);
      return finish(std::move(c));
    }
  }
}

bool same(const ExPtr& a, const ExPtr& b) {
  if (a == b) return true;
  if (!a || !b || a->hash != b->hash) return false;
  if (a->kind != b->kind || a->dtype != b->dtype || a->op != b->op || a->var != b->var ||
      a->slot != b->slot || a->site != b->site || a->wrap != b->wrap || a->lazy != b->lazy ||
      a->array != b->array || a->lit.i != b->lit.i ||
      std::bit_cast<std::uint64_t>(a->lit.f) != std::bit_cast<std::uint64_t>(b->lit.f) ||
      a->args.size() != b->args.size()) {
    return false;
  }
  for (std::size_t k = 0; k < a->args.size(); ++k) {
    if (!same(a->args[k], b->args[k])) return false;
  }
  return true;
}

ExPtr substitute(const ExPtr& root, std::span<const ExPtr> vars) {
  std::unordered_map<const Ex*, ExPtr> memo;
  auto go = [&](auto& self, const ExPtr& e) -> ExPtr {
    if (auto it = memo.find(e.get()); it != memo.end()) return it->second;
    ExPtr out;
    if (e->kind == ExKind::var) {
      out = vars[static_cast<std::size_t>(e->var)];
    } else if (e->args.empty()) {
      out = e;
    } else {
      std::vector<ExPtr> args;
      bool changed = false;
      for (const auto& a : e->args) {
        args.push_back(self(self, a));
        changed = changed || args.back() != a;
      }
      out = changed ? rebuild(*e, std::move(args)) : e;
    }
    memo.emplace(e.get(), out);
    return out;
  };
  return go(go, root);
}

std::string to_text(const ExPtr& e) {
  std::ostringstream o;
  auto go = [&](auto& self, const ExPtr& x) -> void {
    switch (x->kind) {
      case ExKind::literal:
        if (is_float(x->dtype)) {
          o << x->lit.f;
        } else {
          o << x->lit.i;
        }
        return;
      case ExKind::var:
        o << 'i' << x->var;
        return;
      case ExKind::acc:
        o << "acc";
        return;
      case ExKind::load:
        if (x->array) {
          o << (x->array->kind == NodeKind::placeholder ? x->array->name
                                                        : "a" + std::to_string(x->array->uid));
        } else {
          o << '$' << x->slot;
        }
        o << '[';
        for (std::size_t k = 0; k < x->args.size(); ++k) {
          if (k) o << ',';
          self(self, x->args[k]);
        }
        o << ']';
        return;
      case ExKind::cast:
        o << to_string(x->dtype) << '(';
        self(self, x->args[0]);
        o << ')';
        return;
      case ExKind::bound:
        o << "bound(";
        self(self, x->args[0]);
        o << ',';
        self(self, x->args[1]);
        o << ')';
        return;
      default:
        o << (x->kind == ExKind::where ? "where" : op_symbol(x->op)) << '(';
        for (std::size_t k = 0; k < x->args.size(); ++k) {
          if (k) o << ',';
          self(self, x->args[k]);
        }
        o << ')';
        return;
    }
  };
  go(go, e);
  return o.str();
}

// ---- the public constructors of sluice/lazy.hpp ------------------------------------------------

ExPtr ex_index(int axis) {
  return ex_var(axis);
}
ExPtr ex_literal(Literal v) {
  return ex_lit(v);
}

ExPtr ex_unary(Op op, const ExPtr& a, std::source_location loc) {
  if (!is_unary(op)) {
    throw Error(Errc::invalid_argument,
                std::string("sluice::lazy: ") + op_symbol(op) + " is not a unary operation", loc);
  }
  return ex_op1(op, a);
}

ExPtr ex_binary(Op op, const ExPtr& a, const ExPtr& b, std::source_location loc) {
  try {
    return ex_op2(op, a, b);
  } catch (const Error& e) {
    throw Error(e.code(), e.what(), loc);
  }
}

ExPtr ex_where(const ExPtr& c, const ExPtr& a, const ExPtr& b, std::source_location loc) {
  try {
    return ex_select(c, a, b, false);
  } catch (const Error& e) {
    throw Error(e.code(), e.what(), loc);
  }
}

ExPtr ex_cast(const ExPtr& a, DType to) {
  return ex_convert(a, to);
}

ExPtr ex_access(const NodePtr& array, std::vector<ExPtr> indices, std::source_location loc) {
  if (!array) {
    throw Error(Errc::invalid_state, "sluice::lazy: access to an empty Array handle", loc);
  }
  if (indices.size() != array->shape.size()) {
    throw Error(Errc::invalid_argument,
                "sluice::lazy: access to " + op_name(*array) + " of shape " +
                    to_string(array->shape) + " with " + std::to_string(indices.size()) +
                    " indices; give one per axis",
                loc);
  }
  for (auto& i : indices) {
    if (!is_int(i->dtype)) {
      throw Error(Errc::invalid_argument,
                  "sluice::lazy: an index into " + op_name(*array) + " is " + to_string(i->dtype) +
                      "; indices are integers",
                  loc);
    }
    i = ex_convert(i, DType::i64);
  }
  Ex e;
  e.kind = ExKind::load;
  e.dtype = array->dtype;
  e.array = array;
  e.args = std::move(indices);
  return finish(std::move(e));
}

DType ex_dtype(const Ex& e) noexcept {
  return e.dtype;
}

}  // namespace sluice::lazy::detail
