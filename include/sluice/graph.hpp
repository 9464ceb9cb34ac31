#pragma once
/// @file
/// Task graphs (references 001 and 002): explicit graphs of nodes joined by edges, executable
/// graphs launched as one operation of a context, scoped capture of the work issued on contexts,
/// and record-and-replay with in-place parameter update.
///
/// A `Graph` is a DAG of named nodes. Every node declares what it reads and writes (the tracker's
/// marks), so a launch of the graph is ordered against other work like any sluice operation and
/// memory it uses is never released under it. `GraphExec` is a graph instantiated for one
/// device: on cuda a `cudaGraphExec_t`, on the host a task DAG run on the host backend's shared
/// pool (a chain of nodes runs on the launching thread).
///
/// @code
/// sluice::Graph g("step");
/// auto fill = g.add_memset(x.data(), 0, x.bytes(), {.name = "zero x", .uses = {writes(x)}});
/// auto down = g.add_copy(h.data(), x.data(), x.bytes(),
///                        {.name = "x to host", .uses = {reads(x), writes(h)}, .after = {fill}});
/// sluice::GraphExec exec(g, ctx.device());
/// for (int i = 0; i < 10; ++i) exec.launch(ctx);   // each launch: one operation of ctx
///
/// sluice::Capture cap(ctx);                          // or record what ordinary calls issue
/// sluice::copy(ctx, y, x);
/// sluice::Graph captured = cap.end();
/// @endcode
///
/// Thread safety: a `Graph` and a `GraphExec` are not safe to modify from several threads at
/// once; launching one `GraphExec` from several threads is safe. A `Capture` records the work of
/// every thread that issues on its contexts.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "sluice/context.hpp"
#include "sluice/deps.hpp"
#include "sluice/event.hpp"
#include "sluice/ext/graph_ir.hpp"
#include "sluice/scalar.hpp"

namespace sluice {

namespace detail {
struct GraphData;
class CaptureState;
class GraphExecImpl;
}  // namespace detail

class Graph;

/// What a node does (the IR's node parameters, sluice/ext/graph_ir.hpp, in this order).
enum class NodeKind : std::uint8_t {
  empty,         ///< does nothing; joins edges
  kernel,        ///< a kernel: a function over an index range on the host, a cuda kernel on cuda
  copy,          ///< bytes from one address to another (host, device, peer)
  memset,        ///< bytes set to a value
  host,          ///< a host function
  alloc,         ///< start of a temporary's lifetime (memory owned by the graph)
  free,          ///< end of a temporary's lifetime
  child,         ///< a whole graph as one node
  if_then,       ///< runs its `then` graph (or its `else` graph) on a device integer's value
  while_loop,    ///< runs its body graph while a device integer is non-zero
  captured,      ///< one operation recorded by a Capture (a la step, a scalar program, ...)
  event_record,  ///< records an Event: each launch re-records it (Graph::add_event_record)
  event_wait,    ///< waits for an Event's point (Graph::add_event_wait)
};
/// Lower-case name of a node kind ("kernel", "while", ...).
[[nodiscard]] const char* to_string(NodeKind kind) noexcept;

/// A read of a tracked buffer (anything with `object_id()`), optionally of a byte range.
template <class T>
requires requires(const T& t) {
  t.object_id();
}
[[nodiscard]] Use reads(const T& tracked, ByteRange range = {}) {
  return {tracked.object_id(), Access::read, range};
}
/// A write of a tracked buffer.
template <class T>
requires requires(const T& t) {
  t.object_id();
}
[[nodiscard]] Use writes(const T& tracked, ByteRange range = {}) {
  return {tracked.object_id(), Access::write, range};
}
/// A read and write of a tracked buffer.
template <class T>
requires requires(const T& t) {
  t.object_id();
}
[[nodiscard]] Use updates(const T& tracked, ByteRange range = {}) {
  return {tracked.object_id(), Access::read_write, range};
}

/// A handle to a node of a Graph. Cheap to copy; does not keep the graph alive: using it after
/// its graph is gone, or with another graph, is an Error.
class Node {
 public:
  Node() = default;
  /// The node's name (throws if its graph is gone).
  [[nodiscard]] std::string name() const;
  [[nodiscard]] NodeKind kind() const;
  /// Position in its graph (nodes are numbered in the order they were added).
  [[nodiscard]] std::uint32_t index() const noexcept { return index_; }
  [[nodiscard]] bool valid() const noexcept { return !graph_.expired(); }

