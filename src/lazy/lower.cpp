// Lowering of the user's DAG into loads and element expressions (see lower.hpp).

#include "lazy/lower.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <unordered_map>

#include "lazy/shapes.hpp"
#include "sluice/error.hpp"

namespace sluice::lazy::detail {
namespace {

std::vector<ExPtr> out_vars(std::size_t rank) {
  std::vector<ExPtr> v;
  for (std::size_t k = 0; k < rank; ++k) v.push_back(ex_var(static_cast<int>(k)));
  return v;
}

class Lowerer {
 public:
  Lowerer(std::span<const NodePtr> order, std::span<const Shape> shapes, bool split,
          BroadcastSum broadcast_sum, bool tiles)
      : order_(order),
        shapes_(shapes),
        split_(split),
        broadcast_sum_(broadcast_sum),
        tiles_(tiles) {
    for (std::size_t i = 0; i < order.size(); ++i)
      index_.emplace(order[i].get(), static_cast<int>(i));
    out_.of_node.assign(order.size(), -1);
  }

  Lowered run() {
    for (std::size_t i = 0; i < order_.size(); ++i) {
      current_ = static_cast<int>(i);
      out_.of_node[i] = lower_one(*order_[i], shapes_[i]);
    }
    return std::move(out_);
  }

 private:
  int slot_of(const NodePtr& n) const {
    return out_.of_node[static_cast<std::size_t>(index_.at(n.get()))];
  }
  const Shape& shape_of(const NodePtr& n) const {
    return shapes_[static_cast<std::size_t>(index_.at(n.get()))];
  }
  ExPtr load(const NodePtr& n, std::vector<ExPtr> idx) const {
    return ex_load_slot(slot_of(n), n->dtype, std::move(idx));
  }
  /// n read at the output's index variables, broadcast (size-1 axes read at 0).
  ExPtr load_broadcast(const NodePtr& n, const Shape& out) const {
    const auto& s = shape_of(n);
    std::vector<ExPtr> idx;
    for (std::size_t k = 0; k < s.size(); ++k) {
      const auto aligned = k + out.size() - s.size();
      idx.push_back(s[k] == 1 ? ex_int(0) : ex_var(static_cast<int>(aligned)));
    }
    return load(n, std::move(idx));
  }
  int site(const std::string& what) {
    out_.sites.push_back(
        {current_, op_where(*order_[static_cast<std::size_t>(current_)]) + ", " + what});
    return static_cast<int>(out_.sites.size()) - 1;
  }
  int add(LNode n) {
    n.node = n.node == -2 ? -1 : current_;
    out_.nodes.push_back(std::move(n));
    return static_cast<int>(out_.nodes.size()) - 1;
  }
  int lambda(DType t, const Shape& s, ExPtr body) {
    LNode n;
    n.kind = LNode::Kind::lambda;
    n.dtype = t;
    n.shape = s;
    n.fill = body->kind == ExKind::literal;
    n.body = std::move(body);
    return add(std::move(n));
  }

