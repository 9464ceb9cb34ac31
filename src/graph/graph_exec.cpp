// GraphExec: instantiation on a backend, launch as one tracked operation, parameter updates.
#include <algorithm>
#include <optional>
#include <utility>

#include "deps/issue.hpp"
#include "deps/tracker.hpp"
#include "graph/graph_exec_impl.hpp"
#include "graph/graph_stats.hpp"
#define SLUICE_IMPL_PUBLIC_INCLUDE  // a private header of sluice
#include "sluice/detail/contract_holds.hpp"
#undef SLUICE_IMPL_PUBLIC_INCLUDE
#include "sluice/error.hpp"
#include "sluice/graph.hpp"

namespace sluice {
namespace detail {

GraphExecImpl::GraphExecImpl(std::shared_ptr<GraphData> graph, const Device& device,
                             std::source_location loc)
    : graph_(std::move(graph)), device_(device), backend_(find_backend(device.backend)) {
  (void)device_info(device_);  // a clear error for a missing device
  try {
    require_top_level_events(graph_->ir);
  } catch (const Error& e) {
    throw Error(e.code(), "instantiating graph '" + graph_->ir.name + "': " + e.what(), loc);
  }
  set_accesses(graph_->ir);
  node_gen_.assign(graph_->ir.nodes.size(), 0);
  // A node of a destroyed buffer would hand the backend a dangling address.
  require_live_buffers(loc);
  try {
    exec_ = backend_->instantiate_graph(ir_of(graph_), device_.index);
  } catch (const Error& e) {
    throw Error(
        e.code(),
        "instantiating graph '" + graph_->ir.name + "' on " + device_.to_string() + ": " + e.what(),
        loc);
  }
  what_ = "graph '" + graph_->ir.name + "'";
  count_instantiation(*exec_);
}

void count_instantiation(const GraphExecutable& exec) noexcept {
  auto& s = graph_stats();
  s.instantiations.fetch_add(1, std::memory_order_relaxed);
  const auto b = exec.batching();
  s.coalesced_nodes.fetch_add(b.merged, std::memory_order_relaxed);
  s.batched_nodes.fetch_add(b.batches, std::memory_order_relaxed);
}

namespace {
void retire(std::unique_ptr<GraphExecutable> exec) noexcept {
  if (!exec || !host_holds_active()) return;  // destroyed here
  try {
    std::shared_ptr<GraphExecutable> kept(std::move(exec));
    run_when_unheld([kept] {});
  } catch (...) {
    // Out of memory: the executable was destroyed when the shared_ptr could not be made.
  }
}
}  // namespace

GraphExecImpl::~GraphExecImpl() {
  retire(std::move(exec_));
}

void GraphExecImpl::set_accesses(const ir::Graph& g) {
  std::vector<Use> uses;
  collect_uses(g, uses);
  // A launch is ordered as a whole: its nodes' uses merged by the one rule of AccessList.
  accesses_.clear();
  for (const auto& u : uses) accesses_.add(u);
  refs_.clear();
  for (const auto& u : uses) {
    auto it = std::lower_bound(refs_.begin(), refs_.end(), u.id,
                               [](const auto& r, ObjectId id) { return r.first < id; });
    if (it != refs_.end() && it->first == u.id) {
      ++it->second;
    } else {
      refs_.insert(it, {u.id, 1});
    }
  }
}

void GraphExecImpl::require_live_buffers(std::source_location loc) const {
  try {
    Tracker::instance().require_tracked(accesses_.uses(), loc);
  } catch (const Error& e) {
    throw Error(e.code(),
                "graph '" + graph_->ir.name + "': " + e.what() +
                    "; every buffer a graph uses must outlive its launches",
                loc);
  }
}

void GraphExecImpl::launch(const Context& ctx, std::source_location loc) {
  if (ctx.device() != device_) {
    throw Error(Errc::invalid_argument,
                "graph '" + graph_->ir.name + "' was instantiated for " + device_.to_string() +
                    " but launched on context '" + ctx.name() + "' of " + ctx.device().to_string() +
                    "; instantiate it for that device",
                loc);
  }
  auto& c = ctx.impl();
  for (const auto& e : graph_->external_waits) c.wait(e, loc);
  try {
    issue_tracked(c, accesses_, what_, loc, [&](Stream& s, const OpInfo& op) {
      if (!graph_->has_events()) {
        ir::LaunchEvents none;
        exec_->launch(s, op, c.failures(), none);
        return;
      }
      // Wait nodes wait for the points their Events stand for now; record nodes' Events stand
      // for this launch's points from now on.
      const auto& bound = graph_->events;
      ir::LaunchEvents points;
      points.waits.resize(graph_->ir.nodes.size());
      points.records.resize(graph_->ir.nodes.size());
      for (std::size_t i = 0; i < bound.size(); ++i) {
        if (bound[i].wait) points.waits[i] = resolve_point(bound[i].wait);
      }
      exec_->launch(s, op, c.failures(), points);
      for (std::size_t i = 0; i < bound.size(); ++i) {
        if (bound[i].record && points.records[i]) bound[i].record->set(points.records[i]);
      }
    });
  } catch (const Error& e) {
    if (e.code() != Errc::invalid_argument) throw;
    throw Error(e.code(),
                "launch of graph '" + graph_->ir.name + "': " + e.what() +
                    "; every buffer a graph uses must outlive its launches",
                loc);
  }
  graph_stats().launches.fetch_add(1, std::memory_order_relaxed);
}

namespace {
bool same_uses(const ir::Graph& a, const ir::Graph& b) {
  if (a.nodes.size() != b.nodes.size()) return false;
  auto same = [](const Use& x, const Use& y) {
    return x.id == y.id && x.mode == y.mode && x.range.offset == y.range.offset &&
           x.range.size == y.range.size;
  };
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    const auto& x = a.nodes[i];
    const auto& y = b.nodes[i];
    if (!std::equal(x.uses.begin(), x.uses.end(), y.uses.begin(), y.uses.end(), same)) {
      return false;
    }
    const auto* cx = ir::condition(x);
    const auto* cy = ir::condition(y);
    if ((cx == nullptr) != (cy == nullptr)) return false;
    if (cx != nullptr && (cx->id != cy->id || cx->initial.has_value() != cy->initial.has_value())) {
      return false;
    }
    const auto gx = ir::nested(x);
    const auto gy = ir::nested(y);
    if (gx.size() != gy.size()) return false;
    for (std::size_t k = 0; k < gx.size(); ++k) {
      if (gx[k] != gy[k] && !same_uses(*gx[k], *gy[k])) return false;
    }
  }
  return true;
}
}  // namespace

std::string GraphExecImpl::update(std::shared_ptr<GraphData> next, std::source_location loc) {
  require_top_level_events(next->ir);
  auto previous = graph_;
  graph_ = next;
  // A replay usually declares the same accesses again: merging them anew is then wasted work.
  std::optional<AccessList> previous_accesses;
  std::vector<std::pair<ObjectId, std::uint32_t>> previous_refs;
  if (!same_uses(previous->ir, next->ir)) {
    previous_accesses = std::move(accesses_);
    previous_refs = refs_;
    try {
      set_accesses(next->ir);
    } catch (...) {
      graph_ = std::move(previous);
      accesses_ = std::move(*previous_accesses);
      refs_ = std::move(previous_refs);
      throw;
    }
  }
  try {
    require_live_buffers(loc);
    auto reason = exec_->update(ir_of(next));
    if (!reason.empty()) {
      retire(std::exchange(exec_, backend_->instantiate_graph(ir_of(next), device_.index)));
      count_instantiation(*exec_);
    }
    forget_versions();
    return reason;
  } catch (...) {
    graph_ = std::move(previous);  // nothing half-done: the executable keeps its graph
    if (previous_accesses) {
      accesses_ = std::move(*previous_accesses);
      refs_ = std::move(previous_refs);
    }
    throw;
  }
}

void GraphExecImpl::forget_versions() {
  spare_.clear();
  gen_ = 0;
  node_gen_.assign(graph_->ir.nodes.size(), 0);
}

std::shared_ptr<GraphData> GraphExecImpl::next_version() {
  auto& nodes = graph_->ir.nodes;
  // Nodes whose parameters the update overwrites (a node whose uses alone change takes the
  // current parameters, then its new uses).
  touched_.assign(nodes.size(), 0);
  for (auto i : params_changed_) touched_[i] = 1;
  for (auto it = spare_.begin(); it != spare_.end(); ++it) {
    if (it->data.use_count() != 1) continue;  // a launch still holds it
    // use_count() is a relaxed read: copying the pointer is a read-modify-write of the count
    // that the last holder's release decremented, so what that launch did with this version
    // happens before the edits below.
    { const auto sync = it->data; }
    Version v = std::move(*it);
    spare_.erase(it);
    // Up to date: every node changed since it was current, but those the update overwrites.
    auto& old = v.data->ir.nodes;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (node_gen_[i] > v.gen && !touched_[i]) old[i] = nodes[i];
    }
    return std::move(v.data);
  }
  return std::make_shared<GraphData>(*graph_);
}

