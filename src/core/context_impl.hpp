#pragma once
// The state behind a Context handle. Other sluice layers issue work through `issue`, which
// numbers each operation, applies the blocking-kind rules and keeps issue order.

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sluice/access.hpp"
#include "sluice/backend.hpp"
#include "sluice/context.hpp"
#include "sluice/error.hpp"
#include "sluice/extension.hpp"

namespace sluice::detail {

/// Where a capturing context sends its work (src/graph/capture_state.hpp): the graph layer's
/// hook into the context, so that the core stays below it.
class CaptureSink {
 public:
  virtual ~CaptureSink() = default;
  [[nodiscard]] virtual bool active() const noexcept = 0;
  /// True while the capture records without the tracker's marks (a replay of a body of one
  /// context, whose launch is ordered as one operation by the union of the accesses): the
  /// tracker then only checks each access and notes it for the node (Tracker::run).
  [[nodiscard]] virtual bool untracked() const noexcept { return false; }
  /// A number no other capture of the process has (the tracker names captures by it).
  [[nodiscard]] virtual std::uint64_t serial() const noexcept { return 0; }
  /// Records operation `op` of `ctx` (its mutex held): `f` enqueues it on ctx's stream.
  virtual void record_op(ContextImpl& ctx, const OpInfo& op,
                         const std::function<void(Stream&, const OpInfo&)>& f) = 0;
  /// Records operation `op` of `ctx` (its mutex held), a copy or memset that ctx's stream said
  /// its backend's graphs run as a node of that kind, as such a node.
  virtual void record_node(ContextImpl& ctx, const OpInfo& op, const SimpleOp& simple) = 0;
  /// A replay's capture comparing with its previous recording (src/graph/capture_state.hpp):
  /// the uses of the node it expects next from ctx (its mutex held) if that is a copy or memset
  /// with `simple`'s parameters, named `what`, after ctx's frontier (`node` set to its index);
  /// else null. Valid while the capture's Replay holds the previous recording (the whole
  /// capture).
  [[nodiscard]] virtual const std::vector<Use>* expected_uses(const ContextImpl& /*ctx*/,
                                                              std::string_view /*what*/,
                                                              const SimpleOp& /*simple*/,
                                                              std::uint32_t& /*node*/) {
    return nullptr;
  }
  /// Records operation `op` of ctx (its mutex held), `simple` with the `uses` expected_uses
  /// returned for `node`: counted matched if that node is still the one expected next, else
  /// recorded as record_node does.
  virtual void record_expected(ContextImpl& ctx, const OpInfo& op, const SimpleOp& simple,
                               std::uint32_t node, std::span<const Use> uses) = 0;
  /// An event marking ctx's current point in the capture.
  virtual std::shared_ptr<EventImpl> record(ContextImpl& ctx, std::source_location loc) = 0;
  /// An event for exactly ctx's work up to operation `seq` (the tracker's marks): the node of
  /// that operation, or the real point where ctx entered the capture for earlier work. Exact
  /// points keep the edges of a capture independent of when the tracker asks.
  virtual std::shared_ptr<EventImpl> record_at(ContextImpl& ctx, std::uint64_t seq) = 0;
  /// `ctx` waits for `event`: an edge, joining ctx to the capture if needed. False if nothing
  /// was added.
  virtual bool wait(ContextImpl& ctx, const std::shared_ptr<EventImpl>& event,
                    std::source_location loc) = 0;
  /// Keeps `keeper` alive as long as the graph being recorded and every copy and executable of
  /// it: the release of an object its nodes use that was destroyed during the capture (a
  /// temporary such as an evaluated expression), which its launches go on using.
  virtual void adopt(std::shared_ptr<void> keeper) = 0;
  /// An operation that cannot be captured: discards the capture and throws Error naming it.
  [[noreturn]] virtual void refuse(const ContextImpl& ctx, std::string_view what,
                                   std::source_location loc) = 0;
  /// A host wait (`what`, at `loc`) on `event`, a point of this capture: refused as `refuse`
  /// does, naming the context the event was recorded on.
  [[noreturn]] virtual void refuse_host_wait(const EventImpl& event, std::string_view what,
                                             std::source_location loc) = 0;
};

/// An event of the core's own rather than a backend's recording: a point inside a capture
/// (src/graph/capture_state.cpp) or the moving point of a graph's event record node
/// (src/graph/graph_data.hpp). Waits and queries look through it to the point it stands for.
class CorePoint : public EventImpl {
 public:
  /// The capture that recorded this point while it is still recording, else null.
  [[nodiscard]] virtual CaptureSink* capture_sink() const noexcept { return nullptr; }
  /// For a point recorded inside a capture: the real point it stands for (the stream where the
  /// context entered the capture); null for other events.
  [[nodiscard]] virtual std::shared_ptr<EventImpl> captured_base() const { return nullptr; }
  /// True for a point that moves: an event record node's, which every launch re-records.
  [[nodiscard]] virtual bool moves() const noexcept { return false; }
  /// For a moving point: the point it stands for now (null while never recorded).
  [[nodiscard]] virtual std::shared_ptr<EventImpl> current_point() const { return nullptr; }
};

/// The capture that recorded `event` while it is still recording, else null.
[[nodiscard]] inline CaptureSink* capture_sink_of(const EventImpl& event) noexcept {
  const auto* p = dynamic_cast<const CorePoint*>(&event);
  return p != nullptr ? p->capture_sink() : nullptr;
}
/// For a point recorded inside a capture: the real point it stands for, else null.
[[nodiscard]] inline std::shared_ptr<EventImpl> captured_base_of(const EventImpl& event) {
  const auto* p = dynamic_cast<const CorePoint*>(&event);
  return p != nullptr ? p->captured_base() : nullptr;
}
/// The point `event` stands for now: a moving point resolved (null if never recorded), a point
/// of an ended capture its real point, any other event itself.
[[nodiscard]] inline std::shared_ptr<EventImpl> resolve_point(
    const std::shared_ptr<EventImpl>& event) {
  const auto* p = dynamic_cast<const CorePoint*>(event.get());
  if (p == nullptr) return event;
  if (p->moves()) return p->current_point();
  if (p->capture_sink() == nullptr) {
    if (auto real = p->captured_base()) return real;  // an event of an ended capture
  }
  return event;
}

/// The end of one operation of a context, for which an event is recorded only if someone still
/// holds this point when the context issues its next operation (or asks for it before): callers
/// that may need an event for an operation, and usually do not, pay for one only when they keep
/// it (the dataflow layer's submit events). See ContextImpl::defer_point.
struct DeferredPoint {
  std::uint64_t seq = 0;
  std::shared_ptr<EventImpl> event;  // written under the context's mutex
};

/// Whether host tasks note the completion of the work before them (the tracker's debug mode,
/// which checks host access against completed work, sets it).
[[nodiscard]] bool host_tasks_note_completion() noexcept;
void set_host_tasks_note_completion(bool on) noexcept;

class ContextImpl;
/// Observers installed (sluice/observe.hpp); enqueue_eager checks it before anything else.
extern std::atomic<int> g_observer_count;
/// True while observers are installed: one relaxed load.
inline bool observers_installed() noexcept {
  return g_observer_count.load(std::memory_order_relaxed) != 0;
}
/// enqueue_eager's path while observers are installed: calls them around `run(state)`.
void observed_enqueue(ContextImpl& ctx, Stream& stream, const OpInfo& op, void (*run)(void*),
                      void* state);
/// A wait `ctx` issued as its operation `seq` for `waited`'s point.
void observed_wait(const ContextImpl& ctx, std::uint64_t seq, const EventImpl& waited);
/// A context is being destroyed (its work completed).
void observed_destroy(std::uint64_t timeline) noexcept;
/// Starts the trace SLUICE_TRACE names (src/core/trace.cpp).
void trace_from_environment();
/// The observers the environment asks for (SLUICE_TRACE, SLUICE_NVTX), installed once per
/// process, when the first context is made.
void observers_from_environment();

/// The context whose operation the calling thread is enqueuing, and the capture recording that
/// operation, if any (ContextImpl::issuing): how an extension's backend code finds the context's
/// state (extension_state_slot) and keeps memory that a recording uses alive
/// (CaptureSink::adopt). Null members outside an enqueue.
struct Issuing {
  ContextImpl* ctx = nullptr;
  CaptureSink* capture = nullptr;
};

class ContextImpl : public std::enable_shared_from_this<ContextImpl> {
 public:
  ContextImpl(std::shared_ptr<Backend> backend, Device device, StreamKind kind, int priority,
              std::string name, void* wrap_native);
  ContextImpl(const ContextImpl&) = delete;
  ContextImpl& operator=(const ContextImpl&) = delete;
  ~ContextImpl();

