// Graph building and validation: nodes, edges, cycle and ownership checks, topology comparison.
#include "sluice/graph.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "core/context_impl.hpp"
#include "graph/graph_data.hpp"
#include "graph/graph_stats.hpp"
#include "sluice/error.hpp"

namespace sluice {

const char* to_string(NodeKind kind) noexcept {
  switch (kind) {
    case NodeKind::empty:
      return "empty";
    case NodeKind::kernel:
      return "kernel";
    case NodeKind::copy:
      return "copy";
    case NodeKind::memset:
      return "memset";
    case NodeKind::host:
      return "host";
    case NodeKind::alloc:
      return "alloc";
    case NodeKind::free:
      return "free";
    case NodeKind::child:
      return "child";
    case NodeKind::if_then:
      return "if";
    case NodeKind::while_loop:
      return "while";
    case NodeKind::captured:
      return "captured";
    case NodeKind::event_record:
      return "event record";
    case NodeKind::event_wait:
      return "event wait";
  }
  return "?";
}

namespace detail {

GraphCounters& graph_stats() {
  static GraphCounters c;
  return c;
}

TemporaryStorage::~TemporaryStorage() {
  if (ctx && ptr != nullptr) ctx->deallocate(ptr, bytes);
}

double NodeEvent::elapsed_ms_since(const EventImpl&) {
  throw Error(Errc::invalid_argument,
              "an event recorded by a graph's event record node has no time; time the graph's "
              "launch with events recorded on its context");
}

namespace {
void require_no_events(const ir::Graph& g, const std::string& where) {
  for (const auto& n : g.nodes) {
    const auto kind = kind_of(n);
    if (kind == NodeKind::event_record || kind == NodeKind::event_wait) {
      throw Error(Errc::unsupported, std::string(to_string(kind)) + " node '" + n.name +
                                         "' is inside " + where +
                                         "; event nodes belong to the launched graph itself");
    }
    for (const auto& c : ir::nested(n)) {
      require_no_events(*c, "the nested graph of node '" + n.name + "'");
    }
  }
}
}  // namespace

void require_top_level_events(const ir::Graph& g) {
  for (const auto& n : g.nodes) {
    for (const auto& c : ir::nested(n)) {
      require_no_events(*c, "the nested graph of node '" + n.name + "'");
    }
  }
}

void collect_uses(const ir::Graph& g, std::vector<Use>& out) {
  for (const auto& n : g.nodes) {
    out.insert(out.end(), n.uses.begin(), n.uses.end());
    for (const auto& child : ir::nested(n)) collect_uses(*child, out);
    if (const auto* c = ir::condition(n); c && c->id != 0) {
      // A default is written as the graph starts.
      out.push_back({c->id, c->initial ? Access::read_write : Access::read, {}});
    }
  }
}

namespace {
std::string node_label(const ir::Graph& g, std::uint32_t i) {
  return "node " + std::to_string(i) + " '" + g.nodes[i].name + "'";
}
}  // namespace

std::string topology_difference(const ir::Graph& a, const ir::Graph& b) {
  const auto n = std::min(a.nodes.size(), b.nodes.size());
  for (std::uint32_t i = 0; i < n; ++i) {
    const auto& x = a.nodes[i];
    const auto& y = b.nodes[i];
    const auto kx = kind_of(x);
    const auto ky = kind_of(y);
    if (kx != ky) {
      return node_label(b, i) + ": kind " + to_string(ky) + " instead of " + to_string(kx);
    }
    const auto* cx = ir::condition(x);
    const auto* cy = ir::condition(y);
    if (cx != nullptr && cx->initial.has_value() != cy->initial.has_value()) {
      return node_label(b, i) + ": condition default (present in only one)";
    }
    if (const auto* k = std::get_if<ir::Kernel>(&x.params);
        k != nullptr &&
        k->work.device.has_value() != std::get<ir::Kernel>(y.params).work.device.has_value()) {
      return node_label(b, i) + ": kernel (device kernel present in only one)";
    }
    const auto gx = ir::nested(x);
    const auto gy = ir::nested(y);
    if (gx.size() != gy.size()) {
      return node_label(b, i) + ": nested graphs (" + std::to_string(gy.size()) + " instead of " +
             std::to_string(gx.size()) + ")";
    }
    for (std::size_t k = 0; k < gx.size(); ++k) {
      auto d = topology_difference(*gx[k], *gy[k]);
      if (!d.empty()) return node_label(b, i) + ", nested graph " + std::to_string(k) + ": " + d;
    }
    if (kx == NodeKind::captured && x.name != y.name) {
      return node_label(b, i) + ": operation '" + y.name + "' instead of '" + x.name + "'";
    }
    if (x.context != y.context) {
      return node_label(b, i) + ": context '" + y.context + "' instead of '" + x.context + "'";
    }
  }
  if (a.nodes.size() != b.nodes.size()) {
    if (b.nodes.size() > n) {
      return node_label(b, static_cast<std::uint32_t>(n)) + ": node added (" +
             std::to_string(b.nodes.size()) + " nodes instead of " +
             std::to_string(a.nodes.size()) + ")";
    }
    return node_label(a, static_cast<std::uint32_t>(n)) + ": node removed (" +
           std::to_string(b.nodes.size()) + " nodes instead of " + std::to_string(a.nodes.size()) +
           ")";
  }
  if (a.edges == b.edges) return {};  // a replay records its edges in the same order
  auto ea = a.edges;
  auto eb = b.edges;
  std::sort(ea.begin(), ea.end());
  std::sort(eb.begin(), eb.end());
  if (ea != eb) {
    auto [ia, ib] = std::mismatch(ea.begin(), ea.end(), eb.begin(), eb.end());
    auto e = ib != eb.end() ? *ib : *ia;
    return node_label(b, e.second) + ": edges (the edge from " + node_label(b, e.first) +
           (ib != eb.end() ? " is new)" : " is gone)");
  }
  return {};
}

namespace {
std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}
}  // namespace

void write_dot_body(std::ostream& out, const ir::Graph& g, const std::string& id, int indent) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {
    const auto& n = g.nodes[i];
    std::string label = dot_escape(n.name) + "\\n" + to_string(kind_of(n));
    if (!n.context.empty()) label += "\\n[" + dot_escape(n.context) + "]";
    const auto graphs = ir::nested(n);
    if (graphs.empty()) {
      out << pad << id << "n" << i << " [label=\"" << label << "\"];\n";
      continue;
    }
    // Nested graphs as clusters; the node itself is an anchor inside the first one.
    out << pad << id << "n" << i << " [label=\"" << label << "\", shape=diamond];\n";
    for (std::size_t k = 0; k < graphs.size(); ++k) {
      const std::string sub = id + "n" + std::to_string(i) + "g" + std::to_string(k) + "_";
      out << pad << "subgraph cluster_" << sub << " {\n"
          << pad << "  label=\"" << dot_escape(n.name) << (k == 0 ? "" : " (else)") << "\";\n";
      write_dot_body(out, *graphs[k], sub, indent + 2);
      out << pad << "}\n";
      if (!graphs[k]->nodes.empty()) {
        out << pad << id << "n" << i << " -> " << sub << "n0 [style=dashed];\n";
      }
    }
  }
  for (auto [a, b] : g.edges) out << pad << id << "n" << a << " -> " << id << "n" << b << ";\n";
}

}  // namespace detail

