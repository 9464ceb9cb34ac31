#pragma once
// The dependency tracker: per tracked object, an interval map from byte ranges to the last writer
// and the readers since, and the waits that follow from it (DESIGN.md, "Keeping the tracker
// cheap"). One mutex guards all state; lock order is tracker, then context.
// Defined in tracker.cpp (ordering device work), tracker_memory.cpp (objects and registered
// regions), tracker_host.cpp (host waits and accessors), tracker_retire.cpp (stream-ordered
// release) and tracker_debug.cpp (the debug graph and counters).

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/context_impl.hpp"
#include "deps/access_list.hpp"
#include "sluice/deps.hpp"

namespace sluice::detail {

/// The end of one access: operation `seq` of a context's timeline. Shared by every segment the
/// access covered, so an event recorded for it once serves them all.
struct Mark {
  std::weak_ptr<ContextImpl> ctx;
  std::uint64_t timeline = 0;
  std::uint64_t seq = 0;
  std::shared_ptr<EventImpl> event;  // recorded at `seq` or later; null until someone needs it
  std::uint32_t node = 0;            // debug graph node
};
using MarkRef = std::shared_ptr<Mark>;

struct Segment {
  std::size_t end = 0;
  MarkRef writer;
  std::vector<MarkRef> readers;  // at most one per timeline: the latest
};

/// What a message names a tracked object by: its kind, size, device and where it was made.
struct ObjectOrigin {
  std::size_t size = 0;
  std::optional<MemoryType> type;  // registered memory; none for other objects
  std::optional<Device> device;
  std::source_location made{};
};

class Tracker {
 public:
  static Tracker& instance();

  ObjectId register_memory(const void* ptr, const MemoryAttributes& attr,
                           const std::shared_ptr<ContextImpl>& producer, std::uint64_t produced_at,
                           std::source_location loc);
  std::optional<RegisteredMemory> find_memory(const void* ptr);
  void unregister(ObjectId id, std::source_location loc);
  ObjectId new_object(std::source_location loc = std::source_location::current());

  /// Issues `enqueue()` after making `ctx` wait for every conflicting earlier access, then
  /// records the accesses (pointers resolved to registered regions, merged by AccessList's rule)
  /// and completes blocking work. `enqueue` runs under the tracker lock and must only enqueue.
  /// Layers reach this through issue_tracked (deps/issue.hpp).
  void run(ContextImpl& ctx, const AccessList& accesses, std::string_view what,
           std::source_location loc, const std::function<void()>& enqueue);

  /// For a copy or memset `simple` issued on ctx while a replay's untracked capture expects
  /// exactly it next (CaptureSink::expected_uses): checks the uses of the recorded node (every
  /// object still tracked, so the addresses lie in the same memory; no host accessor) and notes
  /// them as run_untracked does, without resolving the addresses or building an access list,
  /// and records it. Returns its operation number, 0 if not recorded so (the caller issues it as
  /// usual).
  std::uint64_t run_expected(ContextImpl& ctx, std::string_view what, std::source_location loc,
                             const SimpleOp& simple);

  /// Throws Error(invalid_argument) if any object of `accesses` is no longer tracked (destroyed).
  void require_tracked(std::span<const Use> accesses, std::source_location loc);

  void begin(ContextImpl& ctx, const Use& access, std::string_view what, std::source_location loc);
  void end(ContextImpl& ctx, const Use& access, std::string_view what, std::source_location loc);

  /// Capture guard for a host access about to wait by other means (a read-back context): throws
  /// through the capture if the work it would wait for is being captured.
  void refuse_host_wait_if_captured(ObjectId id, Access mode, std::string_view what,
                                    std::source_location loc);
  /// The points (timeline, operation) a host access in `mode` would wait for: each incomplete
  /// conflicting access, up to the end of the event a wait on it uses (one recorded at the
  /// wait covers the context's later work too).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> pending(ObjectId id, Access mode,
                                                               ByteRange range,
                                                               std::source_location loc);
  /// Blocks the host for the accesses a host access in `mode` conflicts with.
  void wait_host(ObjectId id, Access mode, ByteRange range, std::source_location loc);
  /// Host accessor bookkeeping: conflicting device work is refused while one is alive.
  void host_access_begin(ObjectId id, Access mode, ByteRange range, std::source_location loc);
  void host_access_end(ObjectId id, Access mode, ByteRange range) noexcept;
  /// Debug mode: throws if queued work still writes the bytes the host is touching.
  void check_unguarded_host_access(ObjectId id, std::source_location loc);

