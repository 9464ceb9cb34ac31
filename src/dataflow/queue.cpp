// Queues, command-group submission and events of the dataflow layer.

#include <algorithm>
#include <atomic>
#include <string>

#include "dataflow/state.hpp"
#include "dataflow/submit_profile.hpp"
#include "sluice/error.hpp"

namespace sluice::dataflow {
namespace detail {
namespace {

constexpr std::size_t kDefaultContexts = 4;

std::string default_name() {
  static std::atomic<int> counter{0};
  return "queue#" + std::to_string(counter.fetch_add(1) + 1);
}

/// Command groups in construction on this thread: reused, so a submit allocates nothing once
/// warm. A vector, because a command-group function may itself submit.
thread_local std::vector<std::unique_ptr<SubmitState>> t_free;
/// The command group this thread is building (0: none).
thread_local std::uint64_t t_group = 0;
std::atomic<std::uint64_t> g_groups{0};

}  // namespace

std::uint64_t current_group() noexcept {
  return t_group;
}

void check_accessor_group(std::uint64_t group) {
  if (t_group == 0 || t_group == group) return;
  throw Error(Errc::invalid_state,
              "an Accessor of an earlier command group is copied into this one (captured by its "
              "kernel, say): only the command group whose Handler made an accessor is ordered by "
              "it and gets the buffer's data; call get_access in this command group");
}

Handler& handler(SubmitState& s) noexcept {
  return s.handler;
}

void SubmitState::require_active(std::string_view what, std::source_location loc) const {
  if (active) return;
  throw Error(Errc::invalid_state,
              std::string(what) +
                  ": a Handler was used after its submit returned; a Handler is valid only inside "
                  "the command-group function given to Queue::submit",
              loc);
}

QueueState::QueueState(const QueueOptions& options, std::source_location loc)
    : device(options.device ? *options.device : default_device()),
      in_order(options.in_order),
      name(options.name.empty() ? default_name() : options.name) {
  (void)device_info(device);  // an unknown device is an Error here, not at the first submit
  backend = device.backend == "host"   ? BackendKind::host
            : device.backend == "cuda" ? BackendKind::cuda
                                       : BackendKind::other;
  if (options.in_order && options.contexts > 1) {
    throw Error(Errc::invalid_argument,
                "Queue '" + name + "': an in-order queue has one context, not " +
                    std::to_string(options.contexts) + "; drop `contexts` or `in_order`",
                loc);
  }
  const std::size_t n =
      in_order ? 1 : (options.contexts == 0 ? kDefaultContexts : options.contexts);
  contexts.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    contexts.emplace_back(ContextOptions{.device = device, .name = name + "/" + std::to_string(i)});
  }
  profiling = options.profiling;
  if (profiling) {
    // Device times are measured from a timed event known to have completed just before a host
    // time: the host time read after it completed is a little late, so device times never come
    // out before the submit times they follow.
    for (const auto& c : contexts) {
      auto e = std::make_shared<Epoch>();
      e->event = c.impl().record(true, loc);
      e->event->synchronize();
      e->host_ns = steady_ns();
      epochs.push_back(std::move(e));
    }
  }
}

std::shared_ptr<const Epoch> QueueState::epoch(const Context& ctx) const {
  for (std::size_t i = 0; i < contexts.size(); ++i) {
    if (contexts[i] == ctx) return epochs[i];
  }
  return nullptr;
}

const Context& QueueState::pick() noexcept {
  if (contexts.size() == 1) return contexts.front();
  return contexts[next_.fetch_add(1, std::memory_order_relaxed) % contexts.size()];
}

std::shared_ptr<QueueState> make_queue(const QueueOptions& options, std::source_location loc) {
  return std::make_shared<QueueState>(options, loc);
}

void SubmitState::reset(QueueState& q, std::source_location) {
  queue = &q;
  ctx = &q.pick();
  accesses.clear();
  waits.clear();
  written.clear();
  buffers.clear();
  host_updated.clear();
  local_bytes = 0;
  has_local = false;
  launched = false;
  placed = false;
  result = Event();
}

SubmitState& begin_submit(QueueState& q, std::source_location loc) {
  PhaseClock clock;
  std::unique_ptr<SubmitState> s;
  if (t_free.empty()) {
    s = std::make_unique<SubmitState>();
  } else {
    s = std::move(t_free.back());
    t_free.pop_back();
  }
  s->reset(q, loc);
  s->serial = g_groups.fetch_add(1, std::memory_order_relaxed) + 1;
  s->outer_group = t_group;
  t_group = s->serial;
  s->active = true;
  clock.mark(SubmitPhase::begin);
  s->profile_from = clock.last();
  return *s.release();
}

namespace {
void release(SubmitState& s) noexcept {
  s.active = false;
  t_group = s.outer_group;
  s.buffers.clear();
  s.host_updated.clear();
  s.written.clear();
  s.waits.clear();
  try {
    t_free.emplace_back(&s);
  } catch (...) {
    delete &s;
  }
}
}  // namespace

Event end_submit(SubmitState& s, std::source_location loc) {
  try {
    // A command group without a kernel still orders: it completes after its dependencies.
    if (!s.launched) launch(s, KernelDesc{}, loc);
  } catch (...) {
    release(s);
    throw;
  }
  PhaseClock clock;
  if (clock.on()) clock.restart_from(s.profile_from);
  Event e = std::move(s.result);
  release(s);
  clock.mark(SubmitPhase::end);
  count_submit();
  return e;
}

void abandon_submit(SubmitState& s) noexcept {
  release(s);
}

}  // namespace detail

