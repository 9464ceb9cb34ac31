#pragma once
// The backend-independent graph IR: nodes with their parameters and declared accesses, edges by
// index. Backends instantiate it (Backend::instantiate_graph); the core builds, validates,
// compares and prints it.

#include <cstdint>
#include <memory>
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

/// Predecessors of each node.
[[nodiscard]] std::vector<std::vector<std::uint32_t>> predecessors(const GraphData& g);
/// Every access of `g`'s nodes, nested graphs included.
void collect_uses(const GraphData& g, std::vector<Use>& out);
/// Empty if `a` and `b` have the same topology, else which node and parameter differ first.
[[nodiscard]] std::string topology_difference(const GraphData& a, const GraphData& b);
/// DOT body (nodes and edges) of `g` under the prefix `id` (for nesting).
void write_dot_body(std::ostream& out, const GraphData& g, const std::string& id, int indent);

}  // namespace sluice::detail
