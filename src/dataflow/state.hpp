#pragma once
// The dataflow layer's internal state: queues, command groups being built, buffers and the gates
// that hold device work back while host accessors live. Lock order: buffer, tracker, context.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <source_location>
#include <string>
#include <thread>
#include <vector>

#include "core/context_impl.hpp"
#include "dataflow/device_ops.hpp"
#include "deps/issue.hpp"
#include "deps/tracker.hpp"
#include "sluice/dataflow.hpp"
#include "sluice/memory.hpp"

namespace sluice::dataflow::detail {

using sluice::detail::AccessList;
using sluice::detail::ContextImpl;

enum class BackendKind : std::uint8_t { host, cuda, other };

/// Nanoseconds of std::chrono::steady_clock: the time base of profiling.
[[nodiscard]] std::uint64_t steady_ns() noexcept;

/// A profiling queue's reference point on one context: a timed event known to have completed at
/// `host_ns`, against which the device times of later events are measured.
struct Epoch {
  std::shared_ptr<EventImpl> event;
  std::uint64_t host_ns = 0;
};

/// The profiling times of one command group (a profiling queue only).
struct Profile {
  std::uint64_t submit_ns = 0;
  std::shared_ptr<const Epoch> epoch;
  std::shared_ptr<EventImpl> start;
  std::shared_ptr<EventImpl> end;
};

class QueueState {
 public:
  QueueState(const QueueOptions& options, std::source_location loc);
  /// The context the next command group runs on (round robin when out-of-order).
  [[nodiscard]] const Context& pick() noexcept;
  /// The profiling epoch of `ctx`, one of this queue's contexts.
  [[nodiscard]] std::shared_ptr<const Epoch> epoch(const Context& ctx) const;

  Device device;
  BackendKind backend = BackendKind::other;
  bool in_order = false;
  bool profiling = false;
  std::string name;
  std::vector<Context> contexts;
  std::vector<std::shared_ptr<const Epoch>> epochs;  // per context, profiling queues only

 private:
  std::atomic<std::size_t> next_{0};
};

/// Holds device work on a buffer back while host accessors on it live (one per "generation" of
/// host accessors): issued on each context before the first command group there that touches the
/// buffer, opened when the last host accessor goes.
class Gate {
 public:
  /// Begins a host hold (sluice/backend.hpp) that opening ends.
  explicit Gate(const Device& device);
  ~Gate();
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  /// Issues the gate on `ctx` unless already there.
  void issue(const Context& ctx, std::source_location loc);
  void open() noexcept;
  /// True if `thread` holds the host accessors that keep it closed and operation `seq` of
  /// `timeline` is at or after the gate.
  [[nodiscard]] bool blocks(std::uint64_t timeline, std::uint64_t seq) const;
  /// If `ctx` now waits for work this gate holds back, its operations from `from` on are held
  /// back too.
  void propagate(ContextImpl& ctx, std::uint64_t from);
  void add_holder(std::thread::id t);
  void remove_holder(std::thread::id t);
  /// Keeps `keeper` until this gate is gone (it is opened first): cleanup that must wait for
  /// work the gate holds back (a buffer destroyed while the gate was closed).
  void park(std::shared_ptr<void> keeper);

 private:
  // Destroyed after the gate opened: buffers' cleanup and the contexts it holds work back on.
  std::vector<std::shared_ptr<void>> parked_;
  std::atomic<bool> opened_{false};
  std::vector<std::thread::id> holders_;
  DeviceOps* ops_;  // the backend's gate, or null: a blocking host task
  std::shared_ptr<std::atomic<int>> flag_ = std::make_shared<std::atomic<int>>(0);
  std::optional<PinnedBuffer<int>> device_flag_;
  mutable std::mutex mutex_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> issued_;  // timeline, seq
};

/// Gates currently closed, for the deadlock check of waits.
void register_gate(const std::shared_ptr<Gate>& g);
void unregister_gate(const Gate* g) noexcept;
/// Throws Error if waiting for operation `seq` of `timeline` (0: every operation) on this thread
/// would wait for a gate this thread keeps closed.
void check_gates(std::uint64_t timeline, std::uint64_t seq, std::string_view what,
                 std::source_location loc);
/// The gates this thread keeps closed that hold back operation `seq` of `timeline`.
[[nodiscard]] std::vector<std::shared_ptr<Gate>> gates_holding(std::uint64_t timeline,
                                                               std::uint64_t seq);
/// The gates this thread keeps closed that would hold back the next operation issued on `ctx`.
[[nodiscard]] std::vector<std::shared_ptr<Gate>> gates_holding_next(ContextImpl& ctx);
/// Throws Error (naming `what`) if a host wait for `id` in `mode` would wait for work a
/// HostAccessor of this thread holds back.
void check_host_wait(ObjectId id, Access mode, ByteRange range, std::string_view what,
                     std::source_location loc);

class BufferState {
 public:
  BufferState(std::size_t bytes, void* host, bool write_back, std::source_location loc);
  BufferState(const BufferState&) = delete;
  BufferState& operator=(const BufferState&) = delete;
  ~BufferState();

  struct Copy {
    Device device;
    sluice::detail::RawDeviceBuffer owned;  // empty for a buffer over the user's device memory
    std::byte* ptr = nullptr;
    ObjectId id = 0;
    std::optional<Context> home;  // copies out of this copy are issued here
    bool valid = false;
  };

