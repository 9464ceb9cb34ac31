#pragma once
// The host backend's engine of the dist layer (host_engine.cpp).

#include <memory>

#include "sluice/ext/dist.hpp"

namespace sluice::detail::dist {

/// The engine of one communicator's ranks of this process on the host backend: MPI between
/// processes, memory between the ranks of the process. `config.transport` is a HostTransport.
[[nodiscard]] std::shared_ptr<DistEngine> make_host_engine(const DistEngineConfig& config);

}  // namespace sluice::detail::dist
