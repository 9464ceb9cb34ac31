// The scalar compiler: hash-consing (common subexpressions), constant folding and rewrites,
// applied bottom-up as the expression tree adds its nodes, then emission of the nodes reachable
// from the root in dependency order.

#include <algorithm>
#include <array>
#include <atomic>
#include <complex>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "scalar/host_interpreter.hpp"
#include "scalar/interpreter_math.hpp"
#include "scalar/program.hpp"
#include "sluice/error.hpp"

namespace sluice::detail {

std::atomic<std::uint64_t> scalar_compiled{0};

namespace {

constexpr ScalarNode kNone = ~ScalarNode{0};

using scalar_math::is_unary;
bool is_complex(ScalarKind k) {
  return k == ScalarKind::c32 || k == ScalarKind::c64;
}
bool is_integer(ScalarKind k) {
  return k == ScalarKind::i32 || k == ScalarKind::i64;
}

template <class T>
ScalarValue value_of(const T& x) {
  return to_scalar_value(x);
}

/// `re + 0i` (or just `re`) in kind k.
ScalarValue make_value(ScalarKind k, double re, double im = 0.0) {
  switch (k) {
    case ScalarKind::i32:
      return value_of(static_cast<std::int32_t>(re));
    case ScalarKind::i64:
      return value_of(static_cast<std::int64_t>(re));
    case ScalarKind::f32:
      return value_of(static_cast<float>(re));
    case ScalarKind::f64:
      return value_of(re);
    case ScalarKind::c32:
      return value_of(std::complex<float>(static_cast<float>(re), static_cast<float>(im)));
    case ScalarKind::c64:
      return value_of(std::complex<double>(re, im));
  }
  return ScalarValue{};
}

bool same_bits(const ScalarValue& a, const ScalarValue& b) {
  return std::memcmp(a.bytes, b.bytes, sizeof a.bytes) == 0;
}

struct Node {
  ScalarOp op;
  ScalarKind kind;
  ScalarKind ka;
  ScalarKind kb;
  ScalarNode a;  // operand, or the constant / input index
  ScalarNode b;  // second operand or kNone
};

struct NodeKey {
  std::uint64_t head;  // op, kinds
  std::uint64_t operands;
  std::array<std::uint64_t, 2> value;  // constant bits or the cell's address
  bool operator==(const NodeKey&) const = default;
};

std::uint64_t hash_of(const NodeKey& k) noexcept {
  std::uint64_t h = k.head * 0x9E3779B97F4A7C15ull;
  h ^= k.operands + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h ^= k.value[0] + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h ^= k.value[1] + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h ^ (h >> 29);
}

/// Open addressing with linear probing: programs are small, so one flat allocation beats a node
/// per entry.
class NodeTable {
 public:
  NodeTable() : slots_(128) {}
  /// The node stored under `key`, or stores `fresh` there; `found` tells which.
  ScalarNode find_or_insert(const NodeKey& key, ScalarNode fresh, bool& found) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    Slot& s = probe(key);
    found = s.node != kNone;
    if (!found) {
      s = {key, fresh};
      ++size_;
    }
    return s.node;
  }

 private:
  struct Slot {
    NodeKey key{};
    ScalarNode node = kNone;
  };
  Slot& probe(const NodeKey& key) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash_of(key) & mask;; i = (i + 1) & mask) {
      if (slots_[i].node == kNone || slots_[i].key == key) return slots_[i];
    }
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old) {
      if (s.node != kNone) probe(s.key) = s;
    }
  }
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

std::uint64_t head_of(ScalarOp op, ScalarKind kind, ScalarKind ka, ScalarKind kb) {
  return static_cast<std::uint64_t>(op) | static_cast<std::uint64_t>(kind) << 8 |
         static_cast<std::uint64_t>(ka) << 16 | static_cast<std::uint64_t>(kb) << 24;
}

}  // namespace

struct ScalarBuilder::Impl {
  CompileOptions options;
  std::vector<Node> nodes;
  std::vector<ScalarValue> constants;  // by constant index
  std::vector<CellPtr> cells;          // by input index
  NodeTable table;
  std::unordered_map<const void*, ScalarNode> shared;
  ExpressionInfo info;

  ScalarNode intern(const Node& n, const NodeKey& key, bool& merged) {
    const ScalarNode id = table.find_or_insert(key, static_cast<ScalarNode>(nodes.size()), merged);
    if (!merged) nodes.push_back(n);
    return id;
  }

