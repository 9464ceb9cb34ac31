#pragma once
/// @file
/// Which memset and copy nodes of an IR graph (sluice/ext/graph_ir.hpp) a backend may run as
/// one batched node, such as one kernel that performs all of them: a graph whose launch costs in
/// proportion to its node count (a CUDA graph of a replayed body of small memsets) then has far
/// fewer nodes. For backend authors.
///
/// Nodes are merged in two ways, each of which keeps the graph acyclic and every ordering the
/// batch needs:
/// - a chain: a node whose predecessors all lie in one batch joins it (nothing outside the batch
///   can run between them);
/// - an independent set: nodes whose predecessors are the same joins a batch of them.
/// Inside a batch nothing is ordered, so no member may write bytes that another member reads or
/// writes (a copy may not overlap itself either): such a node starts a new batch after the
/// first. A batch holds at most `capacity` members.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <utility>
#include <variant>
#include <vector>

#include "sluice/ext/graph_ir.hpp"

namespace sluice::ir {

/// The batches of a graph's top level.
struct Batches {
  /// Per node: the index of its batch, or -1.
  std::vector<std::int32_t> batch_of;
  /// Per batch: its members, in the graph's topological order (at least 2).
  std::vector<std::vector<std::uint32_t>> members;
  /// Nodes in batches.
  [[nodiscard]] std::size_t merged() const noexcept {
    std::size_t n = 0;
    for (const auto& m : members) n += m.size();
    return n;
  }
};

namespace batches_detail {

/// The byte ranges a memset or copy node writes and reads ([begin, end) as integers).
struct Ranges {
  std::uintptr_t w0 = 0, w1 = 0, r0 = 0, r1 = 0;
};
inline Ranges ranges_of(const Node& n) {
  Ranges r;
  if (const auto* m = std::get_if<Memset>(&n.params)) {
    r.w0 = reinterpret_cast<std::uintptr_t>(m->dst);
    r.w1 = r.w0 + m->bytes;
  } else if (const auto* c = std::get_if<Copy>(&n.params)) {
    r.w0 = reinterpret_cast<std::uintptr_t>(c->dst);
    r.w1 = r.w0 + c->bytes;
    r.r0 = reinterpret_cast<std::uintptr_t>(c->src);
    r.r1 = r.r0 + c->bytes;
  }
  return r;
}
inline bool meet(std::uintptr_t a0, std::uintptr_t a1, std::uintptr_t b0, std::uintptr_t b1) {
  return a0 < b1 && b0 < a1 && a0 < a1 && b0 < b1;
}
/// Whether two members would need an order between them.
inline bool conflict(const Ranges& a, const Ranges& b) {
  return meet(a.w0, a.w1, b.w0, b.w1) || meet(a.w0, a.w1, b.r0, b.r1) ||
         meet(b.w0, b.w1, a.r0, a.r1);
}

}  // namespace batches_detail

/// Whether some member of a batch writes bytes that it or another member reads or writes (the
/// batch then needs an order it does not have). O(m log m).
[[nodiscard]] inline bool batch_conflicts(const Graph& g, std::span<const std::uint32_t> members) {
  using batches_detail::Ranges;
  // Every range, sorted by start; a write overlapping any later-starting range is a conflict,
  // as is a copy whose source meets its own destination.
  struct Item {
    std::uintptr_t lo, hi;
    bool write;
    std::uint32_t node;
  };
  std::vector<Item> items;
  items.reserve(members.size() * 2);
  for (auto i : members) {
    const Ranges r = batches_detail::ranges_of(g.nodes[i]);
    if (batches_detail::meet(r.w0, r.w1, r.r0, r.r1)) return true;
    if (r.w0 < r.w1) items.push_back({r.w0, r.w1, true, i});
    if (r.r0 < r.r1) items.push_back({r.r0, r.r1, false, i});
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.lo < b.lo; });
  // Sweep: the furthest end of the writes and of the reads seen so far.
  std::uintptr_t write_end = 0, read_end = 0;
  for (const auto& it : items) {
    if (it.lo < write_end) return true;  // meets an earlier write
    if (it.write) {
      if (it.lo < read_end) return true;  // a write meets an earlier read
      write_end = std::max(write_end, it.hi);
    } else {
      read_end = std::max(read_end, it.hi);
    }
  }
  return false;
}