  /// Issues one operation: `f(Stream&, const OpInfo&)` enqueues it on the backend stream.
  /// On a blocking context the operation first waits for all work issued before it on the device
  /// and has completed (its failure thrown) when `issue` returns.
  template <class F>
  void issue(std::string_view what, std::source_location loc, F&& f) {
    enqueue(what, loc, std::forward<F>(f));
    finish_if_blocking();
  }

  /// The first half of `issue`: enqueues without completing blocking work (for callers that hold
  /// a lock of their own and complete after releasing it). Returns the operation's number.
  template <class F>
  std::uint64_t enqueue(std::string_view what, std::source_location loc, F&& f) {
    if (capturing_.load(std::memory_order_acquire)) {
      if (auto seq = enqueue_captured(what, loc, f)) return seq;
    }
    return enqueue_eager(what, loc, std::forward<F>(f));
  }
  /// As `enqueue` for a copy or memset that `simple` describes: a capture may record it as a
  /// copy or memset node instead of a backend recording (cheaper to capture and to update).
  template <class F>
  std::uint64_t enqueue(std::string_view what, std::source_location loc, const SimpleOp& simple,
                        F&& f) {
    if (capturing_.load(std::memory_order_acquire)) {
      if (auto seq = enqueue_node(what, loc, simple)) return seq;
      if (auto seq = enqueue_captured(what, loc, f)) return seq;
    }
    return enqueue_eager(what, loc, std::forward<F>(f));
  }

