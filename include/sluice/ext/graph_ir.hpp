#pragma once
/// @file
/// The graph IR a backend instantiates (sluice/backend.hpp's `Backend::instantiate_graph` and
/// `GraphExecutable`): plain data, built by the core from a `sluice::Graph` or a `Capture`
/// (sluice/graph.hpp). For backend authors; users build graphs with sluice/graph.hpp.
///
/// A graph is nodes and edges by node index. Each node's parameters are one alternative of
/// `ir::Params`, in the order of `sluice::NodeKind` (`params.index()` is the kind). Whatever a
/// node points at is kept alive by its `keep_alive` members and the graph's, as long as the
/// `ir::Graph` itself: a backend that keeps the `shared_ptr<const ir::Graph>` it was given while
/// a launch may run needs nothing else. The core checks before instantiating that event nodes lie
/// in the launched graph only, that every buffer a node declares is alive, and, before an update,
/// that the topology is the same.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "sluice/access.hpp"

namespace sluice {

class EventImpl;  // sluice/backend.hpp

/// A cuda kernel with its arguments, for a kernel node on the cuda backend. Build it with
/// `device_kernel(kernel, grid, block, shared, args...)` (sluice/graph.hpp): the arguments are
/// converted to the kernel's parameter types and stored by value.
struct DeviceKernel {
  const void* function = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  std::size_t shared_bytes = 0;
  std::vector<std::vector<std::byte>> args;  ///< one entry per parameter, its bytes
};

/// A kernel node's work. On the host `host(lo, hi)` runs over chunks of [0, range), possibly
/// concurrently; on cuda `device` is launched. A node may carry both (a portable graph).
struct KernelWork {
  std::size_t range = 0;
  std::function<void(std::size_t lo, std::size_t hi)> host;
  std::optional<DeviceKernel> device;
};

namespace ir {

struct Graph;
using GraphPtr = std::shared_ptr<const Graph>;

struct Empty {};
struct Kernel {
  KernelWork work;
};
/// `bytes` from `src` to `dst` (host, device or peer memory the backend's copies reach).
struct Copy {
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
};
/// `bytes` at `dst` set to `value` (its low byte).
struct Memset {
  void* dst = nullptr;
  int value = 0;
  std::size_t bytes = 0;
};
/// A host function. What it throws is a failure of the launch.
struct Host {
  std::function<void()> fn;
};
/// The start of a temporary's lifetime. The core reserved `ptr` (`bytes` on the graph's device)
/// when the node was added, and releases it once `keep_alive` is gone: nothing to run.
struct Alloc {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  std::shared_ptr<const void> keep_alive;
};
/// The end of a temporary's lifetime (nodes after it do not use `ptr`): nothing to run.
struct Free {
  void* ptr = nullptr;
  std::shared_ptr<const void> keep_alive;
};
/// A whole graph as one node.
struct Child {
  GraphPtr graph;
};
/// The device integer a conditional node tests: `bytes` (4 or 8) at `value`, memory the
/// graph's device reads and the host backend reads directly. If `initial` is set, it is written
/// there as the graph holding the node starts, before any of that graph's nodes runs (CUDA's
/// `cudaGraphCondAssignDefault`).
struct Condition {
  void* value = nullptr;
  std::size_t bytes = 4;
  bool is_signed = true;
  std::optional<std::int64_t> initial;
  ObjectId id = 0;  ///< the tracked object holding it (0 if none)
  std::shared_ptr<const void> keep_alive;

  /// Whether the integer is non-zero, read from host-reachable memory.
  [[nodiscard]] bool read() const noexcept {
    if (bytes == 8) {
      std::int64_t v;
      std::memcpy(&v, value, 8);
      return v != 0;
    }
    std::int32_t v;
    std::memcpy(&v, value, 4);
    return v != 0;
  }
  /// Writes `*initial` into host-reachable memory.
  void assign_initial() const noexcept {
    if (bytes == 8) {
      const std::int64_t v = *initial;
      std::memcpy(value, &v, 8);
    } else {
      const auto v = static_cast<std::int32_t>(*initial);
      std::memcpy(value, &v, 4);
    }
  }
};
/// Runs `then_graph` if the condition is non-zero when the node starts, else `else_graph` (may
/// be null: nothing).
struct If {
  Condition cond;
  GraphPtr then_graph;
  GraphPtr else_graph;
};
/// Runs `body` while the condition is non-zero, tested before each trip.
struct While {
  Condition cond;
  GraphPtr body;
};
/// One operation recorded by the backend's own `Stream::end_capture` (its format is the
/// backend's), issued at `where`.
struct Captured {
  std::shared_ptr<void> recording;
  std::source_location where;
};
/// Records a point per launch: the backend gives it back in `LaunchEvents::records`.
struct EventRecord {};
/// Waits, per launch, for the point the core gives in `LaunchEvents::waits` (none if null).
struct EventWait {};

/// A node's parameters, in the order of `sluice::NodeKind`.
using Params = std::variant<Empty, Kernel, Copy, Memset, Host, Alloc, Free, Child, If, While,
                            Captured, EventRecord, EventWait>;

struct Node {
  std::string name;
  std::vector<Use> uses;  ///< what it reads and writes (the core orders launches by them)
  Params params;
  std::string context;  ///< the context a captured node came from; empty for built nodes
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;  ///< (from, to) by node index
  /// Objects its nodes use that the graph owns (e.g. objects destroyed during a capture).
  std::vector<std::shared_ptr<const void>> keep_alive;
};

/// The nested graphs of a node (a child's graph, an if's then and else, a loop's body), in
/// that order; empty for other kinds.
[[nodiscard]] inline std::vector<GraphPtr> nested(const Node& n) {
  if (const auto* c = std::get_if<Child>(&n.params)) return {c->graph};
  if (const auto* f = std::get_if<If>(&n.params)) {
    if (f->else_graph) return {f->then_graph, f->else_graph};
    return {f->then_graph};
  }
  if (const auto* w = std::get_if<While>(&n.params)) return {w->body};
  return {};
}

/// The condition of an if or while node, else null.
[[nodiscard]] inline Condition* condition(Node& n) noexcept {
  if (auto* f = std::get_if<If>(&n.params)) return &f->cond;
  if (auto* w = std::get_if<While>(&n.params)) return &w->cond;
  return nullptr;
}
[[nodiscard]] inline const Condition* condition(const Node& n) noexcept {
  return condition(const_cast<Node&>(n));
}

/// Predecessors of each node of `g`.
[[nodiscard]] inline std::vector<std::vector<std::uint32_t>> predecessors(const Graph& g) {
  std::vector<std::vector<std::uint32_t>> pred(g.nodes.size());
  for (auto [a, b] : g.edges) pred[b].push_back(a);
  return pred;
}

/// The event points of one launch, by node index of the launched graph; both empty when it has
/// no event node.
struct LaunchEvents {
  /// In: for each event wait node, the point to wait for (null: none).
  std::vector<std::shared_ptr<EventImpl>> waits;
  /// Out: for each event record node, the point this launch records (complete once the node
  /// ran, and at least all earlier work of the launching context; the backend sets its
  /// `failures`, `seq` and `device`).
  std::vector<std::shared_ptr<EventImpl>> records;
};

}  // namespace ir
}  // namespace sluice