/// Plans the batches of `g`'s top level among the nodes `eligible` accepts (memset and copy nodes
/// only; the backend's own conditions, such as memory its batched node reaches). Nested graphs are
/// not looked into.
[[nodiscard]] inline Batches plan_batches(const Graph& g, std::size_t capacity,
                                          const std::function<bool(const Node&)>& eligible) {
  const auto count = g.nodes.size();
  Batches out;
  out.batch_of.assign(count, -1);
  if (count < 2 || capacity < 2) return out;
  // Topological order and predecessors.
  std::vector<std::vector<std::uint32_t>> succ(count), pred(count);
  std::vector<std::uint32_t> indegree(count, 0);
  for (auto [a, b] : g.edges) {
    succ[a].push_back(b);
    pred[b].push_back(a);
    ++indegree[b];
  }
  std::vector<std::uint32_t> order;
  order.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    if (indegree[i] == 0) order.push_back(i);
  }
  for (std::size_t k = 0; k < order.size(); ++k) {
    for (auto s : succ[order[k]]) {
      if (--indegree[s] == 0) order.push_back(s);
    }
  }
  // Units: a batch is one unit of the merged graph, any other node its own. A unit id is the
  // node index, or count + batch index.
  struct Open {
    std::vector<std::uint32_t> preds;  // the batch's predecessor units (sorted): its key
    std::vector<batches_detail::Ranges> ranges;
  };
  std::vector<Open> open;
  std::vector<std::vector<std::uint32_t>> members;
  std::map<std::vector<std::uint32_t>, std::int32_t> by_preds;  // the newest batch of each key
  auto unit_of = [&](std::uint32_t i) {
    return out.batch_of[i] >= 0
               ? static_cast<std::uint32_t>(count) + static_cast<std::uint32_t>(out.batch_of[i])
               : i;
  };
  auto fits = [&](std::int32_t b, const batches_detail::Ranges& r) {
    if (members[b].size() >= capacity) return false;
    return std::none_of(open[b].ranges.begin(), open[b].ranges.end(),
                        [&](const auto& o) { return batches_detail::conflict(o, r); });
  };
  for (auto i : order) {
    const Node& n = g.nodes[i];
    const bool kind_ok =
        std::holds_alternative<Memset>(n.params) || std::holds_alternative<Copy>(n.params);
    if (!kind_ok || !eligible(n)) continue;
    std::vector<std::uint32_t> units;
    for (auto p : pred[i]) units.push_back(unit_of(p));
    std::sort(units.begin(), units.end());
    units.erase(std::unique(units.begin(), units.end()), units.end());
    const auto r = batches_detail::ranges_of(n);
    if (batches_detail::meet(r.w0, r.w1, r.r0, r.r1)) continue;  // needs memmove's order
    std::int32_t join = -1;
    // A chain: every predecessor in one batch.
    if (units.size() == 1 && units[0] >= count) {
      const auto b = static_cast<std::int32_t>(units[0] - count);
      if (fits(b, r)) join = b;
    }
    // An independent set: the same predecessors as a batch.
    if (join < 0) {
      if (auto it = by_preds.find(units); it != by_preds.end() && fits(it->second, r)) {
        join = it->second;
      }
    }
    if (join < 0) {
      join = static_cast<std::int32_t>(members.size());
      members.emplace_back();
      open.push_back({units, {}});
      by_preds[units] = join;
    }
    members[join].push_back(i);
    open[join].ranges.push_back(r);
    out.batch_of[i] = join;
  }
  // Batches of one node stay plain nodes; the others are renumbered densely.
  std::vector<std::int32_t> renumber(members.size(), -1);
  for (std::size_t b = 0; b < members.size(); ++b) {
    if (members[b].size() < 2) continue;
    renumber[b] = static_cast<std::int32_t>(out.members.size());
    out.members.push_back(std::move(members[b]));
  }
  for (auto& b : out.batch_of) {
    if (b >= 0) b = renumber[b];
  }
  return out;
}

}  // namespace sluice::ir