 private:
  friend class Graph;
  friend class GraphExec;
  Node(std::weak_ptr<detail::GraphData> g, std::uint32_t i) : graph_(std::move(g)), index_(i) {}
  std::weak_ptr<detail::GraphData> graph_;
  std::uint32_t index_ = 0;
};

/// Options every node takes.
struct NodeOptions {
  std::string name;         ///< shows in DOT output and error messages; default "<kind>#<index>"
  std::vector<Use> uses;    ///< what the node reads and writes
  std::vector<Node> after;  ///< edges: nodes of the same graph this one runs after
};

/// Packs a cuda kernel launch for a kernel node (a plain C++ caller needs only the kernel's
/// declaration).
template <class... Params, class... Args>
[[nodiscard]] DeviceKernel device_kernel(void (*kernel)(Params...), unsigned grid, unsigned block,
                                         std::size_t shared_bytes, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "sluice::device_kernel: pass exactly one argument per kernel parameter");
  DeviceKernel k;
  k.function = reinterpret_cast<const void*>(kernel);
  k.grid[0] = grid;
  k.block[0] = block;
  k.shared_bytes = shared_bytes;
  auto pack = [&k](auto value) {
    std::vector<std::byte> bytes(sizeof(value));
    std::memcpy(bytes.data(), &value, sizeof(value));
    k.args.push_back(std::move(bytes));
  };
  (pack(static_cast<std::remove_cvref_t<Params>>(std::forward<Args>(args))), ...);
  (void)pack;  // a kernel without parameters
  return k;
}

/// A temporary owned by the graph: an alloc node and the memory it stands for.
struct Temporary {
  Node node;
  void* ptr = nullptr;
  std::size_t bytes = 0;
};

/// The value a conditional node assigns to its condition at the start of every run of the graph
/// that holds it (each launch, for a node of the launched graph), before any of that graph's nodes
/// runs: CUDA's `cudaGraphCondAssignDefault`, on every backend. Change it in place with
/// `GraphExec::set_conditional_default`.
struct ConditionDefault {
  std::int64_t value = 0;
};

/// A DAG of named nodes. Copying a Graph copies its nodes (handles of the copy refer to the copy);
/// moving keeps them.
class Graph {
 public:
  explicit Graph(std::string name = "graph");
  Graph(const Graph& other);
  Graph& operator=(const Graph& other);
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  ~Graph();

  [[nodiscard]] const std::string& name() const noexcept;
  [[nodiscard]] std::size_t size() const noexcept;
  /// The node at `index` (0 .. size()-1).
  [[nodiscard]] Node node(std::uint32_t index) const;
  /// The first node named `name`; throws if there is none.
  [[nodiscard]] Node find(std::string_view name) const;
  /// Edges (from, to) by node index.
  [[nodiscard]] std::vector<std::pair<std::uint32_t, std::uint32_t>> edges() const;
  /// Every access its nodes declare (children and conditional bodies included).
  [[nodiscard]] std::vector<Use> uses() const;

