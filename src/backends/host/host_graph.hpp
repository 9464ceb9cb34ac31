#pragma once
// The host backend's graphs: task DAGs run on the host backend's shared pool.

#include <functional>
#include <memory>
#include <vector>

#include "sluice/backend.hpp"
#include "sluice/ext/graph_ir.hpp"

namespace sluice::detail::host {

/// What a host stream recorded for one captured operation: its work items, run in order.
[[nodiscard]] std::shared_ptr<void> make_recording(std::vector<std::function<void()>> ops);

/// Instantiates `graph` for the host device.
[[nodiscard]] std::unique_ptr<GraphExecutable> instantiate_host_graph(const ir::GraphPtr& graph);

}  // namespace sluice::detail::host