  ScalarNode intern_constant(ScalarKind kind, const ScalarValue& v, bool& merged) {
    NodeKey key{head_of(ScalarOp::constant, kind, kind, kind), 0, {}};
    std::memcpy(key.value.data(), v.bytes, sizeof v.bytes);
    const auto before = constants.size();
    const ScalarNode n =
        intern({ScalarOp::constant, kind, kind, kind, static_cast<ScalarNode>(before), kNone}, key,
               merged);
    if (!merged) constants.push_back(v);
    return n;
  }

  ScalarNode constant(ScalarKind kind, const ScalarValue& v) {
    bool merged = false;
    const ScalarNode n = intern_constant(kind, v, merged);
    if (merged) ++info.merged;
    return n;
  }

  [[nodiscard]] bool is_const(ScalarNode n) const { return nodes[n].op == ScalarOp::constant; }
  [[nodiscard]] const ScalarValue& value(ScalarNode n) const { return constants[nodes[n].a]; }
  [[nodiscard]] bool const_equals(ScalarNode n, const ScalarValue& v) const {
    return is_const(n) && same_bits(value(n), v);
  }
  /// The constant 1 of a real or integer kind (z * 1.0 with a real 1.0 is component-wise, so
  /// exact; z * (1 + 0i) is a full complex product and is not).
  [[nodiscard]] bool is_real_one(ScalarNode n) const {
    return is_const(n) && !is_complex(nodes[n].kind) &&
           same_bits(value(n), make_value(nodes[n].kind, 1.0));
  }
  /// All bits zero: integer 0, +0.0, +0 + 0i.
  [[nodiscard]] bool is_pos_zero(ScalarNode n) const { return const_equals(n, ScalarValue{}); }
  /// A constant that leaves every x unchanged when added: -0.0 (since +0.0 + -0.0 = +0.0), -0 - 0i,
  /// and integer 0.
  [[nodiscard]] bool is_additive_identity(ScalarNode n) const {
    const ScalarKind k = nodes[n].kind;
    if (is_integer(k)) return is_pos_zero(n);
    return const_equals(n, make_value(k, -0.0, -0.0));
  }
  [[nodiscard]] bool is_any_zero(ScalarNode n) const {
    return is_pos_zero(n) || const_equals(n, make_value(nodes[n].kind, -0.0, -0.0)) ||
           const_equals(n, make_value(nodes[n].kind, -0.0, 0.0)) ||
           const_equals(n, make_value(nodes[n].kind, 0.0, -0.0));
  }

  /// Rewrites that give the same value for every input, NaN, infinities and signed zeros
  /// included (docs/scalar.md lists them with the reason each is exact).
  ScalarNode exact_rewrite(ScalarOp op, ScalarKind kind, ScalarNode a, ScalarNode b) {
    auto keeps = [&](ScalarNode x) { return nodes[x].kind == kind ? x : kNone; };
    switch (op) {
      case ScalarOp::neg:   // -(-x) = x: negation flips the sign bit
      case ScalarOp::conj:  // conj(conj(z)) = z
        if (nodes[a].op == op) return nodes[a].a;
        break;
      case ScalarOp::mul:  // x * 1 = 1 * x = x (1 real or integer)
        if (is_real_one(b)) return keeps(a);
        if (is_real_one(a)) return keeps(b);
        if (is_integer(kind) && (is_pos_zero(a) || is_pos_zero(b))) {  // integers: x * 0 = 0
          bool merged = false;
          return intern_constant(kind, ScalarValue{}, merged);
        }
        break;
      case ScalarOp::div:  // x / 1 = x (1 real or integer)
        if (is_real_one(b)) return keeps(a);
        break;
      case ScalarOp::sub:  // x - (+0) = x, also for x = -0
        if (is_pos_zero(b)) return keeps(a);
        if (is_integer(kind) && a == b) {  // integers: x - x = 0
          bool merged = false;
          return intern_constant(kind, ScalarValue{}, merged);
        }
        break;
      case ScalarOp::add:  // x + (-0) = (-0) + x = x, also for x = +0; integers: x + 0 = x
        if (is_additive_identity(b)) return keeps(a);
        if (is_additive_identity(a)) return keeps(b);
        break;
      case ScalarOp::min:  // min(x, x) = max(x, x) = x
      case ScalarOp::max:
        if (a == b) return a;
        break;
      default:
        break;
    }
    return kNone;
  }