  Node add_empty(NodeOptions options = {});
  Node add_kernel(KernelWork work, NodeOptions options = {});
  Node add_copy(void* dst, const void* src, std::size_t bytes, NodeOptions options = {});
  Node add_memset(void* dst, int value, std::size_t bytes, NodeOptions options = {});
  Node add_host(std::function<void()> fn, NodeOptions options = {});
  /// A temporary of `bytes` on ctx's device, owned by the graph and every executable made from
  /// it. Its memory is reserved once, when the node is added (so later nodes can use its
  /// address), and released in stream order on `ctx` when the last owner is gone.
  Temporary add_alloc(const Context& ctx, std::size_t bytes, NodeOptions options = {});
  /// Ends the lifetime of a temporary: nodes after it must not use the memory.
  Node add_free(const Temporary& temp, NodeOptions options = {});
  /// Records `event` when the node runs. The graph binds `event` (and its copies) to the node:
  /// after each launch of an executable made from this graph (or a copy of it), the event stands
  /// for this node in that launch, so `Context::wait(event)` orders later work after the node and
  /// `event.synchronize()` waits for it (and throws a failure of work issued on the launching
  /// context before the launch). Each launch re-records it; before the first launch it is
  /// unrecorded (waiting on it does nothing). `event.record(ctx)` detaches it again. Timing is
  /// not available (`Event::elapsed_ms` throws). Event nodes belong to the launched graph itself,
  /// not to a child graph or a conditional body (an Error at instantiation).
  Node add_event_record(Event& event, NodeOptions options = {});
  /// Waits, when the node runs, for the point `event` stands for now: a point recorded on a
  /// context, or an event record node of another graph (then its most recent launch issued when
  /// this graph is launched). An unrecorded event is not waited for. `GraphExec::set_event_wait`
  /// changes the event in place. On cuda the event must have been recorded on a cuda context (or
  /// by a cuda graph); a failure of the awaited work is reported by the host backend only.
  Node add_event_wait(const Event& event, NodeOptions options = {});
  /// `child` as one node (a copy of it, taken now).
  Node add_child(const Graph& child, NodeOptions options = {});
  /// Runs `then_graph` if `cond` is non-zero when the node starts, else `else_graph`.
  template <class T>
  requires std::is_integral_v<T> Node add_if(const Managed<T>& cond, const Graph& then_graph,
                                             const Graph& else_graph, NodeOptions options = {}) {
    return add_conditional(cond.cell_ptr(), sizeof(T), std::is_signed_v<T>, &then_graph,
                           &else_graph, false, {}, std::move(options));
  }
  template <class T>
  requires std::is_integral_v<T> Node add_if(const Managed<T>& cond, const Graph& then_graph,
                                             NodeOptions options = {}) {
    return add_conditional(cond.cell_ptr(), sizeof(T), std::is_signed_v<T>, &then_graph, nullptr,
                           false, {}, std::move(options));
  }
  /// As above, with `cond` set to `initial` at the start of each run (ConditionDefault).
  template <class T>
  requires std::is_integral_v<T> Node add_if(const Managed<T>& cond, const Graph& then_graph,
                                             const Graph& else_graph, ConditionDefault initial,
                                             NodeOptions options = {}) {
    return add_conditional(cond.cell_ptr(), sizeof(T), std::is_signed_v<T>, &then_graph,
                           &else_graph, false, checked_default<T>(initial, options),
                           std::move(options));
  }
  template <class T>
  requires std::is_integral_v<T> Node add_if(const Managed<T>& cond, const Graph& then_graph,
                                             ConditionDefault initial, NodeOptions options = {}) {
    return add_conditional(cond.cell_ptr(), sizeof(T), std::is_signed_v<T>, &then_graph, nullptr,
                           false, checked_default<T>(initial, options), std::move(options));
  }
  /// Runs `body` while `cond` is non-zero: tested before each trip, on the device (body nodes
  /// write `cond` to end the loop).
  template <class T>
  requires std::is_integral_v<T> Node add_while(const Managed<T>& cond, const Graph& body,
                                                NodeOptions options = {}) {
    return add_conditional(cond.cell_ptr(), sizeof(T), std::is_signed_v<T>, &body, nullptr, true,
                           {}, std::move(options));
  }
  /// As above, with `cond` set to `initial` at the start of each run (ConditionDefault): a loop
  /// that runs anew at every launch without a node to reset its counter.
  template <class T>
  requires std::is_integral_v<T> Node add_while(const Managed<T>& cond, const Graph& body,
                                                ConditionDefault initial,
                                                NodeOptions options = {}) {
    return add_conditional(cond.cell_ptr(), sizeof(T), std::is_signed_v<T>, &body, nullptr, true,
                           checked_default<T>(initial, options), std::move(options));
  }