  struct Operand {
    int slot;
    DType dtype;
    std::string letters;
    Shape shape;
  };
  /// The lowered node computing einsum(ops -> out) (a reduction, or a product without one).
  int einsum_node(DType t, const std::vector<Operand>& ops, const std::string& out,
                  const Shape& out_shape, const std::vector<std::int64_t>& ext) {
    std::vector<int> var_of(52, -1);
    for (std::size_t k = 0; k < out.size(); ++k) {
      var_of[static_cast<std::size_t>(letter_index(out[k]))] = static_cast<int>(k);
    }
    Shape red;
    for (const auto& o : ops) {
      for (char c : o.letters) {
        auto& v = var_of[static_cast<std::size_t>(letter_index(c))];
        // A summed letter of extent 1 is one term: no reduction variable (read at 0).
        if (v < 0 && ext[static_cast<std::size_t>(letter_index(c))] == 1) continue;
        if (v < 0) {
          v = static_cast<int>(out.size() + red.size());
          red.push_back(ext[static_cast<std::size_t>(letter_index(c))]);
        }
      }
    }
    ExPtr body;
    for (const auto& o : ops) {
      std::vector<ExPtr> idx;
      for (std::size_t a = 0; a < o.letters.size(); ++a) {
        const auto l = static_cast<std::size_t>(letter_index(o.letters[a]));
        idx.push_back((o.shape[a] == 1 && ext[l] != 1) || var_of[l] < 0 ? ex_int(0)
                                                                        : ex_var(var_of[l]));
      }
      ExPtr l = ex_load_slot(o.slot, o.dtype, std::move(idx));
      body = body ? ex_mul(body, l) : l;
    }
    if (red.empty()) return lambda(t, out_shape, body);
    return lower_reduce(t, out_shape, red, ReduceOp::sum, body);
  }
  /// The product of the extents of the distinct letters in `letters` (a loop nest's size).
  static double extent_product(const std::string& letters, const std::vector<std::int64_t>& ext) {
    double c = 1;
    std::string seen;
    for (char ch : letters) {
      if (seen.find(ch) != std::string::npos) continue;
      seen += ch;
      c *= static_cast<double>(ext[static_cast<std::size_t>(letter_index(ch))]);
    }
    return c;
  }