  /// The copy or memset `simple` recorded by a replay's capture that expects exactly it next
  /// (CaptureSink::expected_uses), if `admit(sink, uses)` accepts the expected node's uses (the
  /// tracker's checks, run with its lock held by the caller): no access list, no node built.
  /// Returns the operation's number, or 0 if it was not recorded (the caller issues it as usual).
  template <class Admit>
  std::uint64_t enqueue_expected(std::string_view what, std::source_location loc,
                                 const SimpleOp& simple, Admit&& admit) {
    std::lock_guard lock(mutex_);
    // Uses noted by an open mark (Tracker::begin) belong to this node too: record it as usual.
    if (!capture_ || !capture_uses_.empty() || !capture_->active() || !capture_->untracked()) {
      return 0;
    }
    std::uint32_t node = 0;
    const auto* uses = capture_->expected_uses(*this, what, simple, node);
    if (uses == nullptr || !admit(*capture_, std::span<const Use>(*uses))) return 0;
    auto op = next_op(what, loc);
    capture_->record_expected(*this, op, simple, node, *uses);
    return op.seq;
  }

  /// As `enqueue`, but never recorded by a capture (allocations: their memory must exist now).
  template <class F>
  std::uint64_t enqueue_eager(std::string_view what, std::source_location loc, F&& f) {
    std::vector<std::shared_ptr<EventImpl>> prior;
    if (kind_ == StreamKind::blocking) prior = record_device_work(loc);
    std::lock_guard lock(mutex_);
    for (auto& e : prior) stream_->wait(e, next_op("wait (blocking)", loc));
    auto op = next_op(what, loc);
    IssuingScope scope(this, nullptr);
#ifndef SLUICE_BENCH_NO_OBSERVER_HOOK  // only bench/core's A/B of this check compiles it out
    if (observers_installed()) [[unlikely]] {
      auto run = [&] { f(*stream_, op); };
      observed_enqueue(
          *this, *stream_, op, [](void* p) { (*static_cast<decltype(run)*>(p))(); }, &run);
      return op.seq;
    }
#endif
    f(*stream_, op);
    return op.seq;
  }

  /// The operation the calling thread is enqueuing (inside the function given to `enqueue`).
  [[nodiscard]] static const Issuing& issuing() noexcept {
    return issuing_;
  }

  /// Completes the work of a blocking context (and throws its failure); no-op when async.
  void finish_if_blocking() {
    if (kind_ == StreamKind::blocking) synchronize();
  }

