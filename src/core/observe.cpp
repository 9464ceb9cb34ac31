// The observer hook (sluice/observe.hpp): every eager operation of every context passes
// ContextImpl::enqueue_eager, which calls observed_enqueue only while an observer is installed.

#include "sluice/observe.hpp"

#include <algorithm>
#include <mutex>
#include <vector>

#include "core/context_impl.hpp"

namespace sluice {
namespace detail {
namespace {

struct Observers {
  std::mutex mutex;
  // Replaced, never changed in place: a call in progress keeps the list (and its observers) it
  // started with alive, without holding the mutex while observers run.
  std::shared_ptr<const std::vector<std::shared_ptr<Observer>>> list =
      std::make_shared<std::vector<std::shared_ptr<Observer>>>();
  bool timing = false;
};

Observers& observers() {
  static auto* o = new Observers;  // never destroyed: contexts may issue during static teardown
  return *o;
}

struct Snapshot {
  std::shared_ptr<const std::vector<std::shared_ptr<Observer>>> list;
  bool timing;
};

Snapshot snapshot() {
  auto& o = observers();
  std::lock_guard lock(o.mutex);
  return {o.list, o.timing};
}


}  // namespace

std::atomic<int> g_observer_count{0};

void observed_enqueue(ContextImpl& ctx, Stream& stream, const OpInfo& op, void (*run)(void*),
                      void* state) {
  const auto o = snapshot();
  const OpEvent e{ctx.name(), ctx.timeline(), op.seq, op.what, op.where, &ctx.device()};
  for (auto& obs : *o.list) obs->issue_begin(e);
  OpSpan span;
  const bool timed = o.timing;
  if (timed) span.start = stream.record(true, op);
  try {
    run(state);
  } catch (...) {
    for (auto& obs : *o.list) obs->issue_end(e, nullptr);
    throw;
  }
  if (timed) span.end = stream.record(true, op);
  for (auto& obs : *o.list) obs->issue_end(e, timed ? &span : nullptr);
}

void observed_wait(const ContextImpl& ctx, std::uint64_t seq, const EventImpl& waited) {
  const auto o = snapshot();
  const WaitEvent w{ctx.name(), ctx.timeline(), seq, waited.timeline, waited.seq};
  for (auto& obs : *o.list) obs->wait(w);
}

void observed_destroy(std::uint64_t timeline) noexcept {
  Snapshot o;
  try {
    o = snapshot();
  } catch (...) {
    return;
  }
  for (auto& obs : *o.list) {
    try {
      obs->context_destroyed(timeline);
    } catch (...) {  // a destructor's path: an observer's failure is its own
    }
  }
}

}  // namespace detail

void add_observer(std::shared_ptr<Observer> observer) {
  if (!observer) return;
  auto& o = detail::observers();
  std::lock_guard lock(o.mutex);
  auto next = std::make_shared<std::vector<std::shared_ptr<Observer>>>(*o.list);
  o.timing = o.timing || observer->wants_timing();
  next->push_back(std::move(observer));
  o.list = next;
  detail::g_observer_count.store(static_cast<int>(next->size()), std::memory_order_release);
}

void remove_observer(const Observer* observer) noexcept {
  auto& o = detail::observers();
  std::lock_guard lock(o.mutex);
  std::shared_ptr<std::vector<std::shared_ptr<Observer>>> next;
  try {
    next = std::make_shared<std::vector<std::shared_ptr<Observer>>>(*o.list);
  } catch (...) {
    return;
  }
  std::erase_if(*next, [&](const auto& p) { return p.get() == observer; });
  o.timing = std::any_of(next->begin(), next->end(),
                         [](const auto& p) { return p->wants_timing(); });
  o.list = next;
  detail::g_observer_count.store(static_cast<int>(next->size()), std::memory_order_release);
}

}  // namespace sluice