  /// Multiplications of contracting these operands in the best pairwise order (and the first
  /// pair of it), against one loop over all letters; nullopt when pairs do not pay.
  static std::optional<std::pair<std::size_t, std::size_t>> best_pair(
      const std::vector<Operand>& ops, const std::string& out,
      const std::vector<std::int64_t>& ext) {
    auto cost_of = [&](const std::string& letters) { return extent_product(letters, ext); };
    // The cheapest total over every order (few operands: exhaustive).
    std::function<double(const std::vector<std::string>&)> best =
        [&](const std::vector<std::string>& l) -> double {
      if (l.size() <= 2) {
        std::string all;
        for (const auto& x : l) all += x;
        return cost_of(all);
      }
      double b = 1e300;
      for (std::size_t x = 0; x < l.size(); ++x) {
        for (std::size_t y = x + 1; y < l.size(); ++y) {
          std::string needed = out, merged;
          for (std::size_t k = 0; k < l.size(); ++k) {
            if (k != x && k != y) needed += l[k];
          }
          for (char c : l[x] + l[y]) {
            if (needed.find(c) != std::string::npos && merged.find(c) == std::string::npos)
              merged += c;
          }
          std::vector<std::string> next;
          for (std::size_t k = 0; k < l.size(); ++k) {
            if (k != x && k != y) next.push_back(l[k]);
          }
          next.push_back(merged);
          b = std::min(b, cost_of(l[x] + l[y]) + best(next));
        }
      }
      return b;
    };
    if (ops.size() > 5) return std::nullopt;
    std::vector<std::string> letters;
    std::string all;
    for (const auto& o : ops) {
      letters.push_back(o.letters);
      all += o.letters;
    }
    const double naive = cost_of(all) * static_cast<double>(ops.size() - 1);
    double chosen = 1e300;
    std::optional<std::pair<std::size_t, std::size_t>> pick;
    for (std::size_t x = 0; x < ops.size(); ++x) {
      for (std::size_t y = x + 1; y < ops.size(); ++y) {
        std::string needed = out, merged;
        for (std::size_t k = 0; k < ops.size(); ++k) {
          if (k != x && k != y) needed += letters[k];
        }
        for (char c : letters[x] + letters[y]) {
          if (needed.find(c) != std::string::npos && merged.find(c) == std::string::npos)
            merged += c;
        }
        std::vector<std::string> next;
        for (std::size_t k = 0; k < ops.size(); ++k) {
          if (k != x && k != y) next.push_back(letters[k]);
        }
        next.push_back(merged);
        const double c = cost_of(letters[x] + letters[y]) + best(next);
        if (c < chosen) {
          chosen = c;
          pick = std::make_pair(x, y);
        }
      }
    }
    // Pairs cost an intermediate array: only when they save at least a third of the work.
    if (!pick || chosen > naive * 2.0 / 3.0) return std::nullopt;
    return pick;
  }
  /// The letters of the intermediate of contracting ops[x] and ops[y] (those still needed: the
  /// output's or another operand's), the output's last, in its order.
  static std::string merged_letters(const std::vector<Operand>& ops, std::size_t x, std::size_t y,
                                    const std::string& out) {
    std::string needed = out;
    for (std::size_t k = 0; k < ops.size(); ++k) {
      if (k != x && k != y) needed += ops[k].letters;
    }
    std::string letters;
    for (char c : ops[x].letters + ops[y].letters) {
      if (needed.find(c) != std::string::npos && letters.find(c) == std::string::npos &&
          out.find(c) == std::string::npos)
        letters += c;
    }
    for (char c : out) {
      if ((ops[x].letters + ops[y].letters).find(c) != std::string::npos) letters += c;
    }
    return letters;
  }
  /// The same letters with the output's first, in its order. For an intermediate without the
  /// output's last letter under register tiles (the DG divergence's Σx ijm·v): its last axis is
  /// then a summed letter, so the pair's kernel tiles along it (reading v along its contiguous
  /// axis), and the last contraction, tiled along the output's last letter, reads each element's
  /// values contiguously.
  static std::string output_first(const std::string& letters, const std::string& out) {
    std::string first, rest;
    for (char c : out) {
      if (letters.find(c) != std::string::npos) first += c;
    }
    for (char c : letters) {
      if (out.find(c) == std::string::npos) rest += c;
    }
    return first + rest;
  }
  /// Whether contracting a pair of `both` letters into `kept` ones sums a letter.
  static bool sums_a_letter(const std::string& both, const std::string& kept) {
    for (char c : both) {
      if (kept.find(c) == std::string::npos) return true;
    }
    return false;
  }
  /// Multiply-adds of contracting `ops` pairwise as lowering does (best_pair until it declines
  /// or a pair would sum nothing, then one loop), plus `per_byte` for each byte of an
  /// intermediate written and read.
  static double contraction_cost(std::vector<Operand> ops, const std::string& out,
                                 const std::vector<std::int64_t>& ext, std::size_t elem_bytes,
                                 double per_byte) {
    auto count = [&](const std::string& letters) { return extent_product(letters, ext); };
    double cost = 0;
    while (ops.size() > 2) {
      const auto step = best_pair(ops, out, ext);
      if (!step) break;
      const auto [x, y] = *step;
      const std::string both = ops[x].letters + ops[y].letters;
      const std::string letters = merged_letters(ops, x, y, out);
      if (!sums_a_letter(both, letters)) break;  // as lowering: one loop nest instead
      cost += count(both) + per_byte * 2.0 * count(letters) * static_cast<double>(elem_bytes);
      ops[x].letters = letters;
      ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(y));
    }
    std::string all;
    for (const auto& o : ops) all += o.letters;
    return cost + count(all);
  }

  int lower_one(const Node& n, const Shape& s);
  int lower_reduce(DType t, const Shape& out, const Shape& red, ReduceOp op, ExPtr body);
  ExPtr reshape_index(const NodePtr& a, const Shape& out);

