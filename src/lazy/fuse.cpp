// Fusion decisions and kernel formation (see fuse.hpp).

#include "lazy/fuse.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace sluice::lazy::detail {
namespace {

/// What inlining a node costs per evaluation beyond the load it replaces: value arithmetic and
/// extra loads weigh 1 (transcendentals 4), index arithmetic a quarter.
double cost_of(const ExPtr& body) {
  double c = -1;
  std::unordered_set<const Ex*> seen;
  auto go = [&](auto& self, const Ex* e) -> void {
    if (!seen.insert(e).second) return;
    switch (e->kind) {
      case ExKind::load:
        c += 1;
        break;
      case ExKind::unary:
        c += (e->op == Op::exp || e->op == Op::log || e->op == Op::sin || e->op == Op::cos ||
              e->op == Op::tan || e->op == Op::tanh || e->op == Op::sqrt)
                 ? 4
                 : (is_int(e->dtype) ? 0.25 : 1);
        break;
      case ExKind::binary:
        c += is_int(e->dtype) ? 0.25 : (e->op == Op::pow ? 8 : 1);
        break;
      case ExKind::where:
      case ExKind::bound:
        c += 0.5;
        break;
      case ExKind::cast:
        c += 0.25;
        break;
      default:
        break;
    }
    for (const auto& a : e->args) self(self, a.get());
  };
  go(go, body.get());
  return std::max(c, 0.0);
}

/// Loads of each lowered node in `body` (distinct load expressions).
void count_loads(const ExPtr& body, std::map<int, int>& counts) {
  for_each_load(body, [&](const Ex& l) { ++counts[l.slot]; });
}

double evaluations(const LNode& n) {
  double e = static_cast<double>(numel(n.shape));
  if (n.kind == LNode::Kind::reduce) e *= static_cast<double>(numel(n.red));
  return e;
}

std::vector<std::int64_t> strides(const Shape& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (std::size_t k = s.size(); k-- > 1;) st[k - 1] = st[k] * s[k];
  return st;
}

/// The BLAS form of reduction kernel `k` (sum of A * B over one variable), if it has one and
/// `rule` takes it.
bool plan_gemm(Kernel& k, const Lowered& L, const GemmRule& rule) {
  if (!rule || k.kind != Kernel::Kind::reduce || k.epilogue || k.rop != ReduceOp::sum ||
      !is_float(k.dtype) || k.red.size() != 1 || k.body->kind != ExKind::binary ||
      k.body->op != Op::mul) {
    return false;
  }
  const Ex& la = *k.body->args[0];
  const Ex& lb = *k.body->args[1];
  if (la.kind != ExKind::load || lb.kind != ExKind::load || la.slot == lb.slot) return false;
  const int rank = static_cast<int>(k.shape.size());
  const int kvar = rank;
  // For each operand: the stride of each variable it is indexed by (-1: not indexed by it).
  auto stride_map = [&](const Ex& l, std::vector<std::int64_t>& st) {
    const auto& shape = L.nodes[static_cast<std::size_t>(l.slot)].shape;
    const auto s = strides(shape);
    st.assign(static_cast<std::size_t>(rank + 1), -1);
    for (std::size_t d = 0; d < l.args.size(); ++d) {
      const Ex& a = *l.args[d];
      if (a.kind == ExKind::literal && a.lit.i == 0 && shape[d] == 1) continue;
      if (a.kind != ExKind::var) return false;
      auto& slot = st[static_cast<std::size_t>(a.var)];
      if (slot >= 0) return false;  // a diagonal
      slot = s[d];
    }
    return true;
  };
  std::vector<std::int64_t> sa, sb;
  if (!stride_map(la, sa) || !stride_map(lb, sb)) return false;
  if (sa[static_cast<std::size_t>(kvar)] < 0 || sb[static_cast<std::size_t>(kvar)] < 0)
    return false;
  const auto sc = strides(k.shape);
  int bvar = -1, mvar = -1, nvar = -1;
  for (int v = 0; v < rank; ++v) {
    const bool in_a = sa[static_cast<std::size_t>(v)] >= 0,
               in_b = sb[static_cast<std::size_t>(v)] >= 0;
    int* which = in_a && in_b ? &bvar : in_a ? &mvar : in_b ? &nvar : nullptr;
    if (which == nullptr) {
      if (k.shape[static_cast<std::size_t>(v)] == 1) continue;
      return false;  // an output axis neither operand has: a broadcast
    }
    if (*which >= 0) return false;
    *which = v;
  }
  auto ext = [&](int v) { return v < 0 ? std::int64_t{1} : k.shape[static_cast<std::size_t>(v)]; };
  auto st = [](const std::vector<std::int64_t>& s, int v) {
    return v < 0 ? std::int64_t{0} : s[static_cast<std::size_t>(v)];
  };
  GemmPlan g;
  g.a = la.slot;
  g.b = lb.slot;
  std::int64_t sam = st(sa, mvar), sak = sa[static_cast<std::size_t>(kvar)];
  std::int64_t sbn = st(sb, nvar), sbk = sb[static_cast<std::size_t>(kvar)];
  std::int64_t scm = st(sc, mvar), scn = st(sc, nvar);
  g.m = ext(mvar);
  g.n = ext(nvar);
  g.k = k.red[0];
  // Column-major C needs unit stride along m; otherwise compute C^T = B^T A^T.
  if (!(g.m == 1 || scm == 1)) {
    std::swap(g.a, g.b);
    std::swap(g.m, g.n);
    std::swap(sam, sbn);
    std::swap(sak, sbk);
    std::swap(scm, scn);
  }
  if (!(g.m == 1 || scm == 1)) return false;
  g.ldc = std::max<std::int64_t>(g.n == 1 ? g.m : scn, std::max<std::int64_t>(1, g.m));
  if (g.n > 1 && scn < g.m) return false;
  // A (m x k): unit stride along m (no transpose) or along k (transpose).
  if (g.m == 1 || sam == 1) {
    g.trans_a = false;
    g.lda = g.k == 1 ? std::max<std::int64_t>(1, g.m) : sak;
    if (g.lda < std::max<std::int64_t>(1, g.m)) return false;
  } else if (sak == 1 || g.k == 1) {
    g.trans_a = true;
    g.lda = sam;
    if (g.lda < std::max<std::int64_t>(1, g.k)) return false;
  } else {
    return false;
  }
  // B (k x n): unit stride along k (no transpose) or along n (transpose).
  if (sbk == 1 || g.k == 1) {
    g.trans_b = false;
    g.ldb = g.n == 1 ? std::max<std::int64_t>(1, g.k) : sbn;
    if (g.ldb < std::max<std::int64_t>(1, g.k)) return false;
  } else if (g.n == 1 || sbn == 1) {
    g.trans_b = true;
    g.ldb = sbk;
    if (g.ldb < std::max<std::int64_t>(1, g.n)) return false;
  } else {
    return false;
  }
  if (bvar >= 0) {
    g.batch = ext(bvar);
    // After a swap, A and B exchanged their roles: take each buffer's own batch stride.
    g.stride_a =
        g.a == la.slot ? sa[static_cast<std::size_t>(bvar)] : sb[static_cast<std::size_t>(bvar)];
    g.stride_b =
        g.b == lb.slot ? sb[static_cast<std::size_t>(bvar)] : sa[static_cast<std::size_t>(bvar)];
    g.stride_c = sc[static_cast<std::size_t>(bvar)];
  }
  const std::int64_t limit = std::int64_t{1} << 31;
  for (auto v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch}) {
    if (v >= limit) return false;
  }
  if (g.m == 0 || g.n == 0 || !rule(g)) return false;
  k.kind = Kernel::Kind::gemm;
  k.gemm = g;
  return true;
}

