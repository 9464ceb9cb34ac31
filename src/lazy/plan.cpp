// Planning an instance: steps, their order, buffers and temporaries (see plan.hpp).

#include "lazy/plan.hpp"

#include <algorithm>
#include <chrono>
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

std::string kernel_name(const Kernel& k, const Lowered& L, std::span<const NodePtr> order,
                        int index) {
  std::string s = "k" + std::to_string(index);
  const LNode& out = L.nodes[static_cast<std::size_t>(k.out)];
  if (out.node >= 0) s += "_" + op_name(*order[static_cast<std::size_t>(out.node)]);
  for (auto& c : s) {
    if (c == ' ' || c == '\'' || c == ',' || c == '>' || c == '-') c = '_';
  }
  return s;
}

}  // namespace

std::string assemble_source(const InstanceDesc& d, LazyDialect dialect) {
  std::string src = prelude(dialect);
  for (const auto& c : d.codes) src += "\n" + c.text;
  return src;
}

InstanceDesc plan_instance(const PlanInput& in) {
  const auto start = std::chrono::steady_clock::now();
  InstanceDesc d;
  d.shapes.assign(in.shapes.begin(), in.shapes.end());
  d.lowered = lower(in.order, in.shapes, true, in.broadcast_sum);
  const Lowered& L = d.lowered;
  std::vector<bool> is_output(L.nodes.size(), false);
  for (int o : in.outputs) {
    is_output[static_cast<std::size_t>(L.of_node[static_cast<std::size_t>(o)])] = true;
  }
  d.fused = fuse(L, is_output, in.fusion, in.gemm);
  const Fused& F = d.fused;

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

  // Steps: kernels in order, then copies into outputs that are inputs or repeat another output.
  std::vector<int> writer(d.bufs.size(), -1);
  std::vector<std::vector<int>> readers(d.bufs.size());
  auto add_step = [&](Step s) {
    const int i = static_cast<int>(d.steps.size());
    for (int b : s.reads) {
      if (writer[static_cast<std::size_t>(b)] >= 0 &&
          std::find(s.after.begin(), s.after.end(), writer[static_cast<std::size_t>(b)]) ==
              s.after.end()) {
        s.after.push_back(writer[static_cast<std::size_t>(b)]);
      }
      readers[static_cast<std::size_t>(b)].push_back(i);
    }
    if (s.writes >= 0) writer[static_cast<std::size_t>(s.writes)] = i;
    d.steps.push_back(std::move(s));
    return i;
  };
  for (std::size_t ki = 0; ki < F.kernels.size(); ++ki) {
    const Kernel& k = F.kernels[ki];
    Step s;
    s.kernel = static_cast<int>(ki);
    s.writes = d.buf_of[static_cast<std::size_t>(k.out)];
    s.name = kernel_name(k, L, in.order, static_cast<int>(ki));
    if (k.kind == Kernel::Kind::gemm) {
      s.kind = Step::Kind::gemm;
      s.reads = {d.buf_of[static_cast<std::size_t>(k.gemm.a)],
                 d.buf_of[static_cast<std::size_t>(k.gemm.b)]};
    } else {
      s.kind = Step::Kind::kernel;
      for (int r : k.reads) s.reads.push_back(d.buf_of[static_cast<std::size_t>(r)]);
      if (numel(k.shape) > 0) {
        s.code = static_cast<int>(d.codes.size());
        d.codes.push_back(emit_kernel(k, L, in.dialect, s.code, in.debug));
        d.codes.back().kernel = static_cast<int>(ki);
      }
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
    s.writes = output_buf[o];
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