  std::span<const NodePtr> order_;
  std::span<const Shape> shapes_;
  bool split_;
  BroadcastSum broadcast_sum_;
  bool tiles_;
  std::unordered_map<const Node*, int> index_;
  Lowered out_;
  int current_ = 0;
};

ExPtr Lowerer::reshape_index(const NodePtr& a, const Shape& out) {
  const Shape& in = shape_of(a);
  // Groups of axes with equal products in both shapes (size-1 axes left out): within a group,
  // the output's variables make a flat index that the input's axes take apart again.
  std::vector<std::size_t> ia, oa;
  for (std::size_t k = 0; k < in.size(); ++k) {
    if (in[k] != 1) ia.push_back(k);
  }
  for (std::size_t k = 0; k < out.size(); ++k) {
    if (out[k] != 1) oa.push_back(k);
  }
  std::vector<ExPtr> idx(in.size(), ex_int(0));
  if (numel(in) == 0) return load(a, std::move(idx));  // nothing is ever read
  std::size_t i = 0, j = 0;
  while (i < ia.size() && j < oa.size()) {
    std::size_t i1 = i + 1, j1 = j + 1;
    std::int64_t pi = in[ia[i]], pj = out[oa[j]];
    while (pi != pj) {
      if (pi < pj) {
        pi *= in[ia[i1++]];
      } else {
        pj *= out[oa[j1++]];
      }
    }
    if (i1 - i == 1 && j1 - j == 1) {
      idx[ia[i]] = ex_var(static_cast<int>(oa[j]));
    } else {
      ExPtr flat = ex_int(0);
      for (std::size_t q = j; q < j1; ++q) {
        flat = ex_add(ex_mul(flat, ex_int(out[oa[q]])), ex_var(static_cast<int>(oa[q])));
      }
      std::int64_t below = 1;
      for (std::size_t q = i1; q-- > i;) {
        ExPtr v = below == 1 ? flat : ex_op2(Op::div, flat, ex_int(below));
        if (q != i) v = ex_op2(Op::mod, v, ex_int(in[ia[q]]));
        idx[ia[q]] = v;
        below *= in[ia[q]];
      }
    }
    i = i1;
    j = j1;
  }
  return load(a, std::move(idx));
}

int Lowerer::lower_reduce(DType t, const Shape& out, const Shape& red, ReduceOp op, ExPtr body) {
  const std::int64_t O = numel(out), R = numel(red);
  if (split_ && R >= (1 << 15) && O <= 256 && !red.empty()) {
    // Stage 1: `chunks` partial results per output, each over `C` terms of the flattened
    // reduction (the last one shorter); stage 2 reduces the partials.
    const std::int64_t chunks = std::min<std::int64_t>((R + 4095) / 4096, 1024);
    const std::int64_t C = (R + chunks - 1) / chunks;
    const int ro = static_cast<int>(out.size());
    ExPtr rho = ex_add(ex_mul(ex_var(ro), ex_int(C)), ex_var(ro + 1));
    std::vector<ExPtr> vars = out_vars(out.size());
    std::int64_t below = R;
    for (std::size_t q = 0; q < red.size(); ++q) {
      below /= red[q];
      ExPtr v = below == 1 ? rho : ex_op2(Op::div, rho, ex_int(below));
      if (q != 0) v = ex_op2(Op::mod, v, ex_int(red[q]));
      vars.push_back(v);
    }
    ExPtr inner = substitute(body, vars);
    ExPtr valid = ex_op2(Op::lt, rho, ex_int(R));
    LNode s1;
    s1.kind = LNode::Kind::reduce;
    s1.dtype = t;
    s1.shape = out;
    s1.shape.push_back(chunks);
    s1.red = {C};
    s1.rop = op;
    s1.body = ex_select(valid, inner, reduce_identity(op, t), true);
    s1.node = -2;
    const int first = add(std::move(s1));
    std::vector<ExPtr> idx = out_vars(out.size());
    idx.push_back(ex_var(ro));
    LNode s2;
    s2.kind = LNode::Kind::reduce;
    s2.dtype = t;
    s2.shape = out;
    s2.red = {chunks};
    s2.rop = op;
    s2.body = ex_load_slot(first, t, std::move(idx));
    return add(std::move(s2));
  }
  LNode n;
  n.kind = LNode::Kind::reduce;
  n.dtype = t;
  n.shape = out;
  n.red = red;
  n.rop = op;
  n.body = std::move(body);
  return add(std::move(n));
}

int Lowerer::lower_one(const Node& n, const Shape& s) {
  const auto& in = n.in;
  switch (n.kind) {
    case NodeKind::placeholder:
    case NodeKind::constant: {
      LNode b;
      b.kind = LNode::Kind::buffer;
      b.dtype = n.dtype;
      b.shape = s;
      return add(std::move(b));
    }
    case NodeKind::fill:
      return lambda(n.dtype, s, ex_lit(n.lit));
    case NodeKind::unary:
      return lambda(n.dtype, s, ex_op1(n.op, load_broadcast(in[0], s)));
    case NodeKind::binary:
      return lambda(n.dtype, s, ex_op2(n.op, load_broadcast(in[0], s), load_broadcast(in[1], s)));
    case NodeKind::where:
      return lambda(
          n.dtype, s,
          ex_select(load_broadcast(in[0], s), load_broadcast(in[1], s), load_broadcast(in[2], s)));
    case NodeKind::cast:
      return lambda(n.dtype, s, ex_convert(load_broadcast(in[0], s), n.dtype));
    case NodeKind::broadcast_to:
      return lambda(n.dtype, s, load_broadcast(in[0], s));
    case NodeKind::reduce: {
      const Shape& a = shape_of(in[0]);
      std::vector<bool> reduced(a.size(), !n.axes.has_value());
      if (n.axes) {
        for (int ax : *n.axes) {
          reduced[static_cast<std::size_t>(ax < 0 ? ax + static_cast<int>(a.size()) : ax)] = true;
        }
      }
      Shape red;
      std::vector<ExPtr> idx;
      int out_axis = 0;
      for (std::size_t k = 0; k < a.size(); ++k) {
        if (reduced[k]) {
          idx.push_back(ex_var(static_cast<int>(s.size() + red.size())));
          red.push_back(a[k]);
          if (n.keepdims) ++out_axis;
        } else {
          idx.push_back(ex_var(out_axis++));
        }
      }
      return lower_reduce(n.dtype, s, red, n.rop, load(in[0], std::move(idx)));
    }
    case NodeKind::einsum: {
      std::vector<Shape> shapes;
      for (const auto& o : in) shapes.push_back(shape_of(o));
      auto ext = einsum_extents(n.spec, shapes, op_name(n), n.where);
      std::vector<Operand> ops;
      for (std::size_t k = 0; k < in.size(); ++k) {
        ops.push_back({slot_of(in[k]), in[k]->dtype, n.spec.inputs[k], shapes[k]});
      }
      // For the pairwise order, an operand's axis of extent 1 under a letter of larger extent (a
      // broadcast) is a letter of its own, of extent 1: the other operands may then sum that
      // letter before this one joins. The DG gradient's J dxi/dx is constant over the nodes j:
      // S·u is summed over j once (3·E·Np² terms), not once per direction (9·E·Np²).
      bool forced_early = false;  // Options::broadcast_sum said early and there was a broadcast
      if (ops.size() > 2) {
        auto renamed = ops;
        auto free_ext = ext;
        bool any = false;
        for (auto& o : renamed) {
          for (std::size_t a = 0; a < o.letters.size(); ++a) {
            const auto l = static_cast<std::size_t>(letter_index(o.letters[a]));
            if (o.shape[a] != 1 || free_ext[l] == 1) continue;
            const auto f = std::find(free_ext.begin(), free_ext.end(), std::int64_t{-1});
            if (f == free_ext.end()) break;  // all 52 letters taken
            *f = 1;
            const auto i = static_cast<int>(f - free_ext.begin());
            o.letters[a] = static_cast<char>(i < 26 ? 'a' + i : 'A' + (i - 26));
            any = true;
          }
        }
        // Early pays where the multiply-adds it saves exceed kPerByte per byte of the
        // intermediates it writes and reads (measured on an H100: the DG gradient was faster
        // late at p = 1, 2 (Np = 4, 10) and early at p = 3, 4 (Np = 20, 35); the model puts the
        // boundary at Np = 16).
        constexpr double kPerByte = 2.0;
        const auto bytes = dtype_size(n.dtype);
        const bool early = any && broadcast_sum_ != BroadcastSum::late &&
                           best_pair(renamed, n.spec.output, free_ext) &&
                           (broadcast_sum_ == BroadcastSum::early ||
                            contraction_cost(renamed, n.spec.output, free_ext, bytes, kPerByte) <
                                contraction_cost(ops, n.spec.output, ext, bytes, kPerByte));
        forced_early = early && broadcast_sum_ == BroadcastSum::early;
        if (early) {
          ops = std::move(renamed);
          ext = std::move(free_ext);
        }
      }
      // With register tiles (fuse.hpp), the one loop nest of an einsum tiled along its output's
      // last letter does about one multiply-add per term (the factors without that letter
      // multiply once per tile): pairs are made only where they cost less than that, the
      // intermediates' bytes counted as for broadcasts (the DG divergence at p = 1, 2: one
      // kernel instead of a 3·E·Np intermediate written and read).
      bool pairs = true;
      if (tiles_ && !forced_early && ops.size() > 2 && tile_width(s, n.dtype) > 1) {
        const char last = n.spec.output.back();
        std::string all;
        bool shared = false;
        for (const auto& o : ops) {
          all += o.letters;
          shared = shared || o.letters.find(last) == std::string::npos;
        }
        pairs = !shared || contraction_cost(ops, n.spec.output, ext, dtype_size(n.dtype), 2.0) <
                               extent_product(all, ext);
      }
      // Three or more operands: contract them pairwise in the order that needs the fewest
      // multiplications, when that beats one loop over every letter (NumPy's optimize=True).
      while (pairs && ops.size() > 2) {
        const auto step = best_pair(ops, n.spec.output, ext);
        if (!step) break;
        const auto [x, y] = *step;
        // The intermediate's axes: letters the output lacks, then the output's in its order, so
        // that the last contraction reads it along the output's contiguous axis.
        std::string letters = merged_letters(ops, x, y, n.spec.output);
        if (tiles_ && letters.find(n.spec.output.back()) == std::string::npos)
          letters = output_first(letters, n.spec.output);
        // A pair that sums nothing is a product as large as both operands together: the one
        // loop nest computes it in registers, its factors at the loop they depend on.
        if (!sums_a_letter(ops[x].letters + ops[y].letters, letters)) break;
        Shape shape;
        for (char c : letters) shape.push_back(ext[static_cast<std::size_t>(letter_index(c))]);
        const int slot = einsum_node(n.dtype, {ops[x], ops[y]}, letters, shape, ext);
        Operand merged{slot, n.dtype, letters, shape};
        ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(y));
        ops[x] = merged;
      }
      return einsum_node(n.dtype, ops, n.spec.output, s, ext);
    }
    case NodeKind::take: {
      const Shape& a = shape_of(in[0]);
      const Shape& ix = shape_of(in[1]);
      const auto k =
          static_cast<std::size_t>(*n.axis < 0 ? *n.axis + static_cast<int>(a.size()) : *n.axis);
      std::vector<ExPtr> iidx;
      for (std::size_t q = 0; q < ix.size(); ++q) iidx.push_back(ex_var(static_cast<int>(k + q)));
      std::vector<ExPtr> idx;
      for (std::size_t q = 0; q < k; ++q) idx.push_back(ex_var(static_cast<int>(q)));
      idx.push_back(
          ex_bound(load(in[1], std::move(iidx)), ex_int(a[k]),
                   site("axis " + std::to_string(k) + " of extent " + std::to_string(a[k])), true));
      for (std::size_t q = k + 1; q < a.size(); ++q) {
        idx.push_back(ex_var(static_cast<int>(q - 1 + ix.size())));
      }
      return lambda(n.dtype, s, load(in[0], std::move(idx)));
    }
    case NodeKind::take_along_axis: {
      const Shape& a = shape_of(in[0]);
      const auto k =
          static_cast<std::size_t>(*n.axis < 0 ? *n.axis + static_cast<int>(a.size()) : *n.axis);
      std::vector<ExPtr> idx;
      for (std::size_t q = 0; q < a.size(); ++q) {
        if (q == k) {
          idx.push_back(ex_bound(
              load_broadcast(in[1], s), ex_int(a[k]),
              site("axis " + std::to_string(k) + " of extent " + std::to_string(a[k])), true));
        } else {
          idx.push_back(a[q] == 1 ? ex_int(0) : ex_var(static_cast<int>(q)));
        }
      }
      return lambda(n.dtype, s, load(in[0], std::move(idx)));
    }
    case NodeKind::index: {
      const Shape& a = shape_of(in[0]);
      std::vector<Shape> arrays;
      for (std::size_t q = 1; q < in.size(); ++q) arrays.push_back(shape_of(in[q]));
      const auto plan = plan_index(a, n.items, arrays, op_name(n), n.where);
      std::vector<ExPtr> idx;
      for (std::size_t q = 0; q < a.size(); ++q) {
        const auto& ax = plan.axes[q];
        switch (ax.kind) {
          case IndexPlan::Axis::Kind::slice:
            idx.push_back(
                ex_add(ex_int(ax.slice.start), ex_mul(ex_int(ax.slice.step), ex_var(ax.out_axis))));
            break;
          case IndexPlan::Axis::Kind::integer:
            idx.push_back(ex_int(ax.value));
            break;
          case IndexPlan::Axis::Kind::advanced: {
            if (ax.array < 0) {
              idx.push_back(ex_int(ax.value));
              break;
            }
            const auto& arr = in[static_cast<std::size_t>(ax.array) + 1];
            const Shape& as = shape_of(arr);
            std::vector<ExPtr> aidx;
            for (std::size_t d = 0; d < as.size(); ++d) {
              const auto aligned = d + plan.advanced.size() - as.size();
              aidx.push_back(as[d] == 1 ? ex_int(0)
                                        : ex_var(plan.advanced_first + static_cast<int>(aligned)));
            }
            idx.push_back(ex_bound(
                load(arr, std::move(aidx)), ex_int(a[q]),
                site("axis " + std::to_string(q) + " of extent " + std::to_string(a[q])), true));
            break;
          }
        }
      }
      return lambda(n.dtype, s, load(in[0], std::move(idx)));
    }
    case NodeKind::reshape:
      return lambda(n.dtype, s, reshape_index(in[0], s));
    case NodeKind::transpose: {
      const Shape& a = shape_of(in[0]);
      std::vector<ExPtr> idx(a.size());
      for (std::size_t k = 0; k < a.size(); ++k) {
        const int p = n.axes ? (*n.axes)[k] : static_cast<int>(a.size() - 1 - k);
        idx[static_cast<std::size_t>(p < 0 ? p + static_cast<int>(a.size()) : p)] =
            ex_var(static_cast<int>(k));
      }
      return lambda(n.dtype, s, load(in[0], std::move(idx)));
    }
    case NodeKind::concatenate: {
      const auto k =
          static_cast<std::size_t>(*n.axis < 0 ? *n.axis + static_cast<int>(s.size()) : *n.axis);
      const ExPtr v = ex_var(static_cast<int>(k));
      ExPtr body;
      std::int64_t end = s[k];
      for (std::size_t q = in.size(); q-- > 0;) {
        const Shape& a = shape_of(in[q]);
        const std::int64_t begin = end - a[k];
        if (a[k] != 0) {
          std::vector<ExPtr> idx = out_vars(s.size());
          idx[k] = ex_sub(v, ex_int(begin));
          ExPtr l = load(in[q], std::move(idx));
          body = body ? ex_select(ex_op2(Op::lt, v, ex_int(end)), l, body, true) : l;
        }
        end = begin;
      }
      if (!body) body = ex_lit(Literal{n.dtype, 0, 0});
      return lambda(n.dtype, s, body);
    }
    case NodeKind::stack: {
      const auto k =
          static_cast<std::size_t>(*n.axis < 0 ? *n.axis + static_cast<int>(s.size()) : *n.axis);
      const ExPtr v = ex_var(static_cast<int>(k));
      std::vector<ExPtr> idx;
      for (std::size_t q = 0; q < s.size(); ++q) {
        if (q != k) idx.push_back(ex_var(static_cast<int>(q)));
      }
      ExPtr body = load(in.back(), idx);
      const bool lazy = in.size() > 4;
      for (std::size_t q = in.size() - 1; q-- > 0;) {
        body = ex_select(ex_op2(Op::eq, v, ex_int(static_cast<std::int64_t>(q))), load(in[q], idx),
                         body, lazy);
      }
      return lambda(n.dtype, s, body);
    }
    case NodeKind::roll: {
      const auto k =
          static_cast<std::size_t>(*n.axis < 0 ? *n.axis + static_cast<int>(s.size()) : *n.axis);
      const std::int64_t ext = s[k];
      std::vector<ExPtr> idx = out_vars(s.size());
      if (ext > 0) {
        const std::int64_t sh = ((n.shift % ext) + ext) % ext;
        if (sh != 0) {
          const ExPtr v = idx[k];
          idx[k] = ex_select(ex_op2(Op::lt, v, ex_int(sh)), ex_add(v, ex_int(ext - sh)),
                             ex_sub(v, ex_int(sh)));
        }
      }
      return lambda(n.dtype, s, load(in[0], std::move(idx)));
    }
    case NodeKind::lambda: {
      // The user's loads read arrays by node: they become loads of lowered nodes, each index
      // checked against the extent it indexes.
      ExPtr body = rewrite_loads(n.body, [&](const Ex& l, const std::vector<ExPtr>& args) {
        const Shape& as = shape_of(l.array);
        if (as.size() != args.size()) {
          shape_error(op_name(n),
                      "reads " + op_name(*l.array) + " of shape " + to_string(as) + " with " +
                          std::to_string(args.size()) + " indices",
                      n.where);
        }
        std::vector<ExPtr> idx;
        for (std::size_t d = 0; d < args.size(); ++d) {
          // The lambda's own variable over an extent that fits needs no check.
          const auto& a = args[d];
          if (a->kind == ExKind::var && static_cast<std::size_t>(a->var) < s.size() &&
              s[static_cast<std::size_t>(a->var)] <= as[d]) {
            idx.push_back(a);
            continue;
          }
          idx.push_back(ex_bound(args[d], ex_int(as[d]),
                                 site("index " + std::to_string(d) + " into " + op_name(*l.array) +
                                      " of extent " + std::to_string(as[d])),
                                 false));
        }
        return load(l.array, std::move(idx));
      });
      return lambda(n.dtype, s, body);
    }
  }
  throw Error(Errc::invalid_state, "sluice::lazy internal error: unknown node kind in lowering");
}

}  // namespace

