#pragma once
// Host backend: one work-group of an nd_range kernel, each work-item a fiber (Boost.Context), so
// that a group barrier really suspends a work-item until the whole group arrived (AdaptiveCpp's
// library-only CPU path does the same).

#include <cstddef>

namespace sluice::dataflow::detail {

/// Runs work-items [0, items) of group `group`: `item(state, group, l)`, with `local` as the
/// group's local memory. Rethrows the first exception a work-item threw. Throws Error if some
/// work-items finished while others wait at a barrier.
void run_group_fibers(std::size_t group, std::size_t items, std::byte* local,
                      void (*item)(void* state, std::size_t group, std::size_t local), void* state);

}  // namespace sluice::dataflow::detail
