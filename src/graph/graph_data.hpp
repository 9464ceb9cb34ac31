#pragma once
// The core's side of a graph: the IR a backend instantiates (sluice/ext/graph_ir.hpp), plus what
// only the core uses (the Events bound to event nodes, points outside a capture that launches
// wait for). The core builds, validates, compares and prints it.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "core/context_impl.hpp"
#include "sluice/ext/graph_ir.hpp"
#include "sluice/graph.hpp"

namespace sluice::detail {

static_assert(std::variant_size_v<ir::Params> == static_cast<std::size_t>(NodeKind::event_wait) + 1,
              "ir::Params lists one alternative per NodeKind, in its order");

[[nodiscard]] inline NodeKind kind_of(const ir::Node& n) noexcept {
  return static_cast<NodeKind>(n.params.index());
}

/// Memory reserved for a temporary: released in stream order on its context when the last graph
/// or executable holding it is gone (an alloc node's keep-alive).
struct TemporaryStorage {
  std::shared_ptr<ContextImpl> ctx;
  void* ptr = nullptr;
  std::size_t bytes = 0;
  TemporaryStorage() = default;
  TemporaryStorage(const TemporaryStorage&) = delete;
  TemporaryStorage& operator=(const TemporaryStorage&) = delete;
  ~TemporaryStorage();
};

/// The point an event record node stands for (the Event it was given points here): every launch
/// re-points it at that launch's record.
class NodeEvent final : public CorePoint {
 public:
  [[nodiscard]] bool moves() const noexcept override { return true; }
  [[nodiscard]] std::shared_ptr<EventImpl> current_point() const override {
    std::lock_guard lock(mutex_);
    return current_;
  }
  void set(std::shared_ptr<EventImpl> point) {
    std::lock_guard lock(mutex_);
    current_ = std::move(point);
  }
  bool query() override {
    auto c = current_point();
    return !c || c->query();
  }
  void synchronize() override {
    if (auto c = current_point()) c->synchronize();
  }
  double elapsed_ms_since(const EventImpl& start) override;

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<EventImpl> current_;
};

/// The Events of one event node: what a record node re-points, what a wait node waits for.
struct NodeEvents {
  std::shared_ptr<NodeEvent> record;
  std::shared_ptr<EventImpl> wait;
};

struct GraphData {
  ir::Graph ir;
  /// By node index; shorter than the node list (empty) when later nodes bind no Event.
  std::vector<NodeEvents> events;
  /// Points outside a capture that its work waited for; a launch waits for them too.
  std::vector<std::shared_ptr<EventImpl>> external_waits;
  /// A capture recorded on one context only (a Replay may record it again untracked).
  bool single_context = false;

  [[nodiscard]] bool has_events() const noexcept { return !events.empty(); }
};

/// Appends to `n.uses` the accesses of a copy or memset node's addresses that lie in tracked
/// memory (its destination written, its source read), so that launches are ordered by the memory
/// the node really touches. Throws Error if the bytes run past a tracked region.
void add_address_uses(ir::Node& n, std::source_location loc);
/// Throws Error(unsupported) if an event node lies inside a nested graph of `g`.
void require_top_level_events(const ir::Graph& g);
/// Every access of `g`'s nodes, nested graphs and conditions included.
void collect_uses(const ir::Graph& g, std::vector<Use>& out);
/// Empty if `a` and `b` have the same topology, else which node and parameter differ first.
[[nodiscard]] std::string topology_difference(const ir::Graph& a, const ir::Graph& b);
/// DOT body (nodes and edges) of `g` under the prefix `id` (for nesting).
void write_dot_body(std::ostream& out, const ir::Graph& g, const std::string& id, int indent);

}  // namespace sluice::detail