ExPtr reduce_identity(ReduceOp op, DType t) {
  Literal l{t, 0, 0};
  switch (op) {
    case ReduceOp::sum:
      break;
    case ReduceOp::prod:
      l.f = 1;
      l.i = 1;
      break;
    case ReduceOp::min:
      l.f = std::numeric_limits<double>::infinity();
      l.i = t == DType::i32 ? std::numeric_limits<std::int32_t>::max()
                            : std::numeric_limits<std::int64_t>::max();
      break;
    case ReduceOp::max:
      l.f = -std::numeric_limits<double>::infinity();
      l.i = t == DType::i32 ? std::numeric_limits<std::int32_t>::min()
                            : std::numeric_limits<std::int64_t>::min();
      break;
  }
  return ex_lit(l);
}

int tile_width(const Shape& shape, DType t) {
  if (shape.empty() || t == DType::boolean) return 1;
  const std::int64_t last = shape.back();
  if (last < 2 || last > 64) return 1;
  const std::int64_t chunks = (last + 7) / 8;
  return static_cast<int>((last + chunks - 1) / chunks);
}

Lowered lower(std::span<const NodePtr> order, std::span<const Shape> shapes, bool split_reductions,
              BroadcastSum broadcast_sum, bool tiles) {
  return Lowerer(order, shapes, split_reductions, broadcast_sum, tiles).run();
}

}  // namespace sluice::lazy::detail