using detail::GraphData;
using detail::kind_of;

namespace {

std::shared_ptr<GraphData> locked(const std::weak_ptr<GraphData>& w, std::uint32_t index,
                                  std::source_location loc) {
  auto g = w.lock();
  if (!g) {
    throw Error(Errc::invalid_state,
                "node " + std::to_string(index) +
                    " is used after its graph was destroyed; keep the Graph alive while you "
                    "use its nodes",
                loc);
  }
  return g;
}

}  // namespace

std::string Node::name() const {
  return locked(graph_, index_, {})->ir.nodes[index_].name;
}
NodeKind Node::kind() const {
  return kind_of(locked(graph_, index_, {})->ir.nodes[index_]);
}

Graph::Graph(std::string name) : data_(std::make_shared<GraphData>()) {
  data_->ir.name = std::move(name);
}
Graph::Graph(const Graph& other) : data_(std::make_shared<GraphData>(*other.data_)) {}
Graph& Graph::operator=(const Graph& other) {
  if (this != &other) data_ = std::make_shared<GraphData>(*other.data_);
  return *this;
}
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;
Graph::~Graph() = default;

const std::string& Graph::name() const noexcept {
  return data_->ir.name;
}
std::size_t Graph::size() const noexcept {
  return data_->ir.nodes.size();
}