  /// Records the current end of this context's work. Consecutive records with no operation
  /// between them (and no timing) share one backend event.
  std::shared_ptr<EventImpl> record(bool timing, std::source_location loc);
  /// Inside an enqueue function only (this context's mutex held): makes `p` the point of the
  /// operation just enqueued. Its event is recorded when the next operation is issued, if `p` is
  /// then still held by someone else, or by `point_event` before that. False while capturing
  /// (the caller records an event instead).
  [[nodiscard]] bool defer_point(std::shared_ptr<DeferredPoint> p, std::uint64_t seq);
  /// Inside an enqueue function only: a point for `defer_point`, reusing one that every holder
  /// gave up (so that issuing with a deferred point allocates nothing once warm).
  [[nodiscard]] std::shared_ptr<DeferredPoint> spare_point();
  /// The event of a deferred point: recorded now if the point is still this context's last
  /// operation. A point given up by every holder before the next operation has none: then an
  /// event recorded now (covering later work too) stands in.
  std::shared_ptr<EventImpl> point_event(DeferredPoint& p, std::source_location loc);
  /// Makes later work here wait for `event`. Returns false (and enqueues nothing) if this context
  /// already waits for that point or a later one of the same context (the vector clock).
  /// Like `enqueue`, it leaves completing blocking work to `finish_if_blocking`.
  bool wait(const std::shared_ptr<EventImpl>& event, std::source_location loc);
  /// True if work issued here from now on is already ordered after operation `seq` of `timeline`.
  [[nodiscard]] bool waits_for(std::uint64_t timeline, std::uint64_t seq);
  /// Blocks until all issued work completed, then throws the unreported failure if any.
  void synchronize(std::source_location loc = std::source_location::current());

  // ---- graph capture (sluice/graph.hpp) ----
  /// True while this context's work is recorded by a capture.
  [[nodiscard]] bool capturing() const noexcept {
    return capturing_.load(std::memory_order_acquire);
  }
  /// True while a replay's capture of this context compares each operation with its previous
  /// recording (a hint: enqueue_expected checks under the locks). Set by the capture.
  [[nodiscard]] bool capture_expects() const noexcept {
    return capture_expects_.load(std::memory_order_relaxed);
  }
  void set_capture_expects(bool on) noexcept {
    capture_expects_.store(on, std::memory_order_relaxed);
  }
  /// Whether any context of the process is capturing (cheap: one load), so that paths with
  /// nothing to do outside a capture, such as a buffer's release, skip their capture checks.
  [[nodiscard]] static bool any_capturing() noexcept;
  /// The capture recording this context, if any.
  [[nodiscard]] std::shared_ptr<CaptureSink> capture();
  /// Starts recording into `sink`; throws if another capture records this context.
  void begin_capture(std::shared_ptr<CaptureSink> sink, std::source_location loc);
  /// Stops recording into `sink` (no-op if it is not the one recording). Never throws.
  void end_capture(const CaptureSink* sink) noexcept;
  /// Throws through the capture's guard if this context is capturing: `what` cannot be captured.
  void refuse_if_capturing(std::string_view what, std::source_location loc);
  /// Accesses the tracker declared for the next captured operation.
  void note_capture_uses(std::span<const Use> accesses);
  /// The accesses noted since the last captured operation (mutex_ held by the caller), until
  /// `clear_capture_uses` (which keeps the storage for the next operation).
  [[nodiscard]] std::span<const Use> capture_uses() const noexcept {
    return capture_uses_;
  }
  void clear_capture_uses() noexcept {
    capture_uses_.clear();
  }
  /// Releases device memory in stream order. Never throws.
  void deallocate(void* ptr, std::size_t bytes) noexcept;
  /// Throws the carried failure once (used after the context drained).
  void throw_failure();

  [[nodiscard]] Stream& stream() noexcept {
    return *stream_;
  }
  [[nodiscard]] Backend& backend() noexcept {
    return *backend_;
  }
  [[nodiscard]] const std::shared_ptr<Backend>& shared_backend() const noexcept {
    return backend_;
  }
  [[nodiscard]] const std::shared_ptr<FailureState>& failures() const noexcept {
    return failures_;
  }
  [[nodiscard]] const Device& device() const noexcept {
    return device_;
  }
  [[nodiscard]] StreamKind kind() const noexcept {
    return kind_;
  }
  [[nodiscard]] const std::string& name() const noexcept {
    return name_;
  }
  /// Unique id of this context's sequence of operations (never reused).
  [[nodiscard]] std::uint64_t timeline() const noexcept {
    return timeline_;
  }
  /// Number of the last operation issued.
  [[nodiscard]] std::uint64_t issued() const noexcept {
    return seq_.load(std::memory_order_acquire);
  }
  /// Operations known to have completed (a lower bound, raised by waits on the host).
  [[nodiscard]] std::uint64_t completed() const noexcept {
    return completed_.load(std::memory_order_acquire);
  }
  void note_completed(std::uint64_t seq) noexcept;