const GraphExecImpl::Rename* GraphExecImpl::renamed_from(ObjectId id) const {
  auto it = std::lower_bound(renames_.begin(), renames_.end(), id,
                             [](const Rename& r, ObjectId x) { return r.from < x; });
  return it != renames_.end() && it->from == id ? &*it : nullptr;
}

const GraphExecImpl::Rename* GraphExecImpl::renamed_to(ObjectId id) const {
  auto it = std::lower_bound(by_to_.begin(), by_to_.end(), id,
                             [&](std::uint32_t r, ObjectId x) { return renames_[r].to < x; });
  return it != by_to_.end() && renames_[*it].to == id ? &renames_[*it] : nullptr;
}

bool GraphExecImpl::plan_renames(const ir::Graph& next) {
  // Sorted, not scanned per use: a rebinding of a wide graph renames a hundred objects or more
  // across hundreds of uses.
  renames_.clear();
  for (auto i : changed_) {
    const auto& a = graph_->ir.nodes[i].uses;
    const auto& b = next.nodes[i].uses;
    if (a.size() != b.size()) return false;
    for (std::size_t k = 0; k < a.size(); ++k) {
      if (a[k].mode != b[k].mode || a[k].range.offset != b[k].range.offset ||
          a[k].range.size != b[k].range.size) {
        return false;
      }
      renames_.push_back({a[k].id, b[k].id, 1});
    }
  }
  std::sort(renames_.begin(), renames_.end(),
            [](const Rename& x, const Rename& y) { return x.from < y.from; });
  std::size_t out = 0;
  for (std::size_t k = 0; k < renames_.size(); ++k) {
    if (out > 0 && renames_[out - 1].from == renames_[k].from) {
      if (renames_[out - 1].to != renames_[k].to) return false;  // one object renamed to two
      ++renames_[out - 1].uses;
    } else {
      renames_[out++] = renames_[k];
    }
  }
  renames_.resize(out);
  by_to_.resize(out);
  for (std::size_t k = 0; k < out; ++k) by_to_[k] = static_cast<std::uint32_t>(k);
  std::sort(by_to_.begin(), by_to_.end(),
            [&](std::uint32_t x, std::uint32_t y) { return renames_[x].to < renames_[y].to; });
  for (std::size_t k = 1; k < out; ++k) {
    if (renames_[by_to_[k - 1]].to == renames_[by_to_[k]].to) return false;  // two renamed to one
  }
  auto refs = [&](ObjectId id) -> std::uint32_t {
    auto it = std::lower_bound(refs_.begin(), refs_.end(), id,
                               [](const auto& r, ObjectId x) { return r.first < x; });
    return it != refs_.end() && it->first == id ? it->second : 0;
  };
  for (const auto& r : renames_) {
    if (r.from == r.to) continue;
    // Renamed everywhere the graph names it (unchanged nodes, nested graphs), and the new name
    // is nowhere else: either new to the graph, or itself renamed away everywhere.
    if (refs(r.from) != r.uses) return false;
    const auto* t = renamed_from(r.to);
    if (refs(r.to) != (t != nullptr ? t->uses : 0u) || (t != nullptr && t->to == t->from)) {
      return false;
    }
  }
  return true;
}

