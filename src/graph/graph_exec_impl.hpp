#pragma once
// An instantiated graph: the backend's executable plus the IR its parameters came from.

#include <memory>
#include <string>
#include <vector>

#include "core/context_impl.hpp"
#include "deps/access_list.hpp"
#include "graph/graph_data.hpp"

namespace sluice::detail {

/// Counts an instantiation, and the nodes it batched, in graph::stats().
void count_instantiation(const GraphExecutable& exec) noexcept;

class GraphExecImpl {
 public:
  GraphExecImpl(std::shared_ptr<GraphData> graph, const Device& device, std::source_location loc);
  /// The backend's executable waits for its launches when destroyed: kept while a host hold is
  /// active (sluice/backend.hpp), so that dropping a graph never waits for held-back work.
  ~GraphExecImpl();
  GraphExecImpl(const GraphExecImpl&) = delete;
  GraphExecImpl& operator=(const GraphExecImpl&) = delete;

  void launch(const Context& ctx, std::source_location loc);
  /// Takes `next` (same topology, checked by the caller). Returns why the backend re-instantiated
  /// instead of updating in place (empty if it updated).
  std::string update(std::shared_ptr<GraphData> next, std::source_location loc);
  /// The IR the backend was given (keeps graph_ alive).
  [[nodiscard]] static ir::GraphPtr ir_of(const std::shared_ptr<GraphData>& g) {
    return {g, &g->ir};
  }
  /// A private copy of the IR to edit (launches already issued keep theirs).
  [[nodiscard]] std::shared_ptr<GraphData> editable() const {
    return std::make_shared<GraphData>(*graph_);
  }
  [[nodiscard]] const std::shared_ptr<GraphData>& graph() const noexcept { return graph_; }
  [[nodiscard]] const Device& device() const noexcept { return device_; }

 private:
  void set_accesses();
  void require_live_buffers(std::source_location loc) const;

  std::shared_ptr<GraphData> graph_;
  Device device_;
  std::shared_ptr<Backend> backend_;
  std::unique_ptr<GraphExecutable> exec_;
  AccessList accesses_;
  std::string what_;
};

}  // namespace sluice::detail
