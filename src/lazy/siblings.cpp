// Multi-output fusion: sibling kernels merged into one (see fuse.hpp).

#include <algorithm>
#include <cstdint>
#include <queue>

#include "lazy/fuse.hpp"
#include "sluice/error.hpp"

namespace sluice::lazy::detail {
namespace {

/// Outputs of one multi-output kernel at most (cuda: each is a store and its registers).
constexpr std::size_t kMaxSiblingOutputs = 8;
/// Buffers (outputs and reads) of one multi-output kernel at most (its argument struct).
constexpr std::size_t kMaxSiblingBuffers = 48;

using SiblingBits = std::vector<std::uint64_t>;

bool sibling_bit(const SiblingBits& b, std::size_t i) {
  return (b[i / 64] >> (i % 64)) & 1u;
}

/// Whether load `l` reads at the kernel's own indices (variable d along axis d).
bool sibling_identity(const Ex& l, std::size_t rank) {
  if (l.args.size() != rank) return false;
  for (std::size_t d = 0; d < rank; ++d) {
    if (l.args[d]->kind != ExKind::var || l.args[d]->var != static_cast<int>(d)) return false;
  }
  return true;
}

/// Terms of a reduction that merges at most: a thread per output sums them all (no lanes; with
/// 8 terms and more cuda would also consider lanes per output).
constexpr std::int64_t kMaxSiblingTerms = 8;

bool sibling_eligible(const Kernel& k) {
  if (!k.siblings.empty() || k.epilogue || numel(k.shape) <= 0) return false;
  if (k.kind == Kernel::Kind::map) return true;
  return k.kind == Kernel::Kind::reduce && k.tile == 1 && numel(k.red) > 0 &&
         numel(k.red) < kMaxSiblingTerms;
}

}  // namespace

std::size_t merge_siblings(Fused& F, const Lowered& L) {
  const std::size_t n = F.kernels.size();
  if (n < 2) return 0;
  std::vector<int> producer(L.nodes.size(), -1);
  for (std::size_t i = 0; i < n; ++i) {
    for (int o : F.kernels[i].outputs())
      producer[static_cast<std::size_t>(o)] = static_cast<int>(i);
  }
  auto preds_of = [&](const Kernel& k) {
    std::vector<int> p;
    auto add = [&](int slot) {
      if (slot < 0) return;
      const int q = producer[static_cast<std::size_t>(slot)];
      if (q >= 0 && std::find(p.begin(), p.end(), q) == p.end()) p.push_back(q);
    };
    for (int r : k.reads) add(r);
    if (k.kind == Kernel::Kind::gemm) {
      add(k.gemm.a);
      add(k.gemm.b);
    }
    return p;
  };
  // anc[i] / desc[i]: kernels before / after kernel i, kept transitively closed over the graph
  // with every group contracted (kernels are in topological order).
  const std::size_t words = (n + 63) / 64;
  std::vector<SiblingBits> anc(n, SiblingBits(words, 0)), desc(n, SiblingBits(words, 0));
  for (std::size_t i = 0; i < n; ++i) {
    for (int p : preds_of(F.kernels[i])) {
      const auto q = static_cast<std::size_t>(p);
      anc[i][q / 64] |= std::uint64_t{1} << (q % 64);
      for (std::size_t w = 0; w < words; ++w) anc[i][w] |= anc[q][w];
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t a = 0; a < n; ++a) {
      if (sibling_bit(anc[i], a)) desc[a][i / 64] |= std::uint64_t{1} << (i % 64);
    }
  }

  // Groups, greedily in kernel order: a kernel joins the first group over its domain that it
  // shares a read with, or whose outputs it reads at its own indices only (those loads become
  // the value computed in the same iteration), where nothing else orders them: no member after
  // it, and no member before it other than through those direct reads.
  std::vector<std::vector<int>> groups;
  std::vector<std::vector<int>> group_reads;
  std::vector<int> group_of(n, -1);
  std::vector<int> node_kernel(L.nodes.size(), -1);  // member computing a grouped node
  std::vector<ExPtr> body(n);
  for (std::size_t i = 0; i < n; ++i) body[i] = F.kernels[i].body;
  auto has_member = [&](const SiblingBits& b, const std::vector<int>& members) {
    for (int m : members) {
      if (sibling_bit(b, static_cast<std::size_t>(m))) return true;
    }
    return false;
  };
  for (std::size_t i = 0; i < n; ++i) {
    Kernel& k = F.kernels[i];
    if (!sibling_eligible(k)) continue;
    const std::size_t rank = k.shape.size();
    int joined = -1;
    for (std::size_t g = 0; g < groups.size() && joined < 0; ++g) {
      const auto& members = groups[g];
      const Kernel& lead = F.kernels[static_cast<std::size_t>(members.front())];
      if (lead.shape != k.shape || members.size() >= kMaxSiblingOutputs) continue;
      // A reduction joins a reduction over the same extents (one loop nest).
      if (k.kind == Kernel::Kind::reduce &&
          (lead.kind != Kernel::Kind::reduce || lead.red != k.red)) {
        continue;
      }
      if (has_member(desc[i], members)) continue;
      auto in_group = [&](int slot) {
        const int q = node_kernel[static_cast<std::size_t>(slot)];
        return q >= 0 && group_of[static_cast<std::size_t>(q)] == static_cast<int>(g);
      };
      bool consumer = false, identity = true;
      for_each_load(body[i], [&](const Ex& l) {
        if (!in_group(l.slot)) return;
        consumer = true;
        // Only an element value can stand for the load (a reduction's is known after its loop).
        const auto q = static_cast<std::size_t>(node_kernel[static_cast<std::size_t>(l.slot)]);
        identity = identity && sibling_identity(l, rank) && F.kernels[q].kind == Kernel::Kind::map;
      });
      if (!identity) continue;
      bool apart = true;
      for (int q : preds_of(k)) {
        const auto qi = static_cast<std::size_t>(q);
        if (group_of[qi] == static_cast<int>(g)) continue;  // its direct reads, checked above
        apart = apart && !has_member(anc[qi], members);
      }
      if (!apart) continue;
      const auto& reads = group_reads[g];
      bool shares = consumer;
      std::size_t slots = members.size() + 1 + reads.size();
      for (int r : k.reads) {
        if (std::find(reads.begin(), reads.end(), r) != reads.end()) {
          shares = true;
        } else {
          ++slots;
        }
      }
      if (!shares || slots > kMaxSiblingBuffers) continue;
      joined = static_cast<int>(g);
    }
    if (joined < 0) {
      group_of[i] = static_cast<int>(groups.size());
      node_kernel[static_cast<std::size_t>(k.out)] = static_cast<int>(i);
      groups.push_back({static_cast<int>(i)});
      group_reads.push_back(k.reads);
      continue;
    }
    const auto g = static_cast<std::size_t>(joined);
    // Loads of the group's outputs (at this kernel's indices) become their values.
    body[i] = rewrite_loads(body[i], [&](const Ex& l, const std::vector<ExPtr>& args) -> ExPtr {
      const int q = node_kernel[static_cast<std::size_t>(l.slot)];
      if (q >= 0 && group_of[static_cast<std::size_t>(q)] == joined)
        return body[static_cast<std::size_t>(q)];
      return ex_load_slot(l.slot, l.dtype, args);
    });
    k.body = body[i];
    k.reads = kernel_reads(k);
    groups[g].push_back(static_cast<int>(i));
    group_of[i] = joined;
    node_kernel[static_cast<std::size_t>(k.out)] = static_cast<int>(i);
    for (int r : k.reads) {
      if (std::find(group_reads[g].begin(), group_reads[g].end(), r) == group_reads[g].end())
        group_reads[g].push_back(r);
    }
    // Contracting the group: whatever reaches a member now reaches whatever a member reaches.
    SiblingBits in(words, 0), out(words, 0);
    for (int m : groups[g]) {
      const auto mi = static_cast<std::size_t>(m);
      in[mi / 64] |= std::uint64_t{1} << (mi % 64);
      out[mi / 64] |= std::uint64_t{1} << (mi % 64);
      for (std::size_t w = 0; w < words; ++w) {
        in[w] |= anc[mi][w];
        out[w] |= desc[mi][w];
      }
    }
    for (std::size_t x = 0; x < n; ++x) {
      if (sibling_bit(in, x)) {
        for (std::size_t w = 0; w < words; ++w) desc[x][w] |= out[w];
      }
      if (sibling_bit(out, x)) {
        for (std::size_t w = 0; w < words; ++w) anc[x][w] |= in[w];
      }
    }
  }

  // The merged kernels: the first member computes the others' outputs too.
  std::size_t merged = 0, groups_merged = 0;
  std::vector<bool> absorbed(n, false);
  for (const auto& members : groups) {
    if (members.size() < 2) continue;
    Kernel& lead = F.kernels[static_cast<std::size_t>(members.front())];
    for (std::size_t j = 1; j < members.size(); ++j) {
      Kernel& m = F.kernels[static_cast<std::size_t>(members[j])];
      lead.siblings.push_back({m.out, m.body, m.kind == Kernel::Kind::reduce, m.rop});
      for (int q : m.parts) {
        if (std::find(lead.parts.begin(), lead.parts.end(), q) == lead.parts.end())
          lead.parts.push_back(q);
      }
      absorbed[static_cast<std::size_t>(members[j])] = true;
    }
    lead.reads = kernel_reads(lead);
    merged += members.size();
    ++groups_merged;
  }
  if (merged == 0) return 0;

  // Topological order of what is left (a merged kernel may have to move past the producers of
  // its later members' inputs), the earliest kernel first among those ready.
  auto unit_of = [&](std::size_t i) {
    return group_of[i] >= 0
               ? static_cast<std::size_t>(groups[static_cast<std::size_t>(group_of[i])].front())
               : i;
  };
  std::vector<std::vector<int>> users(n);
  std::vector<int> waiting(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (absorbed[i]) continue;
    std::vector<int> deps;
    for (int p : preds_of(F.kernels[i])) {
      const auto u = unit_of(static_cast<std::size_t>(p));
      if (u != i && std::find(deps.begin(), deps.end(), static_cast<int>(u)) == deps.end())
        deps.push_back(static_cast<int>(u));
    }
    for (int u : deps) users[static_cast<std::size_t>(u)].push_back(static_cast<int>(i));
    waiting[i] = static_cast<int>(deps.size());
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i) {
    if (!absorbed[i] && waiting[i] == 0) ready.push(static_cast<int>(i));
  }
  std::vector<Kernel> sorted;
  while (!ready.empty()) {
    const auto i = static_cast<std::size_t>(ready.top());
    ready.pop();
    sorted.push_back(std::move(F.kernels[i]));
    for (int v : users[i]) {
      if (--waiting[static_cast<std::size_t>(v)] == 0) ready.push(v);
    }
  }
  if (sorted.size() + (merged - groups_merged) != n) {
    throw Error(Errc::invalid_state,
                "sluice::lazy internal error: multi-output fusion formed a cycle");
  }
  F.kernels = std::move(sorted);
  return merged;
}

}  // namespace sluice::lazy::detail
