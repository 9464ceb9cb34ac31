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

std::vector<std::vector<std::uint32_t>> predecessors(const GraphData& g) {
  std::vector<std::vector<std::uint32_t>> pred(g.nodes.size());
  for (auto [a, b] : g.edges) pred[b].push_back(a);
  return pred;
}

double NodeEvent::elapsed_ms_since(const EventImpl&) {
  throw Error(Errc::invalid_argument,
              "an event recorded by a graph's event record node has no time; time the graph's "
              "launch with events recorded on its context");
}

namespace {
void require_no_events(const GraphData& g, const std::string& where) {
  for (const auto& n : g.nodes) {
    if (n.kind == NodeKind::event_record || n.kind == NodeKind::event_wait) {
      throw Error(Errc::unsupported, std::string(to_string(n.kind)) + " node '" + n.name +
                                         "' is inside " + where +
                                         "; event nodes belong to the launched graph itself");
    }
    for (const auto& c : n.graphs)
      require_no_events(*c, "the nested graph of node '" + n.name + "'");
  }
}
}  // namespace

void require_top_level_events(const GraphData& g) {
  for (const auto& n : g.nodes) {
    for (const auto& c : n.graphs) {
      require_no_events(*c, "the nested graph of node '" + n.name + "'");
    }
  }
}

void assign_default(const NodeData& n) noexcept {
  void* p = n.cond->buffer.data();
  if (n.cond_bytes == 8) {
    const std::int64_t v = *n.cond_default;
    std::memcpy(p, &v, 8);
  } else {
    const auto v = static_cast<std::int32_t>(*n.cond_default);
    std::memcpy(p, &v, 4);
  }
}

void collect_uses(const GraphData& g, std::vector<Use>& out) {
  for (const auto& n : g.nodes) {
    out.insert(out.end(), n.uses.begin(), n.uses.end());
    for (const auto& child : n.graphs) collect_uses(*child, out);
    if (n.cond && n.cond->buffer.id() != 0) {
      // A default is written as the graph starts.
      out.push_back({n.cond->buffer.id(), n.cond_default ? Access::read_write : Access::read, {}});
    }
  }
}

namespace {
std::string node_label(const GraphData& g, std::uint32_t i) {
  return "node " + std::to_string(i) + " '" + g.nodes[i].name + "'";
}
}  // namespace

std::string topology_difference(const GraphData& a, const GraphData& b) {
  const auto n = std::min(a.nodes.size(), b.nodes.size());
  for (std::uint32_t i = 0; i < n; ++i) {
    const auto& x = a.nodes[i];
    const auto& y = b.nodes[i];
    if (x.kind != y.kind) {
      return node_label(b, i) + ": kind " + to_string(y.kind) + " instead of " + to_string(x.kind);
    }
    if (x.kind == NodeKind::captured && x.name != y.name) {
      return node_label(b, i) + ": operation '" + y.name + "' instead of '" + x.name + "'";
    }
    if (x.cond_default.has_value() != y.cond_default.has_value()) {
      return node_label(b, i) + ": condition default (present in only one)";
    }
    if (x.kind == NodeKind::kernel && x.kernel.device.has_value() != y.kernel.device.has_value()) {
      return node_label(b, i) + ": kernel (device kernel present in only one)";
    }
    if (x.graphs.size() != y.graphs.size()) {
      return node_label(b, i) + ": nested graphs (" + std::to_string(y.graphs.size()) +
             " instead of " + std::to_string(x.graphs.size()) + ")";
    }
    for (std::size_t k = 0; k < x.graphs.size(); ++k) {
      auto d = topology_difference(*x.graphs[k], *y.graphs[k]);
      if (!d.empty()) return node_label(b, i) + ", nested graph " + std::to_string(k) + ": " + d;
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

void write_dot_body(std::ostream& out, const GraphData& g, const std::string& id, int indent) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  for (std::uint32_t i = 0; i < g.nodes.size(); ++i) {
    const auto& n = g.nodes[i];
    std::string label = dot_escape(n.name) + "\\n" + to_string(n.kind);
    if (!n.context.empty()) label += "\\n[" + dot_escape(n.context) + "]";
    if (n.graphs.empty()) {
      out << pad << id << "n" << i << " [label=\"" << label << "\"];\n";
      continue;
    }
    // Nested graphs as clusters; the node itself is an anchor inside the first one.
    out << pad << id << "n" << i << " [label=\"" << label << "\", shape=diamond];\n";
    for (std::size_t k = 0; k < n.graphs.size(); ++k) {
      const std::string sub = id + "n" + std::to_string(i) + "g" + std::to_string(k) + "_";
      out << pad << "subgraph cluster_" << sub << " {\n"
          << pad << "  label=\"" << dot_escape(n.name) << (k == 0 ? "" : " (else)") << "\";\n";
      write_dot_body(out, *n.graphs[k], sub, indent + 2);
      out << pad << "}\n";
      if (!n.graphs[k]->nodes.empty()) {
        out << pad << id << "n" << i << " -> " << sub << "n0 [style=dashed];\n";
      }
    }
  }
  for (auto [a, b] : g.edges) out << pad << id << "n" << a << " -> " << id << "n" << b << ";\n";
}

}  // namespace detail

using detail::GraphData;
using detail::NodeData;

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
  return locked(graph_, index_, {})->nodes[index_].name;
}
NodeKind Node::kind() const {
  return locked(graph_, index_, {})->nodes[index_].kind;
}

