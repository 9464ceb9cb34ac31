#pragma once
// The backend-independent graph IR: nodes with their parameters and declared accesses, edges by
// index. Backends instantiate it (Backend::instantiate_graph); the core builds, validates,
// compares and prints it.

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sluice/backend.hpp"
#include "sluice/graph.hpp"

namespace sluice::detail {

/// Memory reserved for a temporary: released in stream order on its context when the last graph
/// or executable holding it is gone.
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
class NodeEvent final : public EventImpl {
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

/// The point a wait node waits for at a launch: a moving point resolved, null if unrecorded.
[[nodiscard]] inline std::shared_ptr<EventImpl> resolve_point(
    const std::shared_ptr<EventImpl>& event) {
  if (event && event->moves()) return event->current_point();
  if (event && event->capture_sink() == nullptr) {
    if (auto real = event->captured_base()) return real;  // an event of an ended capture
  }
  return event;
}

struct NodeData {
  NodeKind kind = NodeKind::empty;
  std::string name;
  std::vector<Use> uses;
  // kernel
  KernelWork kernel;
  // copy / memset
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
  int value = 0;
  // host
  std::function<void()> host;
  // alloc / free
  std::shared_ptr<TemporaryStorage> temp;
  // child, if_then (then, else), while_loop (body)
  std::vector<std::shared_ptr<const GraphData>> graphs;
  // conditionals: the device integer (kept alive) and its width in bytes
  CellPtr cond;
  std::size_t cond_bytes = 0;
  bool cond_signed = true;
  // the value assigned to `cond` when the graph holding the node starts (ConditionDefault)
  std::optional<std::int64_t> cond_default;
  // event_record: the point the node's Event stands for; event_wait: the point it waits for
  std::shared_ptr<NodeEvent> record_event;
  std::shared_ptr<EventImpl> wait_event;
  // captured: the backend's recording of one operation, and where it was issued
  std::shared_ptr<void> payload;
  std::string context;  // the context a captured node came from
  std::source_location where;
};

struct GraphData {
  std::string name;
  std::vector<NodeData> nodes;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;
  /// Points outside a capture that its work waited for; a launch waits for them too.
  std::vector<std::shared_ptr<EventImpl>> external_waits;
  /// Objects destroyed during the capture that its nodes use (CaptureSink::adopt): released,
  /// in stream order after the last launch, when the last copy of this data is gone.
  std::vector<std::shared_ptr<void>> owned;
};

/// Appends to `n.uses` the accesses of a copy or memset node's addresses that lie in tracked
/// memory (its destination written, its source read), so that launches are ordered by the memory
/// the node really touches. Throws Error if the bytes run past a tracked region.
void add_address_uses(NodeData& n, std::source_location loc);
/// Throws Error(unsupported) if an event node lies inside a nested graph of `g`.
void require_top_level_events(const GraphData& g);
/// Predecessors of each node.
[[nodiscard]] std::vector<std::vector<std::uint32_t>> predecessors(const GraphData& g);
/// Every access of `g`'s nodes, nested graphs included.
void collect_uses(const GraphData& g, std::vector<Use>& out);
/// Empty if `a` and `b` have the same topology, else which node and parameter differ first.
[[nodiscard]] std::string topology_difference(const GraphData& a, const GraphData& b);
/// Writes `n.cond_default` into its condition's memory (host-reachable memory only).
void assign_default(const NodeData& n) noexcept;
/// DOT body (nodes and edges) of `g` under the prefix `id` (for nesting).
void write_dot_body(std::ostream& out, const GraphData& g, const std::string& id, int indent);

}  // namespace sluice::detail