  /// Stops tracking `id` and calls `release(ctx)` on a context ordered after every access, once
  /// (stream-ordered: `release` enqueues the free). `home` is used when nothing else is.
  /// An object that work being captured uses is adopted by that capture instead (its graph's
  /// launches use it): released as above once the graph and its executables are gone.
  void retire(ObjectId id, const std::shared_ptr<ContextImpl>& home,
              const std::function<void(ContextImpl&)>& release) noexcept;

  /// A capture stopped recording: the accesses recorded for its operations (which ran only if
  /// its graph is launched) now stand for `end`, a point of `origin` after everything that work
  /// waited for (null: the host waited for all of it). Never throws.
  void capture_ended(const CaptureSink* sink, const std::shared_ptr<ContextImpl>& origin,
                     const std::shared_ptr<EventImpl>& end) noexcept;

  void set_debug(bool on);
  [[nodiscard]] bool debug() const { return debug_.load(std::memory_order_relaxed); }
  void write_dot(std::ostream& out);
  void clear_graph();
  deps::Stats stats();
  deps::Footprint footprint();

 private:
  using Origin = ObjectOrigin;
  struct Object {
    std::map<std::size_t, Segment> segments;  // by start; disjoint
    Origin origin;
    std::size_t size = std::numeric_limits<std::size_t>::max();
    std::uintptr_t base = 0;  // registered memory: its address; 0 for other objects
    std::uint64_t first_timeline = 0;
    bool shared = false;  // touched by two timelines: record events eagerly from now on
    int host_readers = 0;
    int host_writers = 0;
    // The last untracked capture (CaptureSink::untracked) that wrote, or used, the object: its
    // serial (0: none). Such a capture leaves no marks; these stand in for its guards.
    std::uint64_t untracked_write = 0;
    std::uint64_t untracked_use = 0;
    std::string name;
  };
  struct Region {
    std::size_t size;
    ObjectId id;
    MemoryAttributes attributes;
  };
  struct Node {
    std::string label;
  };