void Queue::wait(std::source_location loc) const {
  for (const auto& c : state_->contexts) {
    detail::check_gates(c.impl().timeline(), 0, "Queue::wait", loc);
  }
  for (const auto& c : state_->contexts) c.synchronize(loc);
}

const Device& Queue::device() const noexcept {
  return state_->device;
}
bool Queue::in_order() const noexcept {
  return state_->in_order;
}
bool Queue::profiling() const noexcept {
  return state_->profiling;
}
std::span<const Context> Queue::contexts() const noexcept {
  return state_->contexts;
}

void Event::wait(std::source_location loc) const {
  if (!point_) return;
  detail::check_gates(ctx_->timeline(), seq_, "Event::wait", loc);
  if (ctx_->completed() < seq_) {
    const auto e = ctx_->point_event(*point_, loc);
    e->synchronize();
    ctx_->note_completed(e->seq);
  }
  if (auto f = ctx_->failures()->at_or_before(seq_); f && !f->reported.exchange(true)) {
    throw WorkFailed(f->operation, f->issued_at, f->cause, f->skipped.load());
  }
}

bool Event::complete() const {
  if (!point_ || ctx_->completed() >= seq_) return true;
  const auto e = ctx_->point_event(*point_, std::source_location::current());
  if (!e->query()) return false;
  ctx_->note_completed(e->seq);
  return true;
}

std::uint64_t Event::profiling_ns(int which, std::source_location loc) const {
  if (!profile_) {
    throw Error(Errc::invalid_state,
                "get_profiling_info: " +
                    std::string(point_ ? "the queue was not made with QueueOptions::profiling "
                                         "(SYCL's property::queue::enable_profiling)"
                                       : "a default-constructed event has no command group") +
                    "; make the queue with profiling on",
                loc);
  }
  if (which == 0) return profile_->submit_ns;
  // Start and end are known once the command group ended (SYCL blocks until they are).
  wait(loc);
  const auto& e = which == 1 ? profile_->start : profile_->end;
  const double ms = e->elapsed_ms_since(*profile_->epoch->event);
  return profile_->epoch->host_ns + static_cast<std::uint64_t>(ms * 1e6 + 0.5);
}

void Event::wait(const std::vector<Event>& events, std::source_location loc) {
  for (const auto& e : events) {
    if (e.point_) detail::check_gates(e.ctx_->timeline(), e.seq_, "wait", loc);
  }
  for (const auto& e : events) e.wait(loc);
}

}  // namespace sluice::dataflow
