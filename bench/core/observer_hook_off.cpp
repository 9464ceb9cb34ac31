// The issue path with the observer hook's check compiled out (observer_hook.hpp): the baseline
// of enqueue_hook_checked.

#define SLUICE_BENCH_NO_OBSERVER_HOOK 1
#include "observer_hook.hpp"

namespace sluice::bench {

void enqueue_hook_compiled_out(benchmark::State& state, const Device& device) {
  observer_hook::issue_empty_tasks(state, device);
}

}  // namespace sluice::bench
