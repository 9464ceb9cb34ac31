#include "sluice/context.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <list>
#include <mutex>
#include <utility>

#include "core/context_impl.hpp"
#define SLUICE_IMPL_PUBLIC_INCLUDE  // a private header of sluice
#include "sluice/detail/contract_holds.hpp"
#undef SLUICE_IMPL_PUBLIC_INCLUDE
#include "sluice/event.hpp"

namespace sluice {
namespace {

/// Live contexts per device, so that a blocking context can wait for all of them.
struct DeviceContexts {
  std::mutex mutex;
  std::list<std::pair<Device, std::weak_ptr<detail::ContextImpl>>> live;

  void add(const std::shared_ptr<detail::ContextImpl>& c) {
    std::lock_guard lock(mutex);
    live.remove_if([](const auto& e) { return e.second.expired(); });
    live.emplace_back(c->device(), c);
  }
  std::vector<std::shared_ptr<detail::ContextImpl>> on(const Device& d) {
    std::lock_guard lock(mutex);
    std::vector<std::shared_ptr<detail::ContextImpl>> out;
    for (const auto& [dev, weak] : live) {
      if (dev != d) continue;
      if (auto c = weak.lock()) out.push_back(std::move(c));
    }
    return out;
  }
};

DeviceContexts& device_contexts() {
  static DeviceContexts d;
  return d;
}

std::mutex handler_mutex;
UnreportedFailureHandler& handler() {
  static UnreportedFailureHandler h = [](const std::string& message) {
    std::fprintf(stderr, "%s\n", message.c_str());
  };
  return h;
}

std::atomic<std::uint64_t> context_counter{0};
std::atomic<std::uint64_t> timeline_counter{0};

int clamp_priority(Backend& backend, const Device& device, int priority) {
  auto info = device_info(device);
  (void)backend;
  // Lower is more urgent: the range runs from priority_highest up to priority_lowest.
  return std::clamp(priority, std::min(info.priority_highest, info.priority_lowest),
                    std::max(info.priority_highest, info.priority_lowest));
}

std::shared_ptr<detail::ContextImpl> make_impl(const ContextOptions& o, void* native) {
  Device device = o.device ? *o.device : default_device();
  auto backend = find_backend(device.backend);
  (void)device_info(device);  // throws a clear error for a missing device
  int priority = clamp_priority(*backend, device, o.priority);
  std::string name =
      o.name.empty() ? "context#" + std::to_string(context_counter.fetch_add(1) + 1) : o.name;
  auto impl = std::make_shared<detail::ContextImpl>(std::move(backend), device, o.kind, priority,
                                                    std::move(name), native);
  device_contexts().add(impl);
  return impl;
}

}  // namespace

namespace detail {

namespace {
// The tracker's debug mode sets it; SLUICE_DEBUG_DEPS=1 turns that mode on from the start.
std::atomic<bool> g_host_tasks_note_completion{[] {
  const char* env = std::getenv("SLUICE_DEBUG_DEPS");
  return env != nullptr && *env == '1';
}()};
}  // namespace

void observers_from_environment() {
  static std::once_flag once;
  std::call_once(once, [] {
    trace_from_environment();  // NVTX ranges come with the cuda module
                               // (core/cuda/nvtx_observer.cpp)
  });
}

bool host_tasks_note_completion() noexcept {
  return g_host_tasks_note_completion.load(std::memory_order_relaxed);
}
void set_host_tasks_note_completion(bool on) noexcept {
  g_host_tasks_note_completion.store(on, std::memory_order_relaxed);
}

ContextImpl::ContextImpl(std::shared_ptr<Backend> backend, Device device, StreamKind kind,
                         int priority, std::string name, void* wrap_native)
    : backend_(std::move(backend)),
      device_(std::move(device)),
      kind_(kind),
      name_(std::move(name)),
      failures_(std::make_shared<FailureState>()),
      timeline_(timeline_counter.fetch_add(1) + 1) {
  observers_from_environment();
  StreamConfig config{device_.index, priority, failures_};
  stream_ = wrap_native != nullptr ? backend_->wrap_stream(config, wrap_native)
                                   : backend_->create_stream(config);
}

ContextImpl::~ContextImpl() {
  set_capturing(false);  // keeps any_capturing()'s count right if destroyed mid-capture
  std::string lost;
  if (host_holds_active()) {
    // The stream may wait for work a host hold keeps back, maybe held by this thread: it is
    // drained and destroyed when the last hold ends (sluice/backend.hpp), not here.
    try {
      std::shared_ptr<Stream> s(std::move(stream_));
      run_when_unheld([s] {
        try {
          s->synchronize();
        } catch (...) {
        }
      });
    } catch (...) {
      // Out of memory: the stream goes with the context (and may wait there).
    }
  } else {
    try {
      stream_->synchronize();
    } catch (const std::exception& e) {
      lost = e.what();
    }
  }
  if (observers_installed()) observed_destroy(timeline_);
  if (auto f = failures_->take(); f && !f->reported.exchange(true)) {
    lost = WorkFailed(f->operation, f->issued_at, f->cause, f->skipped.load()).what();
  }
  if (!lost.empty()) {
    std::lock_guard lock(handler_mutex);
    if (handler()) handler()("sluice: " + name_ + " destroyed with an unreported failure: " + lost);
  }
}

std::shared_ptr<EventImpl> ContextImpl::record(bool timing, std::source_location loc) {
  if (capturing() && !timing) {
    if (auto sink = capture(); sink && sink->active()) return sink->record(*this, loc);
  }
  if (capturing()) refuse_if_capturing("a timing event", loc);
  std::lock_guard lock(mutex_);
  return record_locked(timing, loc);
}

std::shared_ptr<EventImpl> ContextImpl::record_locked(bool timing, std::source_location loc) {
  const std::uint64_t seq = seq_.load(std::memory_order_relaxed);
  if (!timing && tail_event_ && tail_event_seq_ == seq) return tail_event_;
  auto e = stream_->record(timing, {seq, "record", loc});
  e->failures = failures_;
  e->seq = seq;
  e->timeline = timeline_;
  e->device = device_;
  if (!timing) {
    tail_event_ = e;
    tail_event_seq_ = seq;
  }
  if (tail_point_ && tail_point_->seq == seq && !tail_point_->event) tail_point_->event = e;
  return e;
}

bool ContextImpl::defer_point(std::shared_ptr<DeferredPoint> p, std::uint64_t seq) {
  if (capturing()) return false;
  p->seq = seq;
  if (tail_event_ && tail_event_seq_ == seq) p->event = tail_event_;
  tail_point_ = std::move(p);
  return true;
}

std::shared_ptr<DeferredPoint> ContextImpl::spare_point() {
  if (!spare_point_) return std::make_shared<DeferredPoint>();
  spare_point_->event.reset();
  return std::move(spare_point_);
}

void ContextImpl::flush_tail_point(std::source_location loc) {
  if (tail_point_.use_count() == 1) {
    // Held only by this context: nobody can ask for its event any more, and nobody else can
    // reach it, so it is reused.
    spare_point_ = std::move(tail_point_);
    return;
  }
  if (!tail_point_->event) (void)record_locked(false, loc);
  tail_point_.reset();
}

std::shared_ptr<EventImpl> ContextImpl::point_event(DeferredPoint& p, std::source_location loc) {
  {
    std::lock_guard lock(mutex_);
    if (p.event) return p.event;
    if (tail_point_.get() == &p && !capturing()) {
      p.event = record_locked(false, loc);
      return p.event;
    }
  }
  auto e = record(false, loc);
  std::lock_guard lock(mutex_);
  if (!p.event) p.event = e;
  return p.event;
}

bool ContextImpl::waits_for(std::uint64_t timeline, std::uint64_t seq) {
  if (timeline == timeline_) return true;
  std::lock_guard lock(mutex_);
  for (const auto& [t, s] : clock_) {
    if (t == timeline) return s >= seq;
  }
  return false;
}

bool ContextImpl::wait(const std::shared_ptr<EventImpl>& event_in, std::source_location loc) {
  // A graph's event record node: the latest launch's point, if any.
  std::shared_ptr<EventImpl> event = resolve_point(event_in);
  if (!event) return false;
  // A point inside a capture: an edge of the graph (joining this context to the capture), or,
  // once the capture ended, the real point it stands for (the capture's end point, after every
  // context that joined it: also for the context that recorded it; resolve_point took it).
  if (auto* sink = capture_sink_of(*event)) {
    if (event->timeline == timeline_ && !capturing()) return false;
    return sink->wait(*this, event, loc);
  }
  if (event->timeline == timeline_ && !capturing()) return false;  // issue order covers it
  if (capturing()) {
    // A point outside the capture: waited for now (so eager frees stay ordered) and remembered
    // for the graph's launches by the sink.
    if (auto sink = capture(); sink && sink->active()) (void)sink->wait(*this, event, loc);
  }
  if (event->timeline == timeline_) return false;
  bool issued = false;
  // Eager even while capturing: a point outside the capture is waited for now (see above).
  enqueue_eager("wait", loc, [&](Stream& s, const OpInfo& op) {
    auto it = std::find_if(clock_.begin(), clock_.end(),
                           [&](const auto& e) { return e.first == event->timeline; });
    if (it != clock_.end() && it->second >= event->seq) return;
    if (event->failures && event->failures->may_fail()) failures_->set_may_fail();
    s.wait(event, op);
    issued = true;
    if (observers_installed()) observed_wait(*this, op.seq, *event);
    if (it != clock_.end()) {
      it->second = event->seq;
    } else if (event->timeline != 0) {
      clock_.emplace_back(event->timeline, event->seq);
    }
  });
  return issued;
}

void ContextImpl::synchronize(std::source_location loc) {
  if (capturing()) refuse_if_capturing("synchronize", loc);
  const auto target = issued();
  stream_->synchronize();
  note_completed(target);
  throw_failure();
}

void ContextImpl::note_completed(std::uint64_t seq) noexcept {
  auto cur = completed_.load(std::memory_order_relaxed);
  while (cur < seq && !completed_.compare_exchange_weak(cur, seq, std::memory_order_release)) {
  }
}

void ContextImpl::throw_failure() {
  if (observers_installed()) observed_destroy(timeline_);
  if (auto f = failures_->take(); f && !f->reported.exchange(true)) {
    throw WorkFailed(f->operation, f->issued_at, f->cause, f->skipped.load());
  }
}

void ContextImpl::deallocate(void* ptr, std::size_t bytes) noexcept {
  std::lock_guard lock(mutex_);
  if (tail_point_) {
    try {
      flush_tail_point(std::source_location::current());
    } catch (...) {
      tail_point_.reset();  // its holders fall back to an event recorded when they ask
    }
  }
  seq_.fetch_add(1, std::memory_order_relaxed);
  stream_->deallocate(ptr, bytes);
}

std::shared_ptr<CaptureSink> ContextImpl::capture() {
  std::lock_guard lock(mutex_);
  return capture_;
}

void ContextImpl::begin_capture(std::shared_ptr<CaptureSink> sink, std::source_location loc) {
  if (kind_ == StreamKind::blocking) {
    throw Error(Errc::invalid_state,
                "context '" + name_ +
                    "' is of the blocking kind: its work completes as it is issued and cannot be "
                    "captured into a graph; capture on an async context",
                loc);
  }
  std::lock_guard lock(mutex_);
  if (capture_ && capture_->active() && capture_ != sink) {
    throw Error(
        Errc::invalid_state,
        "context '" + name_ + "' is already recorded by another capture; end that capture first",
        loc);
  }
  // A point deferred before the capture gets its real event now: the capture's operations must
  // not be the ones to record it.
  if (tail_point_) flush_tail_point(loc);
  capture_ = std::move(sink);
  capture_uses_.clear();
  set_capturing(true);
}

namespace {
std::atomic<int> g_capturing{0};  // contexts recording into a capture, process-wide
}  // namespace

bool ContextImpl::any_capturing() noexcept {
  return g_capturing.load(std::memory_order_acquire) != 0;
}

void ContextImpl::set_capturing(bool on) noexcept {
  if (capturing_.exchange(on, std::memory_order_acq_rel) != on) {
    g_capturing.fetch_add(on ? 1 : -1, std::memory_order_acq_rel);
  }
}

void ContextImpl::end_capture(const CaptureSink* sink) noexcept {
  std::lock_guard lock(mutex_);
  if (capture_.get() != sink) return;
  set_capturing(false);
  capture_.reset();
  capture_uses_.clear();
}

void ContextImpl::refuse_if_capturing(std::string_view what, std::source_location loc) {
  auto sink = capture();
  if (sink && sink->active()) sink->refuse(*this, what, loc);
}

void ContextImpl::note_capture_uses(std::span<const Use> accesses) {
  std::lock_guard lock(mutex_);
  capture_uses_.insert(capture_uses_.end(), accesses.begin(), accesses.end());
}

std::uint64_t ContextImpl::enqueue_node(std::string_view what, std::source_location loc,
                                        const SimpleOp& simple) {
  std::unique_lock lock(mutex_);
  if (!capture_ || !capture_->active() || !stream_->can_record_as_node(simple)) return 0;
  auto op = next_op(what, loc);
  capture_->record_node(*this, op, simple);
  return op.seq;
}

std::uint64_t ContextImpl::enqueue_captured(std::string_view what, std::source_location loc,
                                            const std::function<void(Stream&, const OpInfo&)>& f) {
  std::unique_lock lock(mutex_);
  if (!capture_ || !capture_->active()) {
    set_capturing(false);
    capture_.reset();
    return 0;
  }
  auto sink = capture_;
  auto op = next_op(what, loc);
  IssuingScope scope(this, sink.get());
  sink->record_op(*this, op, f);  // throws through the guard with the capture discarded
  return op.seq;
}

std::vector<std::shared_ptr<EventImpl>> ContextImpl::record_device_work(std::source_location loc) {
  std::vector<std::shared_ptr<EventImpl>> out;
  for (auto& c : device_contexts().on(device_)) {
    if (c.get() == this) continue;
    out.push_back(c->record(false, loc));
  }
  return out;
}

}  // namespace detail

void synchronize(const Device& device, std::source_location loc) {
  (void)device_info(device);  // an unknown device is an Error, not a silent no-op
  std::exception_ptr first;
  for (auto& c : device_contexts().on(device)) {
    try {
      c->synchronize(loc);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

Context::Context() : Context(ContextOptions{}) {}
Context::Context(const ContextOptions& options) : impl_(make_impl(options, nullptr)) {}
Context::Context(const Device& device) : Context(ContextOptions{.device = device}) {}

Context Context::wrap(const Device& device, void* native_stream, std::string name) {
  if (device.backend == "host") {
    throw Error(Errc::unsupported,
                "Context::wrap(" + device.to_string() +
                    "): the host backend has no native queue to wrap (its queues are sluice's own "
                    "worker threads, which no other library hands out); interoperate on the host "
                    "through host memory, Context::host_task and events, or wrap a cudaStream_t "
                    "on a cuda device");
  }
  if (native_stream == nullptr) {
    throw Error(Errc::invalid_argument,
                "Context::wrap needs a native stream; pass the cudaStream_t to wrap (the legacy "
                "default stream 0 cannot be wrapped)");
  }
  return Context(make_impl({.device = device, .name = std::move(name)}, native_stream));
}

const Device& Context::device() const noexcept {
  return impl_->device();
}
StreamKind Context::kind() const noexcept {
  return impl_->kind();
}
int Context::priority() const noexcept {
  return impl_->stream().priority();
}
const std::string& Context::name() const noexcept {
  return impl_->name();
}

std::uint64_t Context::id() const noexcept {
  return impl_->timeline();
}
void* Context::native_handle() const noexcept {
  return impl_->stream().native_handle();
}

void Context::wait_for(const Context& other, std::source_location loc) const {
  if (other.impl_ == impl_) return;  // one context is already ordered
  // Skip the event when the vector clock says this context already waits for all of `other`,
  // unless `other` is capturing: then the wait is what joins this context to the capture.
  if (!other.impl_->capturing() &&
      impl_->waits_for(other.impl_->timeline(), other.impl_->issued())) {
    return;
  }
  impl_->wait(other.impl_->record(false, loc), loc);
  impl_->finish_if_blocking();
}

void Context::wait(const Event& event, std::source_location loc) const {
  if (!event.recorded()) return;  // like CUDA: waiting on an unrecorded event is a no-op
  impl_->wait(event.impl(), loc);
  impl_->finish_if_blocking();
}

bool Context::idle() const {
  return impl_->stream().query();
}

void Context::synchronize(std::source_location loc) const {
  impl_->synchronize(loc);
}

std::vector<Context> Context::fork(std::size_t n, std::source_location loc) const {
  std::vector<Context> children;
  children.reserve(n);
  auto point = impl_->record(false, loc);
  for (std::size_t i = 0; i < n; ++i) {
    Context child(ContextOptions{.device = device(),
                                 .kind = kind(),
                                 .priority = priority(),
                                 .name = name() + ".fork" + std::to_string(i)});
    child.impl_->wait(point, loc);
    child.impl_->finish_if_blocking();
    children.push_back(std::move(child));
  }
  return children;
}

void Context::join(std::span<const Context> children, std::source_location loc) const {
  for (const auto& c : children) wait_for(c, loc);
}

void Context::host_task(std::function<void()> fn, std::string_view what,
                        std::source_location loc) const {
  if (!fn) throw Error(Errc::invalid_argument, "host_task: empty function", loc);
  impl_->failures()->set_may_fail();
  impl_->issue(what, loc, [&](Stream& s, const OpInfo& op) {
    if (detail::host_tasks_note_completion()) {
      // Debug mode checks host access against completed work: everything before this task is.
      fn = [inner = std::move(fn), impl = impl_.get(), before = op.seq - 1] {
        impl->note_completed(before);
        inner();
      };
    }
    s.host_task(std::move(fn), op);
  });
}

UnreportedFailureHandler set_unreported_failure_handler(UnreportedFailureHandler h) {
  std::lock_guard lock(handler_mutex);
  return std::exchange(handler(), std::move(h));
}

}  // namespace sluice