  /// This context's backend's implementation of extension `Ext` (sluice/extension.hpp), cached.
  template <ExtensionInterface Ext>
  [[nodiscard]] Ext& extension(std::source_location loc = std::source_location::current()) {
    return cached_extension<Ext>(extension_cache_slot(extension_slot<Ext>()), device_.backend, loc);
  }
  /// Per-context state of extension slot `slot` (e.g. the FFT plans made for this context), or
  /// null beyond the table's size. The context owns it and drops it after its work completed.
  /// Use it only while issuing on this context (under its issue order, inside `enqueue`).
  [[nodiscard]] std::shared_ptr<void>* extension_state_slot(std::size_t slot) noexcept {
    return slot < extension_state_.size() ? &extension_state_[slot] : nullptr;
  }
  /// The cache entry for extension slot `slot`, or null beyond the cache's size.
  [[nodiscard]] void** extension_cache_slot(std::size_t slot) noexcept {
    return slot < extension_cache_.size() ? &extension_cache_[slot] : nullptr;
  }

 private:
  /// Returns 0 if the capture ended meanwhile (then the caller enqueues eagerly).
  std::uint64_t enqueue_captured(std::string_view what, std::source_location loc,
                                 const std::function<void(Stream&, const OpInfo&)>& f);
  /// Records `simple` as a node if capturing and the stream allows it; else returns 0.
  std::uint64_t enqueue_node(std::string_view what, std::source_location loc,
                             const SimpleOp& simple);

  /// Sets `issuing()` for the duration of one enqueue function (nested enqueues restore it).
  class IssuingScope {
   public:
    IssuingScope(ContextImpl* ctx, CaptureSink* capture) noexcept : saved_(issuing_) {
      issuing_ = {ctx, capture};
    }
    IssuingScope(const IssuingScope&) = delete;
    IssuingScope& operator=(const IssuingScope&) = delete;
    ~IssuingScope() { issuing_ = saved_; }

   private:
    Issuing saved_;
  };
  static inline thread_local Issuing issuing_{};

  // Numbers are assigned under mutex_; the atomic lets `issued()` read without it.
  OpInfo next_op(std::string_view what, std::source_location loc) {
    if (tail_point_) flush_tail_point(loc);
    return {seq_.fetch_add(1, std::memory_order_acq_rel) + 1, what, loc};
  }
  /// The last operation is about to stop being the last: records its deferred point's event if
  /// anyone still holds the point (mutex_ held).
  void flush_tail_point(std::source_location loc);
  /// `record` with mutex_ held.
  std::shared_ptr<EventImpl> record_locked(bool timing, std::source_location loc);
  /// Events marking the end of every other context's work on this device (blocking kind).
  std::vector<std::shared_ptr<EventImpl>> record_device_work(std::source_location loc);

  std::shared_ptr<Backend> backend_;
  Device device_;
  StreamKind kind_;
  std::string name_;
  std::shared_ptr<FailureState> failures_;
  std::unique_ptr<Stream> stream_;
  std::uint64_t timeline_;
  std::mutex mutex_;  // issue order: op numbering and enqueue happen together
  std::atomic<std::uint64_t> seq_{0};
  std::atomic<std::uint64_t> completed_{0};
  // The deferred point of the last operation, if any, and the event last recorded at the end of
  // the work (shared by records with no operation between them).
  std::shared_ptr<DeferredPoint> tail_point_;
  std::shared_ptr<DeferredPoint> spare_point_;
  std::shared_ptr<EventImpl> tail_event_;
  std::uint64_t tail_event_seq_ = 0;
  // Vector clock: per other timeline, the highest operation this context already waits for.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> clock_;
  // Capture: the flag is the fast path of `enqueue`; the sink and pending uses live under mutex_.
  /// capturing_, keeping the process-wide count of any_capturing(); mutex_ held.
  void set_capturing(bool on) noexcept;
  std::atomic<bool> capturing_{false};
  std::atomic<bool> capture_expects_{false};
  std::shared_ptr<CaptureSink> capture_;
  std::vector<Use> capture_uses_;
  // Extensions of this context's backend, by slot (accessed through std::atomic_ref).
  std::array<void*, 16> extension_cache_{};
  // Extensions' per-context state, by slot; declared after stream_ so that it goes first (the
  // destructor has synchronized by then).
  std::array<std::shared_ptr<void>, 16> extension_state_{};
};

}  // namespace sluice::detail
