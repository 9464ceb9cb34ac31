// The user's DAG: node constructors (sluice/lazy.hpp's detail::make_*), their names and their
// shape rules.

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <numeric>
#include <unordered_set>

#include "lazy/ir.hpp"
#include "lazy/shapes.hpp"
#include "sluice/error.hpp"

namespace sluice::lazy {

const char* to_string(DType t) noexcept {
  switch (t) {
    case DType::boolean:
      return "bool";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
  }
  return "?";
}

std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::boolean:
      return sizeof(bool);
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
  }
  return 0;
}

std::string to_string(const Shape& s) {
  std::string out = "(";
  for (std::size_t k = 0; k < s.size(); ++k) {
    if (k) out += ", ";
    out += std::to_string(s[k]);
  }
  if (s.size() == 1) out += ",";
  return out + ")";
}

std::int64_t numel(const Shape& s) noexcept {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

namespace detail {
namespace {

std::atomic<std::uint64_t> next_uid{1};

std::shared_ptr<Node> fresh(NodeKind kind, DType dtype, std::source_location where) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  n->dtype = dtype;
  n->where = where;
  n->uid = next_uid.fetch_add(1, std::memory_order_relaxed);
  return n;
}

void require(const NodePtr& n, const char* what, std::source_location where) {
  if (!n) {
    throw Error(Errc::invalid_state,
                std::string("sluice::lazy ") + what +
                    ": an operand is an empty Array handle (default-constructed or moved from)",
                where);
  }
}

void check_extents(const Shape& s, const std::string& what, std::source_location where) {
  for (auto d : s) {
    if (d < 0) shape_error(what, "negative extent in shape " + to_string(s), where);
  }
}

std::vector<Shape> shapes_of(const std::vector<NodePtr>& in) {
  std::vector<Shape> s;
  s.reserve(in.size());
  for (const auto& n : in) s.push_back(n->shape);
  return s;
}

/// Finishes a node: infers its shape from its operands (the constructor's check).
NodePtr done(std::shared_ptr<Node> n) {
  const auto in = shapes_of(n->in);
  n->shape = infer_shape(*n, in);
  return n;
}

}  // namespace

std::string op_name(const Node& n) {
  switch (n.kind) {
    case NodeKind::placeholder:
      return "placeholder '" + n.name + "'";
    case NodeKind::constant:
      return "constant";
    case NodeKind::fill:
      return "full";
    case NodeKind::unary:
    case NodeKind::binary:
      return op_symbol(n.op);
    case NodeKind::where:
      return "where";
    case NodeKind::cast:
      return std::string("cast to ") + to_string(n.dtype);
    case NodeKind::reduce: {
      static constexpr const char* names[] = {"sum", "prod", "min", "max"};
      return names[static_cast<int>(n.rop)];
    }
    case NodeKind::einsum:
      return "einsum '" + n.spec_text + "'";
    case NodeKind::take:
      return "take";
    case NodeKind::take_along_axis:
      return "take_along_axis";
    case NodeKind::index:
      return "index";
    case NodeKind::reshape:
      return "reshape";
    case NodeKind::transpose:
      return "transpose";
    case NodeKind::concatenate:
      return "concatenate";
    case NodeKind::stack:
      return "stack";
    case NodeKind::roll:
      return "roll";
    case NodeKind::broadcast_to:
      return "broadcast_to";
    case NodeKind::lambda:
      return "index_lambda";
  }
  return "?";
}

std::string op_where(const Node& n) {
  std::string s = op_name(n);
  if (n.where.line() != 0) {
    s += " (" + std::filesystem::path(n.where.file_name()).filename().string() + ":" +
         std::to_string(n.where.line()) + ")";
  }
  return s;
}

Shape infer_shape(const Node& n, std::span<const Shape> in) {
  const std::string what = op_name(n);
  const auto w = n.where;
  switch (n.kind) {
    case NodeKind::placeholder:
    case NodeKind::constant:
      return n.shape;
    case NodeKind::fill:
    case NodeKind::lambda:
      return n.target;
    case NodeKind::unary:
    case NodeKind::cast:
      return in[0];
    case NodeKind::binary:
    case NodeKind::where:
      return broadcast_shapes(in, what, w);
    case NodeKind::reduce: {
      const auto& s = in[0];
      std::vector<bool> reduced(s.size(), !n.axes.has_value());
      if (n.axes) {
        for (int a : *n.axes) {
          const int k = normalize_axis(a, s.size(), what, w);
          if (reduced[static_cast<std::size_t>(k)]) {
            shape_error(what, "axis " + std::to_string(a) + " is given twice", w);
          }
          reduced[static_cast<std::size_t>(k)] = true;
        }
      }
      Shape out;
      std::int64_t count = 1;
      for (std::size_t k = 0; k < s.size(); ++k) {
        if (!reduced[k]) {
          out.push_back(s[k]);
        } else {
          count *= s[k];
          if (n.keepdims) out.push_back(1);
        }
      }
      if (count == 0 && (n.rop == ReduceOp::min || n.rop == ReduceOp::max)) {
        shape_error(what,
                    "reduction of an empty axis of shape " + to_string(s) + " has no identity", w);
      }
      return out;
    }
    case NodeKind::einsum: {
      const auto ext = einsum_extents(n.spec, in, what, w);
      Shape out;
      for (char c : n.spec.output) out.push_back(ext[static_cast<std::size_t>(letter_index(c))]);
      return out;
    }
    case NodeKind::take: {
      const auto& a = in[0];
      const auto& idx = in[1];
      if (!n.axis) return idx;
      const auto k = static_cast<std::size_t>(normalize_axis(*n.axis, a.size(), what, w));
      if (a[k] == 0 && numel(idx) > 0) shape_error(what, "cannot take from an empty axis", w);
      Shape out(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(k));
      out.insert(out.end(), idx.begin(), idx.end());
      out.insert(out.end(), a.begin() + static_cast<std::ptrdiff_t>(k) + 1, a.end());
      return out;
    }
    case NodeKind::take_along_axis: {
      const auto& a = in[0];
      const auto& idx = in[1];
      if (a.size() != idx.size()) {
        shape_error(
            what,
            "the indices " + to_string(idx) + " must have the rank of the array " + to_string(a),
            w);
      }
      const auto k = static_cast<std::size_t>(normalize_axis(*n.axis, a.size(), what, w));
      Shape out(a.size());
      for (std::size_t d = 0; d < a.size(); ++d) {
        if (d == k) {
          out[d] = idx[d];
          continue;
        }
        if (a[d] != idx[d] && a[d] != 1 && idx[d] != 1) {
          shape_error(what,
                      "shapes " + to_string(a) + " and " + to_string(idx) +
                          " do not broadcast on axis " + std::to_string(d),
                      w);
        }
        out[d] = a[d] == 1 ? idx[d] : a[d];
      }
      return out;
    }
    case NodeKind::index: {
      std::vector<Shape> arrays(in.begin() + 1, in.end());
      return plan_index(in[0], n.items, arrays, what, w).out;
    }
    case NodeKind::reshape: {
      const auto total = numel(in[0]);
      Shape out = n.target;
      int unknown = -1;
      std::int64_t known = 1;
      for (std::size_t k = 0; k < out.size(); ++k) {
        if (out[k] == -1) {
          if (unknown >= 0) shape_error(what, "only one extent may be -1 in " + to_string(out), w);
          unknown = static_cast<int>(k);
        } else if (out[k] < 0) {
          shape_error(what, "negative extent in " + to_string(out), w);
        } else {
          known *= out[k];
        }
      }
      if (unknown >= 0) {
        if (known == 0 || total % known != 0) {
          shape_error(what, "cannot reshape " + to_string(in[0]) + " into " + to_string(n.target),
                      w);
        }
        out[static_cast<std::size_t>(unknown)] = total / known;
      }
      if (numel(out) != total) {
        shape_error(what,
                    "cannot reshape " + to_string(in[0]) + " (" + std::to_string(total) +
                        " elements) into " + to_string(out),
                    w);
      }
      return out;
    }
    case NodeKind::transpose: {
      const auto& a = in[0];
      std::vector<int> perm(a.size());
      if (n.axes) {
        if (n.axes->size() != a.size()) {
          shape_error(what,
                      "the permutation has " + std::to_string(n.axes->size()) +
                          " axes but the array " + to_string(a) + " has " +
                          std::to_string(a.size()),
                      w);
        }
        std::vector<bool> seen(a.size(), false);
        for (std::size_t k = 0; k < a.size(); ++k) {
          const int p = normalize_axis((*n.axes)[k], a.size(), what, w);
          if (seen[static_cast<std::size_t>(p)])
            shape_error(what, "axis repeated in permutation", w);
          seen[static_cast<std::size_t>(p)] = true;
          perm[k] = p;
        }
      } else {
        for (std::size_t k = 0; k < a.size(); ++k) perm[k] = static_cast<int>(a.size() - 1 - k);
      }
      Shape out(a.size());
      for (std::size_t k = 0; k < a.size(); ++k) out[k] = a[static_cast<std::size_t>(perm[k])];
      return out;
    }
    case NodeKind::concatenate: {
      if (in.empty()) shape_error(what, "needs at least one array", w);
      const auto& first = in[0];
      if (first.empty()) shape_error(what, "cannot concatenate rank-0 arrays", w);
      const auto k = static_cast<std::size_t>(normalize_axis(*n.axis, first.size(), what, w));
      Shape out = first;
      out[k] = 0;
      for (const auto& s : in) {
        bool ok = s.size() == first.size();
        for (std::size_t d = 0; ok && d < s.size(); ++d) ok = d == k || s[d] == first[d];
        if (!ok) {
          shape_error(what,
                      "shapes " + to_string(first) + " and " + to_string(s) +
                          " differ off the axis " + std::to_string(k),
                      w);
        }
        out[k] += s[k];
      }
      return out;
    }
    case NodeKind::stack: {
      if (in.empty()) shape_error(what, "needs at least one array", w);
      for (const auto& s : in) {
        if (s != in[0]) {
          shape_error(what, "shapes " + to_string(in[0]) + " and " + to_string(s) + " differ", w);
        }
      }
      const auto k = static_cast<std::size_t>(normalize_axis(*n.axis, in[0].size() + 1, what, w));
      Shape out = in[0];
      out.insert(out.begin() + static_cast<std::ptrdiff_t>(k),
                 static_cast<std::int64_t>(in.size()));
      return out;
    }
    case NodeKind::roll:
      if (n.axis) (void)normalize_axis(*n.axis, in[0].size(), what, w);
      return in[0];
    case NodeKind::broadcast_to: {
      const auto& a = in[0];
      const auto& t = n.target;
      bool ok = t.size() >= a.size();
      for (std::size_t k = 0; ok && k < a.size(); ++k) {
        const auto d = a[a.size() - 1 - k];
        ok = d == 1 || d == t[t.size() - 1 - k];
      }
      if (!ok) shape_error(what, "cannot broadcast " + to_string(a) + " to " + to_string(t), w);
      return t;
    }
  }
  return {};
}

NodePtr make_placeholder(std::string name, Shape shape, DType dtype, std::source_location loc) {
  const std::string what = "placeholder '" + name + "'";
  if (name.empty()) shape_error("placeholder", "the name is empty; name every input", loc);
  check_extents(shape, what, loc);
  auto n = fresh(NodeKind::placeholder, dtype, loc);
  n->name = std::move(name);
  n->shape = std::move(shape);
  return n;
}

NodePtr make_constant(std::shared_ptr<const void> owner, const void* data, ObjectId id,
                      std::size_t bytes, Shape shape, DType dtype, std::source_location loc) {
  if (!owner) shape_error("constant", "the buffer is null", loc);
  check_extents(shape, "constant", loc);
  if (static_cast<std::size_t>(numel(shape)) * dtype_size(dtype) != bytes) {
    shape_error("constant",
                "shape " + to_string(shape) + " needs " + std::to_string(numel(shape)) +
                    " elements but the buffer holds " + std::to_string(bytes / dtype_size(dtype)),
                loc);
  }
  auto n = fresh(NodeKind::constant, dtype, loc);
  n->owner = std::move(owner);
  n->data = data;
  n->id = id;
  n->bytes = bytes;
  n->shape = std::move(shape);
  return n;
}

NodePtr make_fill(Literal value, Shape shape, std::source_location loc) {
  check_extents(shape, "full", loc);
  auto n = fresh(NodeKind::fill, value.dtype, loc);
  n->lit = value;
  n->target = std::move(shape);
  return done(std::move(n));
}

NodePtr make_unary(Op op, const NodePtr& a, std::source_location loc) {
  require(a, op_symbol(op), loc);
  if (!is_unary(op)) shape_error(op_symbol(op), "not a unary operation", loc);
  auto n = fresh(NodeKind::unary, a->dtype, loc);
  n->op = op;
  n->in = {a};
  return done(std::move(n));
}

NodePtr make_binary(Op op, const NodePtr& a, const NodePtr& b, std::source_location loc) {
  require(a, op_symbol(op), loc);
  require(b, op_symbol(op), loc);
  DType t;
  try {
    t = result_dtype(op, a->dtype, b->dtype);
  } catch (const Error& e) {
    throw Error(e.code(), e.what(), loc);
  }
  auto n = fresh(NodeKind::binary, t, loc);
  n->op = op;
  n->in = {a, b};
  return done(std::move(n));
}

NodePtr make_binary_literal(Op op, const NodePtr& a, Literal b, bool literal_first,
                            std::source_location loc) {
  require(a, op_symbol(op), loc);
  auto f = make_fill(b, {}, loc);
  return literal_first ? make_binary(op, f, a, loc) : make_binary(op, a, f, loc);
}

NodePtr make_where(const NodePtr& c, const NodePtr& a, const NodePtr& b, std::source_location loc) {
  require(c, "where", loc);
  require(a, "where", loc);
  require(b, "where", loc);
  if (c->dtype != DType::boolean) {
    shape_error(
        "where",
        std::string("the condition is ") + to_string(c->dtype) + ", not bool (compare first)", loc);
  }
  DType t = a->dtype;
  if (a->dtype != b->dtype) {
    try {
      t = result_dtype(Op::add, a->dtype, b->dtype);
    } catch (const Error& e) {
      throw Error(e.code(), e.what(), loc);
    }
  }
  auto n = fresh(NodeKind::where, t, loc);
  n->in = {c, a, b};
  return done(std::move(n));
}

NodePtr make_cast(const NodePtr& a, DType to, std::source_location loc) {
  require(a, "cast", loc);
  if (a->dtype == to) return a;
  auto n = fresh(NodeKind::cast, to, loc);
  n->in = {a};
  return done(std::move(n));
}

NodePtr make_reduce(ReduceOp op, const NodePtr& a, std::optional<std::vector<int>> axes,
                    bool keepdims, std::source_location loc) {
  require(a, "reduction", loc);
  auto n = fresh(NodeKind::reduce, a->dtype, loc);
  n->rop = op;
  n->axes = std::move(axes);
  n->keepdims = keepdims;
  n->in = {a};
  return done(std::move(n));
}

NodePtr make_einsum(std::string_view spec, std::vector<NodePtr> operands,
                    std::source_location loc) {
  if (operands.empty()) shape_error("einsum", "needs at least one operand", loc);
  for (const auto& o : operands) require(o, "einsum", loc);
  auto n = fresh(NodeKind::einsum, operands[0]->dtype, loc);
  n->spec_text = std::string(spec);
  n->in = std::move(operands);
  n->spec = parse_einsum(spec, shapes_of(n->in), loc);
  return done(std::move(n));
}

NodePtr make_take(const NodePtr& a, const NodePtr& indices, std::optional<int> axis,
                  std::source_location loc) {
  require(a, "take", loc);
  require(indices, "take", loc);
  if (!axis) {
    // Of the flattened array.
    auto flat = make_reshape(a, {-1}, loc);
    auto n = fresh(NodeKind::take, a->dtype, loc);
    n->axis = 0;
    n->in = {flat, indices};
    return done(std::move(n));
  }
  auto n = fresh(NodeKind::take, a->dtype, loc);
  n->axis = axis;
  n->in = {a, indices};
  return done(std::move(n));
}

NodePtr make_take_along_axis(const NodePtr& a, const NodePtr& indices, int axis,
                             std::source_location loc) {
  require(a, "take_along_axis", loc);
  require(indices, "take_along_axis", loc);
  auto n = fresh(NodeKind::take_along_axis, a->dtype, loc);
  n->axis = axis;
  n->in = {a, indices};
  return done(std::move(n));
}

NodePtr make_index(const NodePtr& a, std::vector<IndexItem> items, std::source_location loc) {
  require(a, "index", loc);
  auto n = fresh(NodeKind::index, a->dtype, loc);
  n->in = {a};
  for (const auto& it : items) {
    if (it.kind == IndexItem::Kind::array) {
      require(it.array, "index", loc);
      n->in.push_back(it.array);
    }
  }
  n->items = std::move(items);
  return done(std::move(n));
}

NodePtr make_reshape(const NodePtr& a, Shape shape, std::source_location loc) {
  require(a, "reshape", loc);
  auto n = fresh(NodeKind::reshape, a->dtype, loc);
  n->target = std::move(shape);
  n->in = {a};
  return done(std::move(n));
}

NodePtr make_transpose(const NodePtr& a, std::optional<std::vector<int>> perm,
                       std::source_location loc) {
  require(a, "transpose", loc);
  auto n = fresh(NodeKind::transpose, a->dtype, loc);
  n->axes = std::move(perm);
  n->in = {a};
  return done(std::move(n));
}

NodePtr make_concatenate(std::vector<NodePtr> arrays, int axis, std::source_location loc) {
  for (const auto& a : arrays) require(a, "concatenate", loc);
  auto n = fresh(NodeKind::concatenate, arrays.empty() ? DType::f64 : arrays[0]->dtype, loc);
  for (const auto& a : arrays) {
    if (a->dtype != n->dtype) {
      shape_error("concatenate",
                  std::string("arrays of ") + to_string(n->dtype) + " and " + to_string(a->dtype) +
                      "; cast first",
                  loc);
    }
  }
  n->axis = axis;
  n->in = std::move(arrays);
  return done(std::move(n));
}

NodePtr make_stack(std::vector<NodePtr> arrays, int axis, std::source_location loc) {
  for (const auto& a : arrays) require(a, "stack", loc);
  auto n = fresh(NodeKind::stack, arrays.empty() ? DType::f64 : arrays[0]->dtype, loc);
  n->axis = axis;
  n->in = std::move(arrays);
  return done(std::move(n));
}

NodePtr make_roll(const NodePtr& a, std::int64_t shift, std::optional<int> axis,
                  std::source_location loc) {
  require(a, "roll", loc);
  if (!axis) {
    auto flat = make_reshape(a, {-1}, loc);
    auto r = make_roll(flat, shift, 0, loc);
    return make_reshape(r, a->shape, loc);
  }
  auto n = fresh(NodeKind::roll, a->dtype, loc);
  n->shift = shift;
  n->axis = axis;
  n->in = {a};
  return done(std::move(n));
}

NodePtr make_broadcast_to(const NodePtr& a, Shape shape, std::source_location loc) {
  require(a, "broadcast_to", loc);
  check_extents(shape, "broadcast_to", loc);
  auto n = fresh(NodeKind::broadcast_to, a->dtype, loc);
  n->target = std::move(shape);
  n->in = {a};
  return done(std::move(n));
}

NodePtr make_lambda(Shape shape, const ExPtr& body, std::source_location loc) {
  check_extents(shape, "index_lambda", loc);
  if (!body) shape_error("index_lambda", "the body is empty", loc);
  auto n = fresh(NodeKind::lambda, body->dtype, loc);
  n->target = std::move(shape);
  n->body = body;
  // The arrays it reads are its operands (in order of first appearance).
  std::vector<NodePtr> arrays;
  bool bad_var = false;
  std::unordered_set<const Ex*> seen;
  auto visit = [&](auto& self, const ExPtr& e) -> void {
    if (!seen.insert(e.get()).second) return;
    if (e->kind == ExKind::load && e->array &&
        std::find(arrays.begin(), arrays.end(), e->array) == arrays.end()) {
      arrays.push_back(e->array);
    }
    if (e->kind == ExKind::var && static_cast<std::size_t>(e->var) >= n->target.size()) {
      bad_var = true;
    }
    for (const auto& a : e->args) self(self, a);
  };
  visit(visit, body);
  if (bad_var) {
    shape_error(
        "index_lambda",
        "the body uses an index variable beyond the rank of the shape " + to_string(n->target),
        loc);
  }
  n->in = std::move(arrays);
  return done(std::move(n));
}

const Shape& node_shape(const Node& n) noexcept {
  return n.shape;
}
DType node_dtype(const Node& n) noexcept {
  return n.dtype;
}
const std::string& node_name(const Node& n) noexcept {
  return n.name;
}

}  // namespace detail
}  // namespace sluice::lazy