  /// `to` runs after `from`. A cycle, or a node of another graph, is an Error naming them.
  void add_edge(const Node& from, const Node& to,
                std::source_location loc = std::source_location::current());

  /// Graphviz DOT: node names and kinds, edges, the contexts nodes were captured from.
  void write_dot(std::ostream& out) const;
  [[nodiscard]] std::string dot() const;

  /// Internal (the lazy layer's BLAS calls on cuda): one operation the backend recorded itself,
  /// in its own format (sluice/ext/graph_ir.hpp's `ir::Captured`), as a captured node.
  Node add_recorded(std::shared_ptr<void> recording, NodeOptions options,
                    std::source_location where = std::source_location::current());

  /// Internal.
  [[nodiscard]] const std::shared_ptr<detail::GraphData>& data() const noexcept { return data_; }
  explicit Graph(std::shared_ptr<detail::GraphData> data) : data_(std::move(data)) {}

 private:
  Node add_conditional(const detail::CellPtr& cell, std::size_t bytes, bool is_signed,
                       const Graph* first, const Graph* second, bool loop,
                       std::optional<std::int64_t> initial, NodeOptions options);
  template <class T>
  static std::int64_t checked_default(ConditionDefault d, const NodeOptions& options) {
    if (!fits(d.value, sizeof(T), std::is_signed_v<T>)) default_out_of_range(d.value, options);
    return d.value;
  }
  static bool fits(std::int64_t value, std::size_t bytes, bool is_signed) noexcept;
  [[noreturn]] static void default_out_of_range(std::int64_t value, const NodeOptions& options);
  Node add(ir::Params params, NodeOptions options);
  std::uint32_t check_node(const Node& n, std::string_view role, std::source_location loc) const;
  friend class GraphExec;

  std::shared_ptr<detail::GraphData> data_;
};

/// A graph instantiated for one device. Launching is one operation of a context, ordered by the
/// tracker from the graph's declared accesses.
class GraphExec {
 public:
  GraphExec();
  /// Instantiates `graph` for `device` (validates it: every node must be runnable there).
  GraphExec(const Graph& graph, const Device& device,
            std::source_location loc = std::source_location::current());
  GraphExec(GraphExec&&) noexcept;
  GraphExec& operator=(GraphExec&&) noexcept;
  ~GraphExec();

  /// Runs the graph as one operation of `ctx` (ctx must be on the exec's device). Earlier work on
  /// other contexts that conflicts with the graph's accesses is waited for; later work waits for
  /// the launch.
  void launch(const Context& ctx, std::source_location loc = std::source_location::current());