  Object& object(ObjectId id, std::source_location loc);
  /// How messages name `id`: "device buffer of 64 bytes on cuda:0 made at f.cpp:12" (mutex_
  /// held); `gone` is set when it was destroyed or unregistered.
  [[nodiscard]] std::string describe(ObjectId id, bool* gone = nullptr) const;
  /// Erases a tracked object, remembering how to name it in later messages (mutex_ held).
  void erase_object(std::unordered_map<ObjectId, Object>::iterator it);
  void resolve(const RawUse& a, AccessList& out);
  void run_locked(ContextImpl& ctx, std::span<const Use> accesses, std::string_view what,
                  std::source_location loc, const std::function<void()>& enqueue);
  /// run_locked for an operation an untracked capture records: each access checked and noted
  /// for its node, no waits, no marks (the graph's launch is the tracked operation).
  void run_untracked(ContextImpl& ctx, CaptureSink& sink, std::span<const Use> accesses,
                     std::string_view what, std::source_location loc,
                     const std::function<void()>& enqueue);
  /// Remembers that untracked capture `serial` records ctx's work (for the guards below).
  void note_untracked_capture(ContextImpl& ctx, std::uint64_t serial);
  /// The context of the active untracked capture that used `obj` (wrote it, if `writes_only`),
  /// or null.
  std::shared_ptr<ContextImpl> untracked_user(const Object& obj, bool writes_only) const;
  /// `ctx` (not recording into it) accessing `obj` as `a` after an untracked capture used it
  /// conflictingly: ctx joins that capture after everything it recorded so far (a wait on its
  /// current point), as a wait on a mark of a tracked capture would join it.
  void join_untracked(ContextImpl& ctx, const Object& obj, const Use& a, std::source_location loc);
  /// Capture guard of a host access in `mode` to `obj` against an untracked capture's work.
  void refuse_if_untracked_captured(const Object& obj, Access mode, std::string_view what,
                                    std::source_location loc) const;
  /// Splits segments so that `lo` and `hi` are boundaries (creating empty ones for gaps).
  void split(Object& obj, std::size_t lo, std::size_t hi);
  /// [lo, hi) of an access, checked against the object's size.
  std::pair<std::size_t, std::size_t> bounds(const Object& obj, const Use& a,
                                             std::source_location loc) const;
  /// Incomplete earlier accesses that `a` must wait for (`timeline` 0: the host, which waits for
  /// every context).
  void collect(Object& obj, const Use& a, std::uint64_t timeline, std::vector<Mark*>& deps,
               std::source_location loc);
  void check_host_conflict(const Object& obj, ObjectId id, const Use& a, ContextImpl& ctx,
                           std::string_view what, std::source_location loc) const;
  void wait_all(ContextImpl& ctx, std::vector<Mark*>& deps, std::uint32_t node,
                std::source_location loc);
  void record(ContextImpl& ctx, Object& obj, const Use& a, std::uint64_t seq, std::uint32_t node,
              std::source_location loc);
  std::uint32_t add_node(ContextImpl& ctx, std::span<const Use> a, std::string_view what,
                         std::source_location loc);
  std::shared_ptr<EventImpl> event_for(Mark& m);
  /// retire() without the capture's adoption. Called while this thread holds mutex_ in run()
  /// (a graph launch dropping the last IR version that adopted a buffer), it is kept until run()
  /// lets go of the lock.
  void release_now(ObjectId id, const std::shared_ptr<ContextImpl>& home,
                   const std::function<void(ContextImpl&)>& release) noexcept;
  /// Runs the releases kept while this thread held mutex_ in run().
  void release_kept() noexcept;
  /// The active capture that records work using `id` (of home or of a context with a mark on
  /// it), or null.
  std::shared_ptr<CaptureSink> capture_using(ObjectId id, const std::shared_ptr<ContextImpl>& home);
  /// The context that frees a retired object: see retire().
  std::shared_ptr<ContextImpl> release_target(const std::shared_ptr<ContextImpl>& home,
                                              const std::vector<Mark*>& deps);
  static bool complete(const Mark& m);
  /// How deep this thread is in run() (which holds mutex_ while the work is issued).
  static int& run_depth() noexcept;
  /// Capture guard: throws (through the capture) if any of `deps` is being captured.
  static void refuse_if_captured(const std::vector<Mark*>& deps, std::string_view what,
                                 std::source_location loc);
  /// Host-side wait on `deps`; reports a failure (once) if `report`.
  void wait_on_host(std::unique_lock<std::mutex>& lock, std::vector<Mark*>& deps, bool report,
                    std::source_location loc);

 public:
  /// As wait_host, but never throws for failed work (destructors).
  void wait_host_quietly(ObjectId id) noexcept;

 private:
  std::mutex mutex_;
  std::unordered_map<ObjectId, Object> objects_;
  // The last objects erased, for messages about their later use (a ring).
  std::array<std::pair<ObjectId, Origin>, 256> erased_;
  std::size_t erased_next_ = 0;
  std::map<std::uintptr_t, Region> regions_;  // by base address
  ObjectId next_id_ = 1;
  std::atomic<bool> debug_{false};
  std::vector<Node> nodes_;
  std::vector<std::tuple<std::uint32_t, std::uint32_t, bool>> edges_;  // from, to, elided
  std::unordered_map<std::uint64_t, std::uint32_t> open_nodes_;        // begin -> end (debug)
  deps::Stats stats_;
  std::unordered_map<std::string, std::shared_ptr<ContextImpl>> release_contexts_;
  // Marks of operations a capture recorded instead of running, per capture, until it ends.
  std::unordered_map<const CaptureSink*, std::vector<std::weak_ptr<Mark>>> captured_marks_;
  // The untracked captures recording now: serial and the context recording into it (until
  // capture_ended).
  std::vector<std::pair<std::uint64_t, std::weak_ptr<ContextImpl>>> untracked_captures_;
};

}  // namespace sluice::detail
