// Planning an instance: steps, their order, buffers and temporaries (see plan.hpp).

#include "lazy/plan.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <queue>
#include <tuple>
#include <unordered_map>

namespace sluice::lazy::detail {
namespace {

using Bits = std::vector<std::uint64_t>;

void set_bit(Bits& b, std::size_t i) {
  b[i / 64] |= std::uint64_t{1} << (i % 64);
}
bool has_bit(const Bits& b, std::size_t i) {
  return (b[i / 64] >> (i % 64)) & 1u;
}

/// Ancestors of every step (steps are in topological order).
std::vector<Bits> ancestors(const std::vector<Step>& steps) {
  const std::size_t words = (steps.size() + 63) / 64;
  std::vector<Bits> anc(steps.size(), Bits(words, 0));
  for (std::size_t i = 0; i < steps.size(); ++i) {
    for (int a : steps[i].after) {
      const auto p = static_cast<std::size_t>(a);
      set_bit(anc[i], p);
      for (std::size_t w = 0; w < words; ++w) anc[i][w] |= anc[p][w];
    }
  }
  return anc;
}

/// Largest set of kernel steps no two of which are ordered (Dilworth: steps minus a maximum
/// matching of the comparability graph).
std::size_t width_of(const std::vector<Step>& steps) {
  std::vector<std::size_t> ks;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind == Step::Kind::kernel || steps[i].kind == Step::Kind::gemm) ks.push_back(i);
  }
  if (ks.empty()) return 0;
  const auto anc = ancestors(steps);
  const std::size_t n = ks.size();
  std::vector<int> match_right(n, -1);
  auto before = [&](std::size_t a, std::size_t b) { return has_bit(anc[ks[b]], ks[a]); };
  std::size_t matched = 0;
  for (std::size_t u = 0; u < n; ++u) {
    std::vector<bool> seen(n, false);
    auto augment = [&](auto& self, std::size_t x) -> bool {
      for (std::size_t y = 0; y < n; ++y) {
        if (!before(x, y) || seen[y]) continue;
        seen[y] = true;
        if (match_right[y] < 0 || self(self, static_cast<std::size_t>(match_right[y]))) {
          match_right[y] = static_cast<int>(x);
          return true;
        }
      }
      return false;
    };
    if (augment(augment, u)) ++matched;
  }
  return n - matched;
}

/// Kernels computed together (one step): a kernel alone, or the members of a horizontal kernel
/// or of a batched matrix product.
using Unit = std::vector<int>;

/// Products batched into one call only up to this many multiply-adds each: on an H100 the wide
/// DAG's 16 products of 1024 x 64 x 64 ran faster as one batched call (22.0 against 26.8 us), of
/// 16384 x 64 x 64 slower (261 against 223 us; cuBLAS's batched kernels against its GEMMs run
/// side by side from the graph's branches).
constexpr std::int64_t kMaxBatchedProductMacs = std::int64_t{1} << 24;