  /// In-place updates of one node's parameters (no re-instantiation); later launches see them,
  /// launches already issued do not. `node` must be a node of the graph this was made from (by
  /// index and kind). Later launches are ordered by the node's new uses: a copy or memset takes
  /// the accesses of its new addresses (tracked memory; with `uses`, those instead), a kernel or
  /// host node the `uses` given (without them it keeps the ones it declared: pass them whenever
  /// the new work touches other memory).
  void set_kernel(const Node& node, KernelWork work,
                  std::source_location loc = std::source_location::current());
  void set_kernel(const Node& node, KernelWork work, std::vector<Use> uses,
                  std::source_location loc = std::source_location::current());
  void set_copy(const Node& node, void* dst, const void* src, std::size_t bytes,
                std::source_location loc = std::source_location::current());
  void set_copy(const Node& node, void* dst, const void* src, std::size_t bytes,
                std::vector<Use> uses, std::source_location loc = std::source_location::current());
  void set_memset(const Node& node, void* dst, int value, std::size_t bytes,
                  std::source_location loc = std::source_location::current());
  void set_memset(const Node& node, void* dst, int value, std::size_t bytes, std::vector<Use> uses,
                  std::source_location loc = std::source_location::current());
  void set_host(const Node& node, std::function<void()> fn,
                std::source_location loc = std::source_location::current());
  void set_host(const Node& node, std::function<void()> fn, std::vector<Use> uses,
                std::source_location loc = std::source_location::current());
  /// The event an event wait node waits for, from the next launch on.
  void set_event_wait(const Node& node, const Event& event,
                      std::source_location loc = std::source_location::current());
  /// The ConditionDefault of an if or while node made with one (it must fit the condition's
  /// type); later launches assign `value` to the condition as they start.
  void set_conditional_default(const Node& node, std::int64_t value,
                               std::source_location loc = std::source_location::current());
  /// One node's new parameters for `update(std::span<NodeUpdate>)`: a kernel node's work (as
  /// set_kernel), a captured node's new recording (internal: one the backend made for a node of
  /// Graph::add_recorded, of the same topology), or else a copy node's addresses (as set_copy),
  /// and its uses from then on (for a copy, empty: those of its new addresses). With
  /// `uses_only`, a node of any kind keeps its parameters and takes only the new uses: for work
  /// that finds its buffers elsewhere than in its parameters (a table of addresses another node
  /// of the graph writes), whose uses still tell the tracker what it reads and writes.
  struct NodeUpdate {
    Node node;
    std::optional<KernelWork> kernel;
    std::shared_ptr<void> recording;
    void* dst = nullptr;
    const void* src = nullptr;
    std::size_t bytes = 0;
    std::vector<Use> uses;
    bool uses_only = false;
  };
  /// Several nodes' updates at once, as the set_kernel / set_copy calls with uses would make them
  /// one by one, for the cost of one: one copy of the graph's parameters and one backend update
  /// (on cuda only the parameters that changed are set). The work and uses are moved from
  /// `updates`. All or nothing: a bad update throws Error and leaves the executable unchanged.
  void update(std::span<NodeUpdate> updates,
              std::source_location loc = std::source_location::current());
  /// Takes every parameter from `graph`, which must have the same topology (nodes of the same
  /// kinds in the same order, the same edges, the same nested graphs); otherwise throws Error
  /// naming the first node and parameter that differ, and leaves this unchanged.
  void update(const Graph& graph, std::source_location loc = std::source_location::current());

  [[nodiscard]] const Device& device() const;
  /// The graph as last updated (its DOT is that of the executable).
  [[nodiscard]] Graph graph() const;
  void write_dot(std::ostream& out) const;

 private:
  std::unique_ptr<detail::GraphExecImpl> impl_;
};

/// Records everything issued on `ctx` (and on contexts that join the capture by waiting on its
/// work, through `wait_for`, `fork` or the tracker) into a Graph instead of running it.
///
/// Operations that cannot be part of a graph (a host wait such as `synchronize` or
/// `Managed::value()`, a host accessor of captured memory, a copy from or to pageable host
/// memory, a blocking-kind context, a foreign call that invalidates a cuda stream capture) throw
/// Error(invalid_state) naming the operation and its line; the partial capture is then discarded
/// and every context involved stays usable. Allocations made during a capture happen at once
/// (they are owned by their buffers, which must outlive the graph's launches).
class Capture {
 public:
  explicit Capture(const Context& ctx, std::string name = "capture",
                   std::source_location loc = std::source_location::current());
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;
  /// Ends the capture if `end` was not called, discarding what was recorded.
  ~Capture();
  /// Ends the capture and returns the graph. A context that joined the capture and was not
  /// joined back into `ctx` is an Error naming it (the capture is discarded).
  [[nodiscard]] Graph end(std::source_location loc = std::source_location::current());
  /// True while recording (false after end, or after a guard error discarded it).
  [[nodiscard]] bool active() const noexcept;