/// Whether expression `e` refers to variable `var`.
bool uses_var(const ExPtr& e, int var) {
  std::unordered_set<const Ex*> seen;
  std::vector<const Ex*> stack{e.get()};
  while (!stack.empty()) {
    const Ex* x = stack.back();
    stack.pop_back();
    if (x == nullptr || !seen.insert(x).second) continue;
    if (x->kind == ExKind::var && x->var == var) return true;
    for (const auto& a : x->args) stack.push_back(a.get());
  }
  return false;
}

/// Whether reduction `n`'s loads of `slot` all ignore its last output variable (each value
/// loaded once per tile), where `slot` is given; without it, whether some load does (something
/// for a tile to share).
bool tile_shares(const LNode& n, int slot) {
  const int last = static_cast<int>(n.shape.size()) - 1;
  bool all = true, any = false;
  for_each_load(n.body, [&](const Ex& l) {
    if (slot >= 0 && l.slot != slot) return;
    bool uses = false;
    for (const auto& a : l.args) uses = uses || uses_var(a, last);
    all = all && !uses;
    any = any || !uses;
  });
  return slot >= 0 ? all : any;
}

}  // namespace

std::vector<int> kernel_reads(const Kernel& k) {
  std::vector<int> r;
  auto add = [&](const ExPtr& e) {
    if (!e) return;
    for_each_load(e, [&](const Ex& l) {
      if (std::find(r.begin(), r.end(), l.slot) == r.end()) r.push_back(l.slot);
    });
  };
  add(k.body);
  add(k.epilogue);
  for (const auto& sib : k.siblings) add(sib.body);
  return r;
}