  /// Rewrites exact in real arithmetic only (CompileOptions::algebraic).
  ScalarNode algebraic_rewrite(ScalarOp op, ScalarKind kind, ScalarNode a, ScalarNode b) {
    auto keeps = [&](ScalarNode x) { return nodes[x].kind == kind ? x : kNone; };
    auto fresh = [&](double v) {
      bool merged = false;
      return intern_constant(kind, make_value(kind, v), merged);
    };
    const Node& na = nodes[a];
    switch (op) {
      case ScalarOp::add:
        if (is_any_zero(b)) return keeps(a);  // x + 0 = x
        if (is_any_zero(a)) return keeps(b);
        if (na.op == ScalarOp::sub && na.b == b) return keeps(na.a);  // (x - y) + y = x
        if (nodes[b].op == ScalarOp::sub && nodes[b].b == a) return keeps(nodes[b].a);
        break;
      case ScalarOp::sub:
        if (a == b) return fresh(0.0);                                // x - x = 0
        if (na.op == ScalarOp::add && na.b == b) return keeps(na.a);  // (x + y) - y = x
        if (na.op == ScalarOp::add && na.a == b) return keeps(na.b);  // (y + x) - y = x
        break;
      case ScalarOp::mul:
        if (is_any_zero(a) || is_any_zero(b)) return fresh(0.0);      // x * 0 = 0
        if (na.op == ScalarOp::div && na.b == b) return keeps(na.a);  // (x / y) * y = x
        if (nodes[b].op == ScalarOp::div && nodes[b].b == a) return keeps(nodes[b].a);
        if (a == b && na.op == ScalarOp::sqrt) return keeps(na.a);  // sqrt(x) * sqrt(x) = x
        break;
      case ScalarOp::div:
        if (a == b) return fresh(1.0);                                // x / x = 1
        if (na.op == ScalarOp::mul && na.b == b) return keeps(na.a);  // (x * y) / y = x
        if (na.op == ScalarOp::mul && na.a == b) return keeps(na.b);  // (y * x) / y = x
        break;
      case ScalarOp::exp:  // exp(log(x)) = x
        if (na.op == ScalarOp::log) return keeps(na.a);
        break;
      case ScalarOp::log:  // log(exp(x)) = x
        if (na.op == ScalarOp::exp) return keeps(na.a);
        break;
      default:
        break;
    }
    return kNone;
  }

  ScalarNode op(ScalarOp op, ScalarKind kind, ScalarNode a, ScalarNode b) {
    ++info.nodes;
    const bool unary = is_unary(op);
    if (unary) b = kNone;
    const ScalarKind ka = nodes[a].kind;
    const ScalarKind kb = unary ? ka : nodes[b].kind;
    if (is_const(a) && (unary || is_const(b))) {
      const ScalarInstr in{op, kind, ka, kb, 0, 0};
      const ScalarValue v = scalar_apply(in, value(a), unary ? ScalarValue{} : value(b));
      ++info.folded;
      bool merged = false;
      return intern_constant(kind, v, merged);
    }
    if (options.algebraic && !unary && ka == kb &&
        (op == ScalarOp::add || op == ScalarOp::mul || op == ScalarOp::min || op == ScalarOp::max ||
         op == ScalarOp::eq || op == ScalarOp::ne) &&
        b < a) {
      std::swap(a, b);  // commutative: one order, so that y + x merges with x + y
    }
    ScalarNode r = exact_rewrite(op, kind, a, b);
    if (r == kNone && options.algebraic) r = algebraic_rewrite(op, kind, a, b);
    if (r != kNone) {
      ++info.rewritten;
      return r;
    }
    bool merged = false;
    const NodeKey key{head_of(op, kind, ka, kb), static_cast<std::uint64_t>(a) << 32 | b, {}};
    const ScalarNode n = intern({op, kind, ka, kb, a, b}, key, merged);
    if (merged) ++info.merged;
    return n;
  }
};

ScalarBuilder::ScalarBuilder(const CompileOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  impl_->nodes.reserve(64);
  impl_->constants.reserve(16);
  impl_->cells.reserve(8);
}

ScalarBuilder::~ScalarBuilder() = default;

ScalarNode ScalarBuilder::constant(ScalarKind kind, const ScalarValue& value) {
  ++impl_->info.nodes;
  return impl_->constant(kind, value);
}

ScalarNode ScalarBuilder::load(const CellPtr& cell, ScalarKind kind) {
  if (!cell) {
    throw Error(Errc::invalid_state, "an expression uses a moved-from Managed<" +
                                         std::string(scalar_type_name(kind)) +
                                         ">; assign it a value before using it");
  }
  auto& I = *impl_;
  ++I.info.nodes;
  NodeKey key{head_of(ScalarOp::load, kind, kind, kind), 0, {}};
  key.value[0] = reinterpret_cast<std::uintptr_t>(cell.get());
  bool merged = false;
  const ScalarNode n =
      I.intern({ScalarOp::load, kind, kind, kind, static_cast<ScalarNode>(I.cells.size()), kNone},
               key, merged);
  if (merged) {
    ++I.info.merged;
  } else {
    I.cells.push_back(cell);
  }
  return n;
}