Node Graph::node(std::uint32_t index) const {
  if (index >= data_->ir.nodes.size()) {
    throw Error(Errc::invalid_argument, "graph '" + data_->ir.name + "' has " +
                                            std::to_string(data_->ir.nodes.size()) +
                                            " nodes; there is no node " + std::to_string(index));
  }
  return {data_, index};
}

Node Graph::find(std::string_view name) const {
  for (std::uint32_t i = 0; i < data_->ir.nodes.size(); ++i) {
    if (data_->ir.nodes[i].name == name) return {data_, i};
  }
  throw Error(Errc::invalid_argument,
              "graph '" + data_->ir.name + "' has no node named '" + std::string(name) + "'");
}

std::vector<std::pair<std::uint32_t, std::uint32_t>> Graph::edges() const {
  return data_->ir.edges;
}

std::vector<Use> Graph::uses() const {
  std::vector<Use> out;
  detail::collect_uses(data_->ir, out);
  return out;
}

std::uint32_t Graph::check_node(const Node& n, std::string_view role,
                                std::source_location loc) const {
  auto g = locked(n.graph_, n.index_, loc);
  if (g != data_) {
    throw Error(Errc::invalid_argument,
                std::string(role) + " node '" + g->ir.nodes[n.index_].name +
                    "' belongs to graph '" + g->ir.name + "', not to graph '" + data_->ir.name +
                    "'; edges join nodes of one graph (nest a graph with add_child)",
                loc);
  }
  return n.index_;
}

Node Graph::add(ir::Params params, NodeOptions options) {
  const auto index = static_cast<std::uint32_t>(data_->ir.nodes.size());
  for (const auto& a : options.after) (void)check_node(a, "an 'after'", {});
  ir::Node node;
  node.params = std::move(params);
  node.name = options.name.empty()
                  ? std::string(to_string(kind_of(node))) + "#" + std::to_string(index)
                  : std::move(options.name);
  node.uses = std::move(options.uses);
  for (const auto& u : node.uses) {
    if (u.id == 0) {
      throw Error(Errc::invalid_argument,
                  "node '" + node.name +
                      "' declares a use of object 0 (an empty or moved-from buffer); declare "
                      "uses of live buffers only");
    }
  }
  data_->ir.nodes.push_back(std::move(node));
  for (const auto& a : options.after) data_->ir.edges.emplace_back(a.index_, index);
  return {data_, index};
}

Node Graph::add_empty(NodeOptions options) {
  return add(ir::Empty{}, std::move(options));
}

Node Graph::add_kernel(KernelWork work, NodeOptions options) {
  if (!work.host && !work.device) {
    throw Error(Errc::invalid_argument,
                "kernel node '" + options.name +
                    "' has neither a host function nor a device kernel; give at least one");
  }
  return add(ir::Kernel{std::move(work)}, std::move(options));
}

void detail::add_address_uses(ir::Node& n, std::source_location loc) {
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
  if (const auto* c = std::get_if<ir::Copy>(&n.params)) {
    dst = c->dst;
    src = c->src;
    bytes = c->bytes;
  } else if (const auto* m = std::get_if<ir::Memset>(&n.params)) {
    dst = m->dst;
    bytes = m->bytes;
  } else {
    return;
  }
  auto add = [&](const void* p, Access mode) {
    if (p == nullptr || bytes == 0) return;
    auto region = find_memory(p);
    if (!region) return;  // untracked memory: the caller orders it
    const auto off = static_cast<std::size_t>(static_cast<const std::byte*>(p) -
                                              static_cast<const std::byte*>(region->base));
    if (bytes > region->attributes.size - off) {
      throw Error(Errc::invalid_argument,
                  std::string(to_string(kind_of(n))) + " node '" + n.name +
                      "': " + std::to_string(bytes) + " bytes from offset " + std::to_string(off) +
                      " run past the end of its tracked allocation of " +
                      std::to_string(region->attributes.size) + " bytes",
                  loc);
    }
    n.uses.push_back({region->id, mode, {off, bytes}});
  };
  add(dst, Access::write);
  add(src, Access::read);
}