 private:
  friend class Replay;  // sizes the capture from the last one
  std::shared_ptr<detail::CaptureState> state_;
};

/// Counters of the graph layer (process-wide, monotonic).
namespace graph {
struct Stats {
  std::uint64_t captures = 0;
  std::uint64_t instantiations = 0;
  std::uint64_t launches = 0;
  std::uint64_t updates = 0;           ///< whole-exec updates (replays whose parameters changed)
  std::uint64_t reinstantiations = 0;  ///< replays whose topology changed
  std::uint64_t eager_fallbacks = 0;   ///< replays run eagerly after a capture-guard error
  /// Replays run eagerly because issuing their body so cost less host time than their recent
  /// replays (capture, comparison, updates and launch) did, and the eager runs that measure it.
  std::uint64_t eager_cheaper = 0;
  /// Nodes that instantiations ran merged into batched nodes (on cuda: runs of small memsets and
  /// copies performed by one kernel node, so that a launch has fewer nodes), and the batched
  /// nodes made of them. SLUICE_GRAPH_COALESCE=0 turns batching off.
  std::uint64_t coalesced_nodes = 0;
  std::uint64_t batched_nodes = 0;
  /// Replays whose body recorded, operation by operation, exactly what their executable holds:
  /// launched as it is, without a comparison after the capture or an update.
  std::uint64_t unchanged = 0;
};
[[nodiscard]] Stats stats();
}  // namespace graph

/// Why a replay did not simply update and launch.
struct ReplayEvent {
  /// eager: the capture guard stopped the capture; eager_cheaper: the key's body is issued
  /// eagerly from now on (until a later replay measures cheaper), as that costs less host time.
  enum class Kind : std::uint8_t { instantiated, reinstantiated, eager, eager_cheaper } kind;
  std::string key;
  std::string reason;  ///< e.g. "node 3 'axpy': operation differs", or the guard error
};

/// Record and replay: `run(ctx, key, body)` captures `body` on ctx; the first time it
/// instantiates and launches; later it captures again, compares with the cached topology, and if
/// equal updates the parameters and launches, else re-instantiates (reported through the
/// callback). A body that hits the capture guard runs eagerly instead (also reported). A key whose
/// replays cost more host time than issuing its body eagerly (many changed parameters to apply)
/// runs eagerly instead, measuring both now and then (`graph::Stats::eager_cheaper`, reported
/// as `ReplayEvent::Kind::eager_cheaper` when it switches): never slower than eager issue by
/// more than those measurements. Outputs are ordinary tracked buffers.
///
/// @code
/// sluice::Replay replay;
/// for (auto& batch : batches) replay.run(ctx, "step", [&] { step(ctx, batch); });
/// @endcode
struct ReplayOptions {
  /// Issue a key's body eagerly while that measures cheaper in host time than its replays (see
  /// Replay). Off: every run replays (to test the update path, or where a graph's shorter device
  /// time matters more than the host's issue time).
  bool eager_when_cheaper = true;
};

class Replay {
 public:
  using Callback = std::function<void(const ReplayEvent&)>;
  Replay();
  explicit Replay(ReplayOptions options);
  ~Replay();
  Replay(const Replay&) = delete;
  Replay& operator=(const Replay&) = delete;
  void on_event(Callback callback);
  void run(const Context& ctx, const std::string& key, const std::function<void()>& body,
           std::source_location loc = std::source_location::current());
  /// Cached executables.
  [[nodiscard]] std::size_t size() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// `Replay::run` on a process-wide cache.
void replay(const Context& ctx, const std::string& key, const std::function<void()>& body,
            std::source_location loc = std::source_location::current());

}  // namespace sluice