/// Horizontal fusion: kernels of the same code (the same generated text and parameters), and
/// matrix products of the same sizes, at the same depth of the kernel DAG (the longest chain of
/// kernels before them) become one unit. Kernels at one depth are independent, and every edge
/// between units still goes to a greater depth, so the units form a DAG. The units come in
/// topological order, each at its earliest member's place where its producers allow (without
/// groups, the kernels' own order).
std::vector<Unit> units_of(const Fused& F, const Lowered& L, const PlanInput& in) {
  const std::size_t nk = F.kernels.size();
  std::vector<int> producer(L.nodes.size(), -1);
  for (std::size_t i = 0; i < nk; ++i) {
    for (int o : F.kernels[i].outputs())
      producer[static_cast<std::size_t>(o)] = static_cast<int>(i);
  }
  auto inputs_of = [&](const Kernel& k) {
    return k.kind == Kernel::Kind::gemm ? std::vector<int>{k.gemm.a, k.gemm.b} : k.reads;
  };
  std::vector<int> depth(nk, 0);
  for (std::size_t i = 0; i < nk; ++i) {
    for (int r : inputs_of(F.kernels[i])) {
      const int p = producer[static_cast<std::size_t>(r)];
      if (p >= 0 && p < static_cast<int>(i)) {
        depth[i] = std::max(depth[i], depth[static_cast<std::size_t>(p)] + 1);
      }
    }
  }
  std::vector<Unit> units;
  std::vector<int> unit_of(nk, -1);
  std::map<std::string, std::vector<int>> open;  // signature -> units being filled
  for (std::size_t i = 0; i < nk; ++i) {
    const Kernel& k = F.kernels[i];
    std::string sig;
    std::size_t slots = 0;
    if (in.horizontal && k.kind == Kernel::Kind::gemm && in.gemm_table && k.gemm.batch == 1 &&
        k.gemm.m * k.gemm.n * k.gemm.k <= kMaxBatchedProductMacs) {
      const auto& g = k.gemm;
      sig = "gemm " + std::to_string(depth[i]) + " " + std::to_string(static_cast<int>(k.dtype));
      for (auto v :
           {std::int64_t{g.trans_a}, std::int64_t{g.trans_b}, g.m, g.n, g.k, g.lda, g.ldb, g.ldc}) {
        sig += " " + std::to_string(v);
      }
      slots = 3;
    } else if (in.horizontal && k.kind != Kernel::Kind::gemm && numel(k.shape) > 0) {
      const auto probe = emit_kernel(k, L, in.dialect, 0, in.debug);
      sig = "code " + std::to_string(depth[i]) + "\n" + probe.text;
      for (auto p : probe.params) sig += " " + std::to_string(p);
      slots = probe.buffer_slots();
    }
    int u = -1;
    if (!sig.empty()) {
      auto& list = open[sig];
      if (!list.empty() &&
          (units[static_cast<std::size_t>(list.back())].size() + 1) * slots <= kMaxMemberSlots) {
        u = list.back();
      } else {
        u = static_cast<int>(units.size());
        units.emplace_back();
        list.push_back(u);
      }
    } else {
      u = static_cast<int>(units.size());
      units.emplace_back();
    }
    units[static_cast<std::size_t>(u)].push_back(static_cast<int>(i));
    unit_of[i] = u;
  }
  // Topological order of the units, the earliest first among those ready.
  const std::size_t nu = units.size();
  std::vector<std::vector<int>> users(nu);
  std::vector<int> waiting(nu, 0);
  for (std::size_t u = 0; u < nu; ++u) {
    std::vector<int> deps;
    for (int i : units[u]) {
      for (int r : inputs_of(F.kernels[static_cast<std::size_t>(i)])) {
        const int p = producer[static_cast<std::size_t>(r)];
        if (p < 0) continue;
        const int v = unit_of[static_cast<std::size_t>(p)];
        if (v != static_cast<int>(u) && std::find(deps.begin(), deps.end(), v) == deps.end()) {
          deps.push_back(v);
        }
      }
    }
    for (int v : deps) users[static_cast<std::size_t>(v)].push_back(static_cast<int>(u));
    waiting[u] = static_cast<int>(deps.size());
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (std::size_t u = 0; u < nu; ++u) {
    if (waiting[u] == 0) ready.push(static_cast<int>(u));
  }
  std::vector<Unit> sorted;
  while (!ready.empty()) {
    const int u = ready.top();
    ready.pop();
    sorted.push_back(units[static_cast<std::size_t>(u)]);
    for (int v : users[static_cast<std::size_t>(u)]) {
      if (--waiting[static_cast<std::size_t>(v)] == 0) ready.push(v);
    }
  }
  return sorted;
}

std::string kernel_name(const Kernel& k, const Lowered& L, std::span<const NodePtr> order,
                        int index) {
  std::string s = "k" + std::to_string(index);
  const LNode& out = L.nodes[static_cast<std::size_t>(k.out)];
  if (out.node >= 0) s += "_" + op_name(*order[static_cast<std::size_t>(out.node)]);
  if (!k.siblings.empty()) s += "_o" + std::to_string(k.siblings.size() + 1);
  for (auto& c : s) {
    if (c == ' ' || c == '\'' || c == ',' || c == '>' || c == '-') c = '_';
  }
  return s;
}

}  // namespace