namespace {
/// `options` with the accesses of a copy or memset's addresses in tracked memory added.
NodeOptions with_address_uses(ir::Params params, NodeOptions options) {
  ir::Node n;
  n.params = std::move(params);
  n.name = options.name;
  detail::add_address_uses(n, std::source_location::current());
  options.uses.insert(options.uses.begin(), n.uses.begin(), n.uses.end());
  return options;
}
}  // namespace

Node Graph::add_copy(void* dst, const void* src, std::size_t bytes, NodeOptions options) {
  if (bytes != 0 && (dst == nullptr || src == nullptr)) {
    throw Error(Errc::invalid_argument, "copy node '" + options.name + "': null pointer");
  }
  ir::Copy c{dst, src, bytes};
  return add(c, with_address_uses(c, std::move(options)));
}

Node Graph::add_memset(void* dst, int value, std::size_t bytes, NodeOptions options) {
  if (bytes != 0 && dst == nullptr) {
    throw Error(Errc::invalid_argument, "memset node '" + options.name + "': null pointer");
  }
  ir::Memset m{dst, value, bytes};
  return add(m, with_address_uses(m, std::move(options)));
}

Node Graph::add_host(std::function<void()> fn, NodeOptions options) {
  if (!fn) throw Error(Errc::invalid_argument, "host node '" + options.name + "': empty function");
  return add(ir::Host{std::move(fn)}, std::move(options));
}

Temporary Graph::add_alloc(const Context& ctx, std::size_t bytes, NodeOptions options) {
  auto temp = std::make_shared<detail::TemporaryStorage>();
  temp->ctx = ctx.shared_impl();
  temp->bytes = bytes;
  if (bytes != 0) {
    ctx.impl().enqueue_eager(
        "graph temporary", std::source_location::current(),
        [&](Stream& s, const OpInfo& op) { temp->ptr = s.allocate(bytes, op); });
  }
  void* ptr = temp->ptr;
  auto node = add(ir::Alloc{ptr, bytes, std::move(temp)}, std::move(options));
  return {node, ptr, bytes};
}

Node Graph::add_free(const Temporary& temp, NodeOptions options) {
  auto i = check_node(temp.node, "the alloc", std::source_location::current());
  const auto* alloc = std::get_if<ir::Alloc>(&data_->ir.nodes[i].params);
  if (alloc == nullptr) {
    throw Error(Errc::invalid_argument, "add_free needs the Temporary of an alloc node; node '" +
                                            data_->ir.nodes[i].name + "' is a " +
                                            to_string(kind_of(data_->ir.nodes[i])) + " node");
  }
  ir::Free f{alloc->ptr, alloc->keep_alive};
  if (options.after.empty()) options.after.push_back(temp.node);
  return add(std::move(f), std::move(options));
}

Node Graph::add_event_record(Event& event, NodeOptions options) {
  auto point = std::make_shared<detail::NodeEvent>();
  data_->events.reserve(data_->ir.nodes.size() + 1);  // nothing throws after the node is added
  auto node = add(ir::EventRecord{}, std::move(options));
  data_->events.resize(data_->ir.nodes.size());
  data_->events.back().record = point;
  event.impl_ = std::move(point);
  return node;
}

Node Graph::add_event_wait(const Event& event, NodeOptions options) {
  data_->events.reserve(data_->ir.nodes.size() + 1);
  auto node = add(ir::EventWait{}, std::move(options));
  data_->events.resize(data_->ir.nodes.size());
  data_->events.back().wait = event.impl();
  return node;
}

Node Graph::add_recorded(std::shared_ptr<void> recording, NodeOptions options,
                         std::source_location where) {
  if (!recording) {
    throw Error(Errc::invalid_argument,
                "add_recorded: node '" + options.name + "' has no recording", where);
  }
  return add(ir::Captured{std::move(recording), where}, std::move(options));
}

Node Graph::add_child(const Graph& child, NodeOptions options) {
  return add(ir::Child{std::make_shared<const ir::Graph>(child.data_->ir)}, std::move(options));
}