Graph::Graph(std::string name) : data_(std::make_shared<GraphData>()) {
  data_->name = std::move(name);
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
  return data_->name;
}
std::size_t Graph::size() const noexcept {
  return data_->nodes.size();
}

Node Graph::node(std::uint32_t index) const {
  if (index >= data_->nodes.size()) {
    throw Error(Errc::invalid_argument, "graph '" + data_->name + "' has " +
                                            std::to_string(data_->nodes.size()) +
                                            " nodes; there is no node " + std::to_string(index));
  }
  return {data_, index};
}

Node Graph::find(std::string_view name) const {
  for (std::uint32_t i = 0; i < data_->nodes.size(); ++i) {
    if (data_->nodes[i].name == name) return {data_, i};
  }
  throw Error(Errc::invalid_argument,
              "graph '" + data_->name + "' has no node named '" + std::string(name) + "'");
}

std::vector<std::pair<std::uint32_t, std::uint32_t>> Graph::edges() const {
  return data_->edges;
}

std::vector<Use> Graph::uses() const {
  std::vector<Use> out;
  detail::collect_uses(*data_, out);
  return out;
}

std::uint32_t Graph::check_node(const Node& n, std::string_view role,
                                std::source_location loc) const {
  auto g = locked(n.graph_, n.index_, loc);
  if (g != data_) {
    throw Error(Errc::invalid_argument,
                std::string(role) + " node '" + g->nodes[n.index_].name + "' belongs to graph '" +
                    g->name + "', not to graph '" + data_->name +
                    "'; edges join nodes of one graph (nest a graph with add_child)",
                loc);
  }
  return n.index_;
}

Node Graph::add(NodeData node, NodeOptions options) {
  const auto index = static_cast<std::uint32_t>(data_->nodes.size());
  for (const auto& a : options.after) (void)check_node(a, "an 'after'", {});
  node.name = options.name.empty() ? std::string(to_string(node.kind)) + "#" + std::to_string(index)
                                   : std::move(options.name);
  node.uses.insert(node.uses.end(), options.uses.begin(), options.uses.end());
  for (const auto& u : node.uses) {
    if (u.id == 0) {
      throw Error(Errc::invalid_argument,
                  "node '" + node.name +
                      "' declares a use of object 0 (an empty or moved-from buffer); declare "
                      "uses of live buffers only");
    }
  }
  data_->nodes.push_back(std::move(node));
  for (const auto& a : options.after) data_->edges.emplace_back(a.index_, index);
  return {data_, index};
}

Node Graph::add_empty(NodeOptions options) {
  return add({}, std::move(options));
}

Node Graph::add_kernel(KernelWork work, NodeOptions options) {
  if (!work.host && !work.device) {
    throw Error(Errc::invalid_argument,
                "kernel node '" + options.name +
                    "' has neither a host function nor a device kernel; give at least one");
  }
  NodeData n;
  n.kind = NodeKind::kernel;
  n.kernel = std::move(work);
  return add(std::move(n), std::move(options));
}

void detail::add_address_uses(NodeData& n, std::source_location loc) {
  auto add = [&](const void* p, Access mode) {
    if (p == nullptr || n.bytes == 0) return;
    auto region = find_memory(p);
    if (!region) return;  // untracked memory: the caller orders it
    const auto off = static_cast<std::size_t>(static_cast<const std::byte*>(p) -
                                              static_cast<const std::byte*>(region->base));
    if (n.bytes > region->attributes.size - off) {
      throw Error(Errc::invalid_argument,
                  std::string(to_string(n.kind)) + " node '" + n.name +
                      "': " + std::to_string(n.bytes) + " bytes from offset " +
                      std::to_string(off) + " run past the end of its tracked allocation of " +
                      std::to_string(region->attributes.size) + " bytes",
                  loc);
    }
    n.uses.push_back({region->id, mode, {off, n.bytes}});
  };
  add(n.dst, Access::write);
  if (n.kind == NodeKind::copy) add(n.src, Access::read);
}

Node Graph::add_copy(void* dst, const void* src, std::size_t bytes, NodeOptions options) {
  if (bytes != 0 && (dst == nullptr || src == nullptr)) {
    throw Error(Errc::invalid_argument, "copy node '" + options.name + "': null pointer");
  }
  NodeData n;
  n.kind = NodeKind::copy;
  n.dst = dst;
  n.src = src;
  n.bytes = bytes;
  n.name = options.name;
  detail::add_address_uses(n, std::source_location::current());
  return add(std::move(n), std::move(options));
}