std::string assemble_source(const InstanceDesc& d, LazyDialect dialect) {
  std::string src = prelude(dialect);
  for (const auto& c : d.codes) src += unit_text(c);
  return src;
}

void finish_binding(InstanceDesc& d, LazyDialect dialect) {
  if (d.table < 0) return;
  for (const auto& s : d.steps) {
    if (s.kind == Step::Kind::kernel && s.code >= 0) {
      read_slots_through_table(d.codes[static_cast<std::size_t>(s.code)]);
    }
  }
  d.source = assemble_source(d, dialect);
}

InstanceDesc plan_instance(const PlanInput& in) {
  const auto start = std::chrono::steady_clock::now();
  InstanceDesc d;
  d.shapes.assign(in.shapes.begin(), in.shapes.end());
  // Tiles on cuda by the rule; on the host only when forced (its loops compute one output each).
  const bool tile =
      in.tile == Tile::on || (in.tile == Tile::automatic && in.dialect == LazyDialect::cuda);
  d.lowered = lower(in.order, in.shapes, true, in.broadcast_sum, tile);
  const Lowered& L = d.lowered;
  std::vector<bool> is_output(L.nodes.size(), false);
  for (int o : in.outputs) {
    is_output[static_cast<std::size_t>(L.of_node[static_cast<std::size_t>(o)])] = true;
  }
  d.fused = fuse(L, is_output, in.fusion, in.gemm, tile);
  if (in.multi_output && in.fusion != Fusion::none) d.siblings = merge_siblings(d.fused, L);
  const Fused& F = d.fused;
  for (const auto& k : F.kernels) d.tiled += k.kind == Kernel::Kind::reduce && k.tile > 1;

  // Buffers: inputs, the first output of each lowered node, temporaries.
  std::unordered_map<const Node*, int> placeholder_of;
  for (std::size_t p = 0; p < in.placeholders.size(); ++p) {
    placeholder_of[in.order[static_cast<std::size_t>(in.placeholders[p])].get()] =
        static_cast<int>(p);
  }
  d.buf_of.assign(L.nodes.size(), -1);
  std::vector<int> output_buf(in.outputs.size(), -1);
  auto bytes_of = [&](int ln) {
    const LNode& n = L.nodes[static_cast<std::size_t>(ln)];
    return static_cast<std::size_t>(numel(n.shape)) * dtype_size(n.dtype);
  };
  for (std::size_t o = 0; o < in.outputs.size(); ++o) {
    output_buf[o] = static_cast<int>(d.bufs.size());
    const int ln = L.of_node[static_cast<std::size_t>(in.outputs[o])];
    d.bufs.push_back({Buf::Role::output, static_cast<int>(o), bytes_of(ln)});
  }
  std::vector<int> temps;  // bufs that are temporaries (logical)
  for (std::size_t k = 0; k < L.nodes.size(); ++k) {
    if (!F.materialized[k]) continue;
    const LNode& n = L.nodes[k];
    if (n.kind == LNode::Kind::buffer) {
      const Node& u = *in.order[static_cast<std::size_t>(n.node)];
      if (u.kind == NodeKind::placeholder) {
        d.buf_of[k] = static_cast<int>(d.bufs.size());
        d.bufs.push_back(
            {Buf::Role::placeholder, placeholder_of.at(&u), bytes_of(static_cast<int>(k))});
      } else {
        d.buf_of[k] = static_cast<int>(d.bufs.size());
        d.bufs.push_back({Buf::Role::constant, n.node, bytes_of(static_cast<int>(k))});
      }
      continue;
    }
    for (std::size_t o = 0; o < in.outputs.size(); ++o) {
      if (L.of_node[static_cast<std::size_t>(in.outputs[o])] == static_cast<int>(k)) {
        d.buf_of[k] = output_buf[o];
        break;
      }
    }
    if (d.buf_of[k] < 0) {
      d.buf_of[k] = static_cast<int>(d.bufs.size());
      temps.push_back(d.buf_of[k]);
      d.bufs.push_back({Buf::Role::temp, -1, bytes_of(static_cast<int>(k))});
    }
  }

  // The binding table: every buffer's address, then three per matrix product of one (its
  // operand lists), written by the first steps (kMaxMemberSlots entries each); needs the
  // backend's batched products over lists. Under `automatic` (cuda): where a rebinding of every
  // input and output would, with addresses in arguments, record a product again or set
  // kTableFromNodes nodes or more.
  const std::vector<Unit> units = units_of(F, L, in);
  auto bound = [&](int ln) {
    const int b = d.buf_of[static_cast<std::size_t>(ln)];
    if (b < 0) return false;
    const auto role = d.bufs[static_cast<std::size_t>(b)].role;
    return role == Buf::Role::placeholder || role == Buf::Role::output;
  };
  std::size_t listed = 0, rebound = 0;
  bool bound_product = false;
  for (const Unit& unit : units) {
    bool uses_bound = false;
    for (int m : unit) {
      const Kernel& k = F.kernels[static_cast<std::size_t>(m)];
      if (k.kind == Kernel::Kind::gemm) {
        listed += k.gemm.batch == 1;
        const bool b = bound(k.gemm.a) || bound(k.gemm.b) || bound(k.out);
        bound_product = bound_product || (b && k.gemm.batch == 1);
        uses_bound = uses_bound || b;
      } else if (numel(k.shape) > 0) {
        for (int r : k.reads) uses_bound = uses_bound || bound(r);
        for (int o : k.outputs()) uses_bound = uses_bound || bound(o);
      }
    }
    rebound += uses_bound;
  }
  const std::size_t entries = d.bufs.size() + 3 * listed;
  const std::size_t heads = (entries + kMaxMemberSlots - 1) / kMaxMemberSlots;
  const bool table = (in.binding == Binding::table ||
                      (in.binding == Binding::automatic && in.dialect == LazyDialect::cuda &&
                       (bound_product || rebound >= kTableFromNodes))) &&
                     (listed == 0 || in.gemm_table) && heads <= kMaxTableSteps;

  // Steps: kernels (alone, horizontal or batched) in order, then copies into outputs that are
  // inputs or repeat another output.
  std::vector<int> writer(d.bufs.size(), -1);
  std::vector<std::vector<int>> readers(d.bufs.size());
  auto add_step = [&](Step s) {
    const int i = static_cast<int>(d.steps.size());
    writer.resize(d.bufs.size(), -1);
    readers.resize(d.bufs.size());
    for (int b : s.reads) {
      if (writer[static_cast<std::size_t>(b)] >= 0 &&
          std::find(s.after.begin(), s.after.end(), writer[static_cast<std::size_t>(b)]) ==
              s.after.end()) {
        s.after.push_back(writer[static_cast<std::size_t>(b)]);
      }
      auto& r = readers[static_cast<std::size_t>(b)];
      if (r.empty() || r.back() != i) r.push_back(i);
    }
    for (int b : s.writes) writer[static_cast<std::size_t>(b)] = i;
    d.steps.push_back(std::move(s));
    return i;
  };
  auto buf = [&](int ln) { return d.buf_of[static_cast<std::size_t>(ln)]; };
  // Under a binding table: every entry's buffer (buffer b in entry b, then the operand lists),
  // divided among the first `heads` steps at the end.
  std::vector<int> table_entries;
  std::vector<int> after_heads;
  if (table) {
    d.table = static_cast<int>(d.bufs.size());
    for (int b = 0; b < d.table; ++b) table_entries.push_back(b);
    d.bufs.push_back({Buf::Role::table, -1, 0});  // sized below
    for (std::size_t h = 0; h < heads; ++h) {
      Step t;
      t.kind = Step::Kind::table;
      t.writes = {d.table};
      t.name = heads == 1 ? "binding table" : "binding table " + std::to_string(h);
      after_heads.push_back(add_step(std::move(t)));
    }
  }
  for (const Unit& unit : units) {
    const int k0 = unit.front();
    const Kernel& k = F.kernels[static_cast<std::size_t>(k0)];
    Step s;
    s.kernel = k0;
    s.members = unit;
    for (int m : unit) {
      for (int o : F.kernels[static_cast<std::size_t>(m)].outputs()) s.writes.push_back(buf(o));
    }
    s.name = kernel_name(k, L, in.order, k0);
    if (unit.size() > 1) s.name += "_x" + std::to_string(unit.size());
    if (k.kind == Kernel::Kind::gemm) {
      s.kind = Step::Kind::gemm;
      for (int m : unit) {
        const auto& g = F.kernels[static_cast<std::size_t>(m)].gemm;
        s.reads.push_back(buf(g.a));
        s.reads.push_back(buf(g.b));
      }
      if (table && k.gemm.batch == 1) {
        // Its operand lists in the binding table (a strided batch keeps its addresses in its
        // arguments: one list entry per product of it would be needed).
        s.list = static_cast<int>(table_entries.size());
        auto& t = table_entries;
        for (int part = 0; part < 3; ++part) {
          for (int m : unit) {
            const auto& km = F.kernels[static_cast<std::size_t>(m)];
            t.push_back(part == 0 ? buf(km.gemm.a) : part == 1 ? buf(km.gemm.b) : buf(km.out));
          }
        }
        s.after.insert(s.after.end(), after_heads.begin(), after_heads.end());
        if (unit.size() > 1) d.batched += unit.size();
      } else if (unit.size() > 1) {
        // The operands' addresses, written into a temporary by a kernel of their own: the
        // batched call reads them there, so a new binding changes that kernel's arguments only.
        Step t;
        t.kind = Step::Kind::table;
        const int tb = static_cast<int>(d.bufs.size());
        const auto n = unit.size();
        d.bufs.push_back({Buf::Role::temp, -1, 3 * n * sizeof(void*)});
        temps.push_back(tb);
        t.writes = {tb};
        for (int part = 0; part < 3; ++part) {
          for (int m : unit) {
            const auto& km = F.kernels[static_cast<std::size_t>(m)];
            t.addresses.push_back(part == 0   ? buf(km.gemm.a)
                                  : part == 1 ? buf(km.gemm.b)
                                              : buf(km.out));
          }
        }
        t.code = static_cast<int>(d.codes.size());
        d.codes.push_back(emit_table(t.code, static_cast<std::int64_t>(3 * n), in.dialect));
        t.name = s.name + "_operands";
        add_step(std::move(t));
        s.reads.push_back(tb);
        d.batched += n;
      }
    } else {
      s.kind = Step::Kind::kernel;
      for (int m : unit) {
        for (int r : F.kernels[static_cast<std::size_t>(m)].reads) s.reads.push_back(buf(r));
      }
      if (numel(k.shape) > 0) {
        s.code = static_cast<int>(d.codes.size());
        d.codes.push_back(emit_kernel(k, L, in.dialect, s.code, in.debug, nullptr, {},
                                      static_cast<int>(unit.size())));
        d.codes.back().kernel = k0;
        s.after.insert(s.after.end(), after_heads.begin(), after_heads.end());
      }
      if (unit.size() > 1) d.merged += unit.size();
    }
    add_step(std::move(s));
  }
  for (std::size_t o = 0; o < in.outputs.size(); ++o) {
    const int ln = L.of_node[static_cast<std::size_t>(in.outputs[o])];
    const int src = d.buf_of[static_cast<std::size_t>(ln)];
    if (src == output_buf[o]) continue;
    Step s;
    s.kind = Step::Kind::copy;
    s.reads = {src};
    s.writes = {output_buf[o]};
    s.name = "copy to output " + std::to_string(o);
    add_step(std::move(s));
  }
  // Temporaries share memory when their lifetimes allow: in serial order, after the last reader
  // of the previous tenant; in dataflow order, only where every user of the previous tenant is
  // an ancestor of the new writer (no edge is added, so no concurrency is lost).
  if (in.schedule == Schedule::serial) {
    for (std::size_t i = 1; i < d.steps.size(); ++i) {
      auto& a = d.steps[i].after;
      if (std::find(a.begin(), a.end(), static_cast<int>(i) - 1) == a.end())
        a.push_back(static_cast<int>(i) - 1);
    }
  }
  const auto anc = ancestors(d.steps);
  struct Physical {
    std::size_t bytes = 0;
    std::vector<int> users;  // steps of its current tenant
  };
  std::vector<Physical> phys;
  for (int b : temps) {
    const auto bi = static_cast<std::size_t>(b);
    const int w = writer[bi];
    std::vector<int> users = readers[bi];
    users.push_back(w);
    int best = -1, largest = -1;
    for (std::size_t p = 0; p < phys.size(); ++p) {
      bool free = true;
      for (int u : phys[p].users) {
        free = free && u != w &&
               has_bit(anc[static_cast<std::size_t>(w)], static_cast<std::size_t>(u));
      }
      if (!free) continue;
      if (phys[p].bytes >= d.bufs[bi].bytes &&
          (best < 0 || phys[p].bytes < phys[static_cast<std::size_t>(best)].bytes)) {
        best = static_cast<int>(p);
      }
      if (largest < 0 || phys[p].bytes > phys[static_cast<std::size_t>(largest)].bytes) {
        largest = static_cast<int>(p);
      }
    }
    if (best < 0) best = largest;
    if (best < 0) {
      best = static_cast<int>(phys.size());
      phys.emplace_back();
    }
    auto& p = phys[static_cast<std::size_t>(best)];
    p.bytes = std::max(p.bytes, d.bufs[bi].bytes);
    p.users = std::move(users);
    d.bufs[bi].index = best;
  }
  for (const auto& p : phys) d.temp_bytes.push_back(p.bytes);
  if (table) {
    d.bufs[static_cast<std::size_t>(d.table)].bytes = table_entries.size() * sizeof(void*);
    for (std::size_t h = 0; h < heads; ++h) {
      auto& t = d.steps[static_cast<std::size_t>(after_heads[h])];
      const std::size_t from = h * kMaxMemberSlots,
                        to = std::min(table_entries.size(), from + kMaxMemberSlots);
      t.list = static_cast<int>(from);
      t.addresses.assign(table_entries.begin() + static_cast<std::ptrdiff_t>(from),
                         table_entries.begin() + static_cast<std::ptrdiff_t>(to));
      t.code = static_cast<int>(d.codes.size());
      d.codes.push_back(
          emit_table(t.code, static_cast<std::int64_t>(t.addresses.size()), in.dialect));
    }
  }

  if (in.debug) {
    Step s;
    s.kind = Step::Kind::check;
    s.name = "check indices";
    for (std::size_t i = 0; i < d.steps.size(); ++i) s.after.push_back(static_cast<int>(i));
    d.steps.push_back(std::move(s));
  }
  d.width = width_of(d.steps);

  d.source = assemble_source(d, in.dialect);
  d.codegen_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return d;
}

}  // namespace sluice::lazy::detail