  /// The device copy for `q`'s device, allocated on first use.
  /// The copy on q's device, made (allocated in `ctx`'s stream order) on first use.
  Copy& copy_for(QueueState& q, const Context& ctx, std::source_location loc);
  /// Makes the host copy current (issuing a copy from a device if needed) and returns nothing:
  /// the caller waits for it through the tracker.
  void refresh_host(std::source_location loc);
  /// Allocates and registers host memory for a buffer made without any.
  void ensure_host(std::source_location loc);
  /// True if the host copy is the user's memory of unknown kind (pageable, on cuda).
  [[nodiscard]] bool host_pageable() const noexcept { return registered_host_ && !detached_; }
  /// Before anything writes the host copy: a buffer made over const memory moves its host copy
  /// to memory of its own (the user's data copied there), so the user's memory is never written.
  void detach_const_host(std::source_location loc);
  [[nodiscard]] bool detached() const noexcept { return detached_; }
  /// Pinned memory the size of the buffer on `device`, for copies in while host accessors live
  /// (allocated on first use; see require_buffer).
  const sluice::detail::RawPinnedBuffer& mirror(const Device& device, std::source_location loc);

  std::mutex mutex;
  std::size_t bytes;
  std::byte* host = nullptr;
  ObjectId host_id = 0;
  std::size_t host_offset = 0;  // of `host` in the region `host_id`
  bool write_back;
  bool host_valid = false;
  bool initialized = false;  // some copy holds data
  std::vector<std::unique_ptr<Copy>> copies;
  std::shared_ptr<Gate> gate;  // while host accessors live
  int host_accessors = 0;
  std::vector<std::thread::id> holders;  // threads holding the host accessors
  std::optional<Device> bound;           // made over this device's memory: no host copy
  bool host_const = false;               // `host` is the user's const memory: never written
  // The command group that last wrote a device copy: operation `last_seq` of `last_timeline`.
  std::uint64_t last_timeline = 0;
  std::uint64_t last_seq = 0;

 private:
  sluice::detail::RawPinnedBuffer own_host_;  // host memory for a buffer made without any
  sluice::detail::RawPinnedBuffer mirror_;
  bool registered_host_ = false;
  ObjectId user_id_ = 0;   // the user's memory (registered here if registered_host_)
  bool detached_ = false;  // const: the host copy moved to own_host_
};

/// One command group being built.
class SubmitState {
 public:
  void reset(QueueState& q, std::source_location loc);
  /// Throws Error(invalid_state) unless the command group is being built (its submit has not
  /// returned): a Handler kept past its submit.
  void require_active(std::string_view what, std::source_location loc) const;

  Handler handler{*this};
  bool active = false;
  std::uint64_t serial = 0;       // unique per command group (accessors carry it)
  std::uint64_t outer_group = 0;  // the group this thread was building before (nested submits)

  QueueState* queue = nullptr;
  const Context* ctx = nullptr;
  /// False until something was issued for the command group: until then an out-of-order queue
  /// may still move it to the context of the work it depends on (see `place`).
  bool placed = false;
  AccessList accesses;
  std::vector<std::shared_ptr<sluice::EventImpl>> waits;
  struct Written {
    std::shared_ptr<BufferState> buffer;
    BufferState::Copy* copy;
  };
  std::vector<Written> written;
  std::vector<std::shared_ptr<BufferState>> buffers;       // kept alive until issued
  std::vector<std::shared_ptr<BufferState>> host_updated;  // update_host: host copy current after
  std::size_t local_bytes = 0;
  bool has_local = false;
  bool launched = false;
  Event result;
  /// Where the submit's phase profile continues (SLUICE bench/dataflow; submit_profile.hpp).
  std::chrono::steady_clock::time_point profile_from{};
};

/// An out-of-order queue runs a command group on the context of operation `seq` of `timeline`,
/// which it depends on, when that is one of its contexts and nothing was issued there after it:
/// then the dependency is the context's issue order, and no event or cross-context wait is
/// needed. Called once, before anything is issued for the command group.
void place(SubmitState& s, std::uint64_t timeline, std::uint64_t seq) noexcept;

/// Issues the command group's one operation: `work(stream, op, state)` enqueues it (null: no
/// operation, the group completes after its dependencies), after the waits its accesses and
/// events need; then records its event (and profile) and what it wrote.
void issue_group(SubmitState& s, const char* what, std::source_location loc,
                 void (*work)(Stream&, const OpInfo&, void*), void* state);

/// Device work on `ctx` from operation `from` on now waits (through the tracker or
/// `depends_on`) for work a closed gate holds back: it is held back too (the deadlock check of
/// waits follows it through other contexts).
void propagate_gates(ContextImpl& ctx, std::uint64_t from);

/// Constructs an Event (its members are private to the public header).
class EventAccess {
 public:
  static Event make(std::shared_ptr<ContextImpl> ctx,
                    std::shared_ptr<sluice::detail::DeferredPoint> point, std::uint64_t seq,
                    std::shared_ptr<const Profile> profile = nullptr) {
    Event e;
    e.ctx_ = std::move(ctx);
    e.point_ = std::move(point);
    e.profile_ = std::move(profile);
    e.seq_ = seq;
    return e;
  }
  static const std::shared_ptr<ContextImpl>& context(const Event& e) { return e.ctx_; }
  static const std::shared_ptr<sluice::detail::DeferredPoint>& point(const Event& e) {
    return e.point_;
  }
  static std::uint64_t seq(const Event& e) { return e.seq_; }
};

}  // namespace sluice::dataflow::detail