Fused fuse(const Lowered& L, const std::vector<bool>& outputs, Fusion mode, const GemmRule& gemm,
           bool tile) {
  const std::size_t count = L.nodes.size();
  Fused f;
  f.materialized.assign(count, false);
  // The tile of each reduction node (1: none).
  std::vector<int> tiles(count, 1);
  if (tile) {
    for (std::size_t k = 0; k < count; ++k) {
      const LNode& n = L.nodes[k];
      if (n.kind != LNode::Kind::reduce || !n.body || numel(n.shape) <= 0) continue;
      const int w = tile_width(n.shape, n.dtype);
      if (w > 1 && tile_shares(n, -1)) tiles[k] = w;
    }
  }

  // Readers of each node and how many distinct loads each makes.
  std::vector<std::map<int, int>> loads(count);  // per reader: slot -> loads
  std::vector<std::vector<int>> readers(count);
  for (std::size_t c = 0; c < count; ++c) {
    if (L.nodes[c].body) count_loads(L.nodes[c].body, loads[c]);
    for (const auto& [slot, n] : loads[c])
      readers[static_cast<std::size_t>(slot)].push_back(static_cast<int>(c));
  }

  // Decide from the last node back: readers are decided before what they read.
  std::vector<double> evals(count, 0);
  for (std::size_t k = count; k-- > 0;) {
    const LNode& n = L.nodes[k];
    bool keep = true;
    if (n.kind == LNode::Kind::lambda && !outputs[k]) {
      if (n.fill) {
        keep = false;
      } else if (mode != Fusion::none && !readers[k].empty()) {
        bool into_reduce = false;
        double uses = 0;
        for (int c : readers[k]) {
          const LNode& r = L.nodes[static_cast<std::size_t>(c)];
          into_reduce = into_reduce || r.kind == LNode::Kind::reduce;
          // A tiled reduction loads what ignores its last output axis once per tile.
          const int per = tiles[static_cast<std::size_t>(c)];
          const double shared = per > 1 && tile_shares(r, static_cast<int>(k)) ? per : 1.0;
          uses += evals[static_cast<std::size_t>(c)] *
                  loads[static_cast<std::size_t>(c)].at(static_cast<int>(k)) / shared;
        }
        const double size = std::max<double>(1.0, static_cast<double>(numel(n.shape)));
        const double reuse = uses / size;
        const bool allowed = !(into_reduce && mode == Fusion::elementwise);
        keep = !(allowed && (reuse <= 1.0 + 1e-9 || (reuse - 1.0) * cost_of(n.body) <= 4.0));
        if (!keep) evals[k] = uses;
      }
    }
    f.materialized[k] = keep;
    if (keep) evals[k] = evaluations(n);
  }

  // Bodies with every non-materialized node substituted, in terms of the node's own variables.
  std::vector<ExPtr> inlined(count);
  std::vector<std::vector<int>> parts(count);
  for (std::size_t k = 0; k < count; ++k) {
    const LNode& n = L.nodes[k];
    if (!n.body) continue;
    std::vector<int> p{static_cast<int>(k)};
    inlined[k] = rewrite_loads(n.body, [&](const Ex& l, const std::vector<ExPtr>& args) -> ExPtr {
      const auto s = static_cast<std::size_t>(l.slot);
      if (f.materialized[s]) return ex_load_slot(l.slot, l.dtype, args);
      for (int q : parts[s]) {
        if (std::find(p.begin(), p.end(), q) == p.end()) p.push_back(q);
      }
      return substitute(inlined[s], args);
    });
    parts[k] = std::move(p);
  }

  // Kernels, and which kernels read each materialized node.
  std::vector<int> kernel_of(count, -1);
  for (std::size_t k = 0; k < count; ++k) {
    const LNode& n = L.nodes[k];
    if (!f.materialized[k] || n.kind == LNode::Kind::buffer) continue;
    Kernel kn;
    kn.kind = n.kind == LNode::Kind::reduce ? Kernel::Kind::reduce : Kernel::Kind::map;
    kn.out = static_cast<int>(k);
    kn.dtype = n.dtype;
    kn.shape = n.shape;
    kn.body = inlined[k];
    kn.rop = n.rop;
    kn.red = n.red;
    kn.parts = parts[k];
    kn.tile = tiles[k];
    kernel_of[k] = static_cast<int>(f.kernels.size());
    f.kernels.push_back(std::move(kn));
  }
  for (auto& k : f.kernels) k.reads = kernel_reads(k);

  // Epilogues: a reduction read by one element-wise kernel only, at that kernel's own indices.
  if (mode == Fusion::full) {
    std::vector<std::vector<int>> read_by(count);
    for (std::size_t i = 0; i < f.kernels.size(); ++i) {
      for (int s : f.kernels[i].reads)
        read_by[static_cast<std::size_t>(s)].push_back(static_cast<int>(i));
    }
    std::vector<bool> absorbed(f.kernels.size(), false);
    for (std::size_t i = 0; i < f.kernels.size(); ++i) {
      Kernel& m = f.kernels[i];
      if (m.kind != Kernel::Kind::map) continue;
      int candidate = -1;
      bool ok = true;
      for_each_load(m.body, [&](const Ex& l) {
        const LNode& r = L.nodes[static_cast<std::size_t>(l.slot)];
        if (r.kind != LNode::Kind::reduce || outputs[static_cast<std::size_t>(l.slot)]) return;
        if (candidate >= 0 && candidate != l.slot) {
          ok = false;  // one reduction per epilogue
          return;
        }
        candidate = l.slot;
        bool identity = r.shape == m.shape && l.args.size() == m.shape.size();
        for (std::size_t d = 0; identity && d < l.args.size(); ++d) {
          identity = l.args[d]->kind == ExKind::var && l.args[d]->var == static_cast<int>(d);
        }
        ok = ok && identity;
      });
      if (!ok || candidate < 0) continue;
      const auto c = static_cast<std::size_t>(candidate);
      if (read_by[c].size() != 1) continue;
      const int ki = kernel_of[c];
      Kernel& r = f.kernels[static_cast<std::size_t>(ki)];
      if (r.kind != Kernel::Kind::reduce || r.epilogue) continue;
      if (Kernel probe = r; plan_gemm(probe, L, gemm)) {
        continue;  // BLAS pays more than the fused epilogue
      }
      const DType acc_type = r.dtype;
      m.epilogue = rewrite_loads(m.body, [&](const Ex& l, const std::vector<ExPtr>& args) -> ExPtr {
        if (l.slot == candidate) return ex_acc(acc_type);
        return ex_load_slot(l.slot, l.dtype, args);
      });
      m.kind = Kernel::Kind::reduce;
      m.tile = r.tile;
      m.body = r.body;
      m.red = r.red;
      m.rop = r.rop;
      m.dtype = L.nodes[static_cast<std::size_t>(m.out)].dtype;
      for (int q : r.parts) {
        if (std::find(m.parts.begin(), m.parts.end(), q) == m.parts.end()) m.parts.push_back(q);
      }
      absorbed[static_cast<std::size_t>(ki)] = true;
      f.materialized[c] = false;
      m.reads = kernel_reads(m);
    }
    std::vector<Kernel> kept;
    for (std::size_t i = 0; i < f.kernels.size(); ++i) {
      if (!absorbed[i]) kept.push_back(std::move(f.kernels[i]));
    }
    f.kernels = std::move(kept);
  }

  for (auto& k : f.kernels) {
    if (k.kind == Kernel::Kind::reduce) (void)plan_gemm(k, L, gemm);
  }
  return f;
}

}  // namespace sluice::lazy::detail
