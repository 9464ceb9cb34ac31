#pragma once
// The cuda backend's engine of the dist layer: NCCL on the contexts' streams (nccl_engine.cpp).

#include <cstddef>
#include <memory>
#include <vector>

#include "sluice/ext/dist.hpp"

namespace sluice::detail::dist {

/// An NCCL communicator id (ncclGetUniqueId), made on one process and sent to the others.
[[nodiscard]] std::vector<std::byte> nccl_unique_id();
/// One NCCL communicator per local rank (its device), all of one clique of `config.size` ranks.
[[nodiscard]] std::shared_ptr<DistEngine> make_nccl_engine(const DistEngineConfig& config);

}  // namespace sluice::detail::dist