bool Graph::fits(std::int64_t value, std::size_t bytes, bool is_signed) noexcept {
  if (bytes >= 8) return is_signed || value >= 0;
  const auto bits = static_cast<int>(bytes * 8);
  if (is_signed) {
    const std::int64_t lim = std::int64_t{1} << (bits - 1);
    return value >= -lim && value < lim;
  }
  return value >= 0 && value < (std::int64_t{1} << bits);
}

void Graph::default_out_of_range(std::int64_t value, const NodeOptions& options) {
  throw Error(Errc::invalid_argument, "conditional node '" + options.name + "': default " +
                                          std::to_string(value) +
                                          " does not fit the condition's integer type");
}

Node Graph::add_conditional(const detail::CellPtr& cell, std::size_t bytes, bool is_signed,
                            const Graph* first, const Graph* second, bool loop,
                            std::optional<std::int64_t> initial, NodeOptions options) {
  if (!cell || cell->buffer.data() == nullptr) {
    throw Error(Errc::invalid_argument,
                std::string(loop ? "while" : "if") + " node '" + options.name +
                    "': its condition has no storage; give the Managed storage first (construct "
                    "it with a context, or assign it)");
  }
  ir::Condition c;
  c.value = cell->buffer.data();
  c.bytes = bytes;
  c.is_signed = is_signed;
  c.initial = initial;
  c.id = cell->buffer.id();
  c.keep_alive = cell;
  auto body = std::make_shared<const ir::Graph>(first->data_->ir);
  if (loop) return add(ir::While{std::move(c), std::move(body)}, std::move(options));
  ir::GraphPtr other;
  if (second != nullptr) other = std::make_shared<const ir::Graph>(second->data_->ir);
  return add(ir::If{std::move(c), std::move(body), std::move(other)}, std::move(options));
}

void Graph::add_edge(const Node& from, const Node& to, std::source_location loc) {
  const auto a = check_node(from, "the 'from'", loc);
  const auto b = check_node(to, "the 'to'", loc);
  // A cycle: `a` is reachable from `b` already (or they are one node).
  std::vector<std::vector<std::uint32_t>> succ(data_->ir.nodes.size());
  for (auto [x, y] : data_->ir.edges) succ[x].push_back(y);
  std::vector<std::uint32_t> parent(data_->ir.nodes.size(), UINT32_MAX);
  std::vector<std::uint32_t> todo{b};
  parent[b] = b;
  bool found = a == b;
  while (!todo.empty() && !found) {
    auto n = todo.back();
    todo.pop_back();
    for (auto s : succ[n]) {
      if (parent[s] != UINT32_MAX) continue;
      parent[s] = n;
      if (s == a) {
        found = true;
        break;
      }
      todo.push_back(s);
    }
  }
  if (found) {
    std::string path = "'" + data_->ir.nodes[a].name + "'";
    for (auto n = a; n != b;) {
      n = parent[n];
      path = "'" + data_->ir.nodes[n].name + "' -> " + path;
    }
    throw Error(Errc::invalid_argument,
                "edge '" + data_->ir.nodes[a].name + "' -> '" + data_->ir.nodes[b].name +
                    "' would make a cycle in graph '" + data_->ir.name + "' (" + path + " -> '" +
                    data_->ir.nodes[b].name + "'); a graph must be acyclic",
                loc);
  }
  data_->ir.edges.emplace_back(a, b);
}

void Graph::write_dot(std::ostream& out) const {
  out << "digraph \"" << data_->ir.name << "\" {\n  node [shape=box];\n";
  detail::write_dot_body(out, data_->ir, "", 2);
  out << "}\n";
}

std::string Graph::dot() const {
  std::ostringstream s;
  write_dot(s);
  return s.str();
}

graph::Stats graph::stats() {
  auto& c = detail::graph_stats();
  return {c.captures.load(),      c.instantiations.load(),   c.launches.load(),
          c.updates.load(),       c.reinstantiations.load(), c.eager_fallbacks.load(),
          c.eager_cheaper.load(), c.coalesced_nodes.load(),  c.batched_nodes.load(),
          c.unchanged.load()};
}

}  // namespace sluice
