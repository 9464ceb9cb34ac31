#pragma once
// Process-wide counters of the graph layer (sluice::graph::stats()).

#include <atomic>
#include <cstdint>

namespace sluice::detail {

struct GraphCounters {
  std::atomic<std::uint64_t> captures{0};
  std::atomic<std::uint64_t> instantiations{0};
  std::atomic<std::uint64_t> launches{0};
  std::atomic<std::uint64_t> updates{0};
  std::atomic<std::uint64_t> reinstantiations{0};
  std::atomic<std::uint64_t> eager_fallbacks{0};
  std::atomic<std::uint64_t> eager_cheaper{0};
  std::atomic<std::uint64_t> coalesced_nodes{0};
  std::atomic<std::uint64_t> batched_nodes{0};
  std::atomic<std::uint64_t> unchanged{0};
};
GraphCounters& graph_stats();

}  // namespace sluice::detail
