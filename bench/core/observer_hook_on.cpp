// The issue path with the observer hook's check, as the library compiles it (observer_hook.hpp),
// with no observer and with one that does nothing.

#include <memory>

#include "observer_hook.hpp"
#include "sluice/observe.hpp"

namespace sluice::bench {
namespace {

struct NothingObserver final : Observer {};

}  // namespace

void enqueue_hook_checked(benchmark::State& state, const Device& device) {
  observer_hook::issue_empty_tasks(state, device);
}

void enqueue_hook_observed(benchmark::State& state, const Device& device) {
  auto observer = std::make_shared<NothingObserver>();
  add_observer(observer);
  observer_hook::issue_empty_tasks(state, device);
  remove_observer(observer.get());
}

}  // namespace sluice::bench