ScalarNode ScalarBuilder::op(ScalarOp op, ScalarKind kind, ScalarNode a, ScalarNode b) {
  return impl_->op(op, kind, a, b);
}

const ScalarNode* ScalarBuilder::find_shared(const void* key) {
  auto it = impl_->shared.find(key);
  if (it == impl_->shared.end()) return nullptr;
  ++impl_->info.merged;
  return &it->second;
}

void ScalarBuilder::remember_shared(const void* key, ScalarNode node) {
  impl_->shared.emplace(key, node);
}

ProgramPtr ScalarBuilder::finish(ScalarNode root) {
  auto& I = *impl_;
  // Post-order over the nodes reachable from the root: operands before their users.
  std::vector<ScalarNode> order;
  order.reserve(I.nodes.size());
  std::vector<std::int32_t> slot(I.nodes.size(), -1);
  std::vector<std::pair<ScalarNode, bool>> stack;
  stack.reserve(2 * I.nodes.size() + 1);
  stack.emplace_back(root, false);
  while (!stack.empty()) {
    auto [n, expanded] = stack.back();
    stack.pop_back();
    if (slot[n] >= 0) continue;
    const Node& node = I.nodes[n];
    const bool leaf = node.op == ScalarOp::constant || node.op == ScalarOp::load;
    if (expanded || leaf) {
      slot[n] = static_cast<std::int32_t>(order.size());
      order.push_back(n);
      continue;
    }
    stack.emplace_back(n, true);
    if (node.b != kNone && slot[node.b] < 0) stack.emplace_back(node.b, false);
    if (slot[node.a] < 0) stack.emplace_back(node.a, false);
  }

  auto program = std::make_shared<CompiledScalar>();
  program->code.reserve(order.size());
  program->constants.reserve(I.constants.size());
  program->inputs.reserve(I.cells.size());
  program->input_kinds.reserve(I.cells.size());
  std::vector<std::int32_t> constant_slot(I.constants.size(), -1);
  std::vector<std::int32_t> input_slot(I.cells.size(), -1);
  for (ScalarNode n : order) {
    const Node& node = I.nodes[n];
    ScalarInstr in{node.op, node.kind, node.ka, node.kb, 0, 0};
    if (node.op == ScalarOp::constant) {
      auto& s = constant_slot[node.a];
      if (s < 0) {
        s = static_cast<std::int32_t>(program->constants.size());
        program->constants.push_back(I.constants[node.a]);
      }
      in.a = static_cast<std::uint16_t>(s);
    } else if (node.op == ScalarOp::load) {
      auto& s = input_slot[node.a];
      if (s < 0) {
        s = static_cast<std::int32_t>(program->inputs.size());
        program->inputs.push_back(I.cells[node.a]);
        program->input_kinds.push_back(node.kind);
      }
      in.a = static_cast<std::uint16_t>(s);
    } else {
      in.a = static_cast<std::uint16_t>(slot[node.a]);
      in.b = static_cast<std::uint16_t>(node.b == kNone ? 0 : slot[node.b]);
    }
    program->code.push_back(in);
  }

  auto too_big = [](const char* what, std::size_t n, std::uint32_t limit) {
    throw Error(Errc::unsupported,
                "scalar expression too large: " + std::to_string(n) + " " + what +
                    " after optimization, at most " + std::to_string(limit) +
                    " fit one launch; split it into several evaluations (evaluate a part into a "
                    "Managed and use that in the rest)");
  };
  if (program->code.size() > kScalarMaxInstructions) {
    too_big("instructions", program->code.size(), kScalarMaxInstructions);
  }
  if (program->constants.size() > kScalarMaxConstants) {
    too_big("distinct constants", program->constants.size(), kScalarMaxConstants);
  }
  if (program->inputs.size() > kScalarMaxInputs) {
    too_big("distinct Managed inputs", program->inputs.size(), kScalarMaxInputs);
  }
  program->info = I.info;
  program->info.instructions = program->code.size();
  program->info.loads = program->inputs.size();
  program->info.constants = program->constants.size();
  scalar_compiled.fetch_add(1, std::memory_order_relaxed);
  return program;
}

}  // namespace sluice::detail