Node Graph::add_memset(void* dst, int value, std::size_t bytes, NodeOptions options) {
  if (bytes != 0 && dst == nullptr) {
    throw Error(Errc::invalid_argument, "memset node '" + options.name + "': null pointer");
  }
  NodeData n;
  n.kind = NodeKind::memset;
  n.dst = dst;
  n.value = value;
  n.bytes = bytes;
  n.name = options.name;
  detail::add_address_uses(n, std::source_location::current());
  return add(std::move(n), std::move(options));
}

Node Graph::add_host(std::function<void()> fn, NodeOptions options) {
  if (!fn) throw Error(Errc::invalid_argument, "host node '" + options.name + "': empty function");
  NodeData n;
  n.kind = NodeKind::host;
  n.host = std::move(fn);
  return add(std::move(n), std::move(options));
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
  NodeData n;
  n.kind = NodeKind::alloc;
  n.temp = temp;
  n.bytes = bytes;
  auto node = add(std::move(n), std::move(options));
  return {node, temp->ptr, bytes};
}

Node Graph::add_free(const Temporary& temp, NodeOptions options) {
  auto i = check_node(temp.node, "the alloc", std::source_location::current());
  if (data_->nodes[i].kind != NodeKind::alloc) {
    throw Error(Errc::invalid_argument, "add_free needs the Temporary of an alloc node; node '" +
                                            data_->nodes[i].name + "' is a " +
                                            to_string(data_->nodes[i].kind) + " node");
  }
  NodeData n;
  n.kind = NodeKind::free;
  n.temp = data_->nodes[i].temp;
  if (options.after.empty()) options.after.push_back(temp.node);
  return add(std::move(n), std::move(options));
}

Node Graph::add_event_record(Event& event, NodeOptions options) {
  NodeData n;
  n.kind = NodeKind::event_record;
  n.record_event = std::make_shared<detail::NodeEvent>();
  auto point = n.record_event;
  auto node = add(std::move(n), std::move(options));
  event.impl_ = std::move(point);  // only once nothing can throw
  return node;
}

Node Graph::add_event_wait(const Event& event, NodeOptions options) {
  NodeData n;
  n.kind = NodeKind::event_wait;
  n.wait_event = event.impl();
  return add(std::move(n), std::move(options));
}

Node Graph::add_child(const Graph& child, NodeOptions options) {
  NodeData n;
  n.kind = NodeKind::child;
  n.graphs.push_back(std::make_shared<const GraphData>(*child.data_));
  return add(std::move(n), std::move(options));
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
  NodeData n;
  n.kind = loop ? NodeKind::while_loop : NodeKind::if_then;
  n.cond = cell;
  n.cond_bytes = bytes;
  n.cond_signed = is_signed;
  n.cond_default = initial;
  n.graphs.push_back(std::make_shared<const GraphData>(*first->data_));
  if (second != nullptr) n.graphs.push_back(std::make_shared<const GraphData>(*second->data_));
  return add(std::move(n), std::move(options));
}

void Graph::add_edge(const Node& from, const Node& to, std::source_location loc) {
  const auto a = check_node(from, "the 'from'", loc);
  const auto b = check_node(to, "the 'to'", loc);
  // A cycle: `a` is reachable from `b` already (or they are one node).
  std::vector<std::vector<std::uint32_t>> succ(data_->nodes.size());
  for (auto [x, y] : data_->edges) succ[x].push_back(y);
  std::vector<std::uint32_t> parent(data_->nodes.size(), UINT32_MAX);
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
    std::string path = "'" + data_->nodes[a].name + "'";
    for (auto n = a; n != b;) {
      n = parent[n];
      path = "'" + data_->nodes[n].name + "' -> " + path;
    }
    throw Error(Errc::invalid_argument,
                "edge '" + data_->nodes[a].name + "' -> '" + data_->nodes[b].name +
                    "' would make a cycle in graph '" + data_->name + "' (" + path + " -> '" +
                    data_->nodes[b].name + "'); a graph must be acyclic",
                loc);
  }
  data_->edges.emplace_back(a, b);
}

void Graph::write_dot(std::ostream& out) const {
  out << "digraph \"" << data_->name << "\" {\n  node [shape=box];\n";
  detail::write_dot_body(out, *data_, "", 2);
  out << "}\n";
}

std::string Graph::dot() const {
  std::ostringstream s;
  write_dot(s);
  return s.str();
}

graph::Stats graph::stats() {
  auto& c = detail::graph_stats();
  return {c.captures.load(),     c.instantiations.load(),   c.launches.load(),
          c.updates.load(),      c.reinstantiations.load(), c.eager_fallbacks.load(),
          c.eager_cheaper.load()};
}

}  // namespace sluice