void GraphExecImpl::apply_renames(bool back) {
  auto renamed = [&](ObjectId id) {
    if (back) {
      const auto* r = renamed_to(id);
      return r != nullptr ? r->from : id;
    }
    const auto* r = renamed_from(id);
    return r != nullptr ? r->to : id;
  };
  // The counts keep their object's count under its new name; sorted again by id at once.
  for (auto& ref : refs_) ref.first = renamed(ref.first);
  std::sort(refs_.begin(), refs_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  accesses_.rename(renamed);
}

void GraphExecImpl::update_nodes(std::span<GraphExec::NodeUpdate> updates,
                                 std::span<const std::uint32_t> index, std::source_location loc) {
  auto sorted = [](std::vector<std::uint32_t>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  changed_.assign(index.begin(), index.end());
  sorted(changed_);
  params_changed_.clear();
  for (std::size_t k = 0; k < updates.size(); ++k) {
    if (!updates[k].uses_only) params_changed_.push_back(index[k]);
  }
  sorted(params_changed_);
  auto next = next_version();
  for (std::size_t k = 0; k < updates.size(); ++k) {
    auto& u = updates[k];
    auto& n = next->ir.nodes[index[k]];
    if (u.uses_only) {
      std::swap(n.uses, u.uses);
    } else if (u.kernel) {
      std::get<ir::Kernel>(n.params).work = std::move(*u.kernel);
      std::swap(n.uses, u.uses);  // moved; the caller gets a vector to reuse
    } else if (u.recording) {
      std::get<ir::Captured>(n.params).recording = std::move(u.recording);
      std::swap(n.uses, u.uses);
    } else {
      n.params = ir::Copy{u.dst, u.src, u.bytes};
      std::swap(n.uses, u.uses);
      if (n.uses.empty()) add_address_uses(n, loc);
    }
  }
  // The launch's accesses: renamed in place, else merged again.
  const bool renamed = plan_renames(next->ir);
  std::optional<AccessList> previous_accesses;
  std::vector<std::pair<ObjectId, std::uint32_t>> previous_refs;
  if (renamed) {
    fresh_.clear();
    for (const auto& r : renames_) {
      if (r.from != r.to) fresh_.push_back({r.to, Access::read, {}});
    }
    try {
      Tracker::instance().require_tracked(fresh_, loc);
    } catch (const Error& e) {
      throw Error(e.code(),
                  "graph '" + graph_->ir.name + "': " + e.what() +
                      "; every buffer a graph uses must outlive its launches",
                  loc);
    }
    apply_renames(false);
  } else {
    previous_accesses = std::move(accesses_);
    previous_refs = refs_;
  }
  try {
    if (!renamed) {
      set_accesses(next->ir);
      require_live_buffers(loc);
    }
    // Always called, with no node where only uses changed: the backend moves to the new version
    // (a version it holds is one no later update may reuse).
    auto reason = exec_->update_changed(ir_of(next), params_changed_);
    if (!reason.empty()) {
      retire(std::exchange(exec_, backend_->instantiate_graph(ir_of(next), device_.index)));
      count_instantiation(*exec_);
    }
  } catch (...) {
    if (renamed) {
      apply_renames(true);
    } else {
      accesses_ = std::move(*previous_accesses);
      refs_ = std::move(previous_refs);
    }
    throw;
  }
  // The current version becomes a spare; a few are kept (one per launch in flight would be the
  // most an alternation of bindings reuses).
  constexpr std::size_t kSpare = 4;
  if (spare_.size() == kSpare) spare_.erase(spare_.begin());
  spare_.push_back({std::move(graph_), gen_});
  graph_ = std::move(next);
  ++gen_;
  for (auto i : changed_) node_gen_[i] = gen_;
}

}  // namespace detail

namespace {

using detail::GraphData;

std::uint32_t checked_index(const detail::GraphExecImpl* impl, const Node& node, NodeKind kind,
                            std::string_view what, std::source_location loc) {
  if (impl == nullptr) {
    throw Error(Errc::invalid_state, "GraphExec is empty (default-constructed or moved from)", loc);
  }
  const auto& g = *impl->graph();
  if (!node.valid()) {
    throw Error(Errc::invalid_state,
                std::string(what) + ": node " + std::to_string(node.index()) +
                    " is used after its graph was destroyed; keep the Graph alive while you use "
                    "its nodes",
                loc);
  }
  if (node.index() >= g.ir.nodes.size() || detail::kind_of(g.ir.nodes[node.index()]) != kind) {
    throw Error(Errc::invalid_argument,
                std::string(what) + ": node " + std::to_string(node.index()) + " '" + node.name() +
                    "' is not a " + to_string(kind) + " node of graph '" + g.ir.name +
                    "' this was instantiated from",
                loc);
  }
  return node.index();
}

/// The kind of `node` in impl's graph (any kind where the node is not one of it: checked_index
/// then says so).
NodeKind node_kind(const detail::GraphExecImpl* impl, const Node& node, std::source_location loc) {
  if (impl == nullptr) {
    throw Error(Errc::invalid_state, "GraphExec is empty (default-constructed or moved from)", loc);
  }
  const auto& g = *impl->graph();
  return node.valid() && node.index() < g.ir.nodes.size()
             ? detail::kind_of(g.ir.nodes[node.index()])
             : NodeKind::kernel;
}

}  // namespace

GraphExec::GraphExec() = default;
GraphExec::GraphExec(const Graph& graph, const Device& device, std::source_location loc)
    : impl_(std::make_unique<detail::GraphExecImpl>(std::make_shared<GraphData>(*graph.data()),
                                                    device, loc)) {}
GraphExec::GraphExec(GraphExec&&) noexcept = default;
GraphExec& GraphExec::operator=(GraphExec&&) noexcept = default;
GraphExec::~GraphExec() = default;

void GraphExec::launch(const Context& ctx, std::source_location loc) {
  if (!impl_) throw Error(Errc::invalid_state, "GraphExec is empty; instantiate a Graph", loc);
  impl_->launch(ctx, loc);
}

namespace {
/// A node's new uses: non-zero ids only (an empty or moved-from buffer has none).
void check_uses(const std::vector<Use>& uses, std::string_view what, std::source_location loc) {
  for (const auto& u : uses) {
    if (u.id == 0) {
      throw Error(Errc::invalid_argument,
                  std::string(what) +
                      ": a use of object 0 (an empty or moved-from buffer); declare uses of live "
                      "buffers only",
                  loc);
    }
  }
}
}  // namespace

void GraphExec::set_kernel(const Node& node, KernelWork work, std::source_location loc) {
  auto i = checked_index(impl_.get(), node, NodeKind::kernel, "set_kernel", loc);
  set_kernel(node, std::move(work), impl_->graph()->ir.nodes[i].uses, loc);
}

void GraphExec::set_kernel(const Node& node, KernelWork work, std::vector<Use> uses,
                           std::source_location loc) {
  auto i = checked_index(impl_.get(), node, NodeKind::kernel, "set_kernel", loc);
  const auto& n = impl_->graph()->ir.nodes[i];
  if (std::get<ir::Kernel>(n.params).work.device.has_value() != work.device.has_value()) {
    throw Error(Errc::invalid_argument,
                "set_kernel: node '" + n.name +
                    "' parameter 'device kernel' differs in presence; a kernel node keeps its "
                    "kind of work (instantiate anew to change it)",
                loc);
  }
  check_uses(uses, "set_kernel", loc);
  auto g = impl_->editable();
  std::get<ir::Kernel>(g->ir.nodes[i].params).work = std::move(work);
  g->ir.nodes[i].uses = std::move(uses);
  (void)impl_->update(std::move(g), loc);
}

void GraphExec::set_copy(const Node& node, void* dst, const void* src, std::size_t bytes,
                         std::source_location loc) {
  set_copy(node, dst, src, bytes, {}, loc);
}

void GraphExec::set_copy(const Node& node, void* dst, const void* src, std::size_t bytes,
                         std::vector<Use> uses, std::source_location loc) {
  auto i = checked_index(impl_.get(), node, NodeKind::copy, "set_copy", loc);
  if (bytes != 0 && (dst == nullptr || src == nullptr)) {
    throw Error(Errc::invalid_argument, "set_copy: null pointer", loc);
  }
  check_uses(uses, "set_copy", loc);
  auto g = impl_->editable();
  auto& n = g->ir.nodes[i];
  n.params = ir::Copy{dst, src, bytes};
  n.uses = std::move(uses);
  if (n.uses.empty()) detail::add_address_uses(n, loc);
  (void)impl_->update(std::move(g), loc);
}

void GraphExec::set_memset(const Node& node, void* dst, int value, std::size_t bytes,
                           std::source_location loc) {
  set_memset(node, dst, value, bytes, {}, loc);
}

void GraphExec::set_memset(const Node& node, void* dst, int value, std::size_t bytes,
                           std::vector<Use> uses, std::source_location loc) {
  auto i = checked_index(impl_.get(), node, NodeKind::memset, "set_memset", loc);
  if (bytes != 0 && dst == nullptr) {
    throw Error(Errc::invalid_argument, "set_memset: null pointer", loc);
  }
  check_uses(uses, "set_memset", loc);
  auto g = impl_->editable();
  auto& n = g->ir.nodes[i];
  n.params = ir::Memset{dst, value, bytes};
  n.uses = std::move(uses);
  if (n.uses.empty()) detail::add_address_uses(n, loc);
  (void)impl_->update(std::move(g), loc);
}

void GraphExec::set_host(const Node& node, std::function<void()> fn, std::source_location loc) {
  auto i = checked_index(impl_.get(), node, NodeKind::host, "set_host", loc);
  set_host(node, std::move(fn), impl_->graph()->ir.nodes[i].uses, loc);
}

void GraphExec::set_host(const Node& node, std::function<void()> fn, std::vector<Use> uses,
                         std::source_location loc) {
  auto i = checked_index(impl_.get(), node, NodeKind::host, "set_host", loc);
  if (!fn) throw Error(Errc::invalid_argument, "set_host: empty function", loc);
  check_uses(uses, "set_host", loc);
  auto g = impl_->editable();
  g->ir.nodes[i].params = ir::Host{std::move(fn)};
  g->ir.nodes[i].uses = std::move(uses);
  (void)impl_->update(std::move(g), loc);
}

void GraphExec::set_event_wait(const Node& node, const Event& event, std::source_location loc) {
  auto i = checked_index(impl_.get(), node, NodeKind::event_wait, "set_event_wait", loc);
  auto g = impl_->editable();
  g->events.at(i).wait = event.impl();
  (void)impl_->update(std::move(g), loc);
}

void GraphExec::set_conditional_default(const Node& node, std::int64_t value,
                                        std::source_location loc) {
  const bool loop = impl_ && node.valid() && node.index() < impl_->graph()->ir.nodes.size() &&
                    detail::kind_of(impl_->graph()->ir.nodes[node.index()]) == NodeKind::while_loop;
  auto i = checked_index(impl_.get(), node, loop ? NodeKind::while_loop : NodeKind::if_then,
                         "set_conditional_default", loc);
  const auto& n = impl_->graph()->ir.nodes[i];
  const auto& c = *ir::condition(n);
  if (!c.initial) {
    throw Error(Errc::invalid_argument,
                "set_conditional_default: node '" + n.name +
                    "' was made without a ConditionDefault; give one to add_if/add_while (the "
                    "default's presence is part of the topology)",
                loc);
  }
  if (!Graph::fits(value, c.bytes, c.is_signed)) {
    throw Error(Errc::invalid_argument,
                "set_conditional_default: " + std::to_string(value) +
                    " does not fit the condition of node '" + n.name + "'",
                loc);
  }
  auto g = impl_->editable();
  ir::condition(g->ir.nodes[i])->initial = value;
  (void)impl_->update(std::move(g), loc);
}

void GraphExec::update(std::span<NodeUpdate> updates, std::source_location loc) {
  if (!impl_) throw Error(Errc::invalid_state, "GraphExec is empty; instantiate a Graph", loc);
  if (updates.empty()) return;
  auto& index = impl_->index_scratch();
  index.clear();
  for (const auto& u : updates) {
    if (u.uses_only) {
      if (u.kernel || u.recording || u.dst != nullptr || u.src != nullptr || u.bytes != 0) {
        throw Error(Errc::invalid_argument,
                    "update: node '" + u.node.name() +
                        "' is updated with uses_only and also new parameters; give one or the "
                        "other",
                    loc);
      }
      const auto i =
          checked_index(impl_.get(), u.node, node_kind(impl_.get(), u.node, loc), "update", loc);
      check_uses(u.uses, "update", loc);
      index.push_back(i);
      continue;
    }
    const bool kernel = u.kernel.has_value();
    const bool recorded = !kernel && u.recording != nullptr;
    const auto i = checked_index(impl_.get(), u.node,
                                 kernel     ? NodeKind::kernel
                                 : recorded ? NodeKind::captured
                                            : NodeKind::copy,
                                 "update", loc);
    const auto& n = impl_->graph()->ir.nodes[i];
    if (kernel &&
        std::get<ir::Kernel>(n.params).work.device.has_value() != u.kernel->device.has_value()) {
      throw Error(Errc::invalid_argument,
                  "update: node '" + n.name +
                      "' parameter 'device kernel' differs in presence; a kernel node keeps its "
                      "kind of work (instantiate anew to change it)",
                  loc);
    }
    if (!kernel && !recorded && u.bytes != 0 && (u.dst == nullptr || u.src == nullptr)) {
      throw Error(Errc::invalid_argument, "update: null pointer for copy node '" + n.name + "'",
                  loc);
    }
    check_uses(u.uses, "update", loc);
    index.push_back(i);
  }
  impl_->update_nodes(updates, index, loc);
}

void GraphExec::update(const Graph& graph, std::source_location loc) {
  if (!impl_) throw Error(Errc::invalid_state, "GraphExec is empty; instantiate a Graph", loc);
  auto diff = detail::topology_difference(impl_->graph()->ir, graph.data()->ir);
  if (!diff.empty()) {
    throw Error(Errc::invalid_argument,
                "GraphExec::update: graph '" + graph.name() + "' has another topology than '" +
                    impl_->graph()->ir.name + "': " + diff + ". Instantiate a new GraphExec for it",
                loc);
  }
  (void)impl_->update(std::make_shared<GraphData>(*graph.data()), loc);
  detail::graph_stats().updates.fetch_add(1, std::memory_order_relaxed);
}

const Device& GraphExec::device() const {
  if (!impl_) throw Error(Errc::invalid_state, "GraphExec is empty");
  return impl_->device();
}

Graph GraphExec::graph() const {
  if (!impl_) throw Error(Errc::invalid_state, "GraphExec is empty");
  return Graph(std::make_shared<GraphData>(*impl_->graph()));
}

void GraphExec::write_dot(std::ostream& out) const {
  graph().write_dot(out);
}

}  // namespace sluice
