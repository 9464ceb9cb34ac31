#pragma once
/// @file
/// The plugin interface every backend implements. Users of sluice never need it; backend
/// authors implement `Backend`, `Stream` and `EventImpl` (and, for graphs, `GraphExecutable`
/// over the IR of sluice/ext/graph_ir.hpp) and call `register_backend`, from a program or from a
/// module (sluice/ext/plugin.hpp). A backend is the runtime only (streams, events, memory,
/// graphs); what a layer needs per backend (its kernels, canned operations) is an extension
/// registered beside it (sluice/extension.hpp).
///
/// Thread safety: every member of `Stream`, `EventImpl` and `Backend` may be called from several
/// host threads at once; the core serializes only what it must (issue order on one context).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/platform.hpp"

namespace sluice {

enum class StreamKind : std::uint8_t;
namespace ir {
struct Graph;  // sluice/ext/graph_ir.hpp
struct LaunchEvents;
}  // namespace ir

/// Who issued an operation and where: carried with every piece of queued work so that a failure
/// names the operation and the line that issued it.
struct OpInfo {
  std::uint64_t seq = 0;  ///< the operation's number on its context (1, 2, ...)
  std::string_view what;  ///< e.g. "copy"; valid during the call only: backends copy what they keep
  std::source_location where;
};

/// A copy or a memset told by its parameters, so that a graph capture can record it as a node of
/// its own (compared and updated in place by later replays) rather than as a backend recording.
struct SimpleOp {
  enum class Kind : std::uint8_t { copy, memset };
  Kind kind = Kind::copy;
  void* dst = nullptr;
  const void* src = nullptr;  ///< copies only
  std::size_t bytes = 0;
  int value = 0;  ///< memsets only
  /// Where `dst` and `src` lie when sluice's registry knows (its own buffers), so that a backend
  /// need not ask its runtime; `unknown` otherwise. Device indices are of the context's backend.
  enum class Place : std::uint8_t { unknown, device, pinned, pageable };
  Place dst_place = Place::unknown;
  Place src_place = Place::unknown;
  int dst_device = -1;
  int src_device = -1;
};

/// A failure of queued work, shared by every context whose work depended on it.
struct Failure {
  std::string operation;
  std::source_location issued_at;
  std::string cause;
  std::atomic<std::uint64_t> skipped{0};  ///< later operations that were not run
  std::atomic<bool> reported{false};      ///< thrown once, then never again
};

/// Per-context record of failed work, written by the backend that runs the work and read by the
/// core when a call waits. A context holds at most one unreported failure: the first one, or one
/// it adopted by waiting on failed work of another context.
class FailureState {
 public:
  /// Records that operation `op` failed with `cause` (keeps the first failure only).
  void fail(const OpInfo& op, std::string cause);
  /// Makes this context carry `f` from operation `seq` on (work that waited on failed work).
  void adopt(std::shared_ptr<Failure> f, std::uint64_t seq);
  /// The failure carried at or before operation `seq`, if any and not yet reported.
  [[nodiscard]] std::shared_ptr<Failure> at_or_before(std::uint64_t seq) const;
  /// True if an operation numbered `seq` must be skipped; counts it as skipped.
  bool skip(std::uint64_t seq);
  /// Removes and returns the carried failure (after the context drained).
  std::shared_ptr<Failure> take();
  /// True once work that can fail on the host (host tasks, waits on such work) was issued here;
  /// lets backends avoid bookkeeping for pure device work.
  [[nodiscard]] bool may_fail() const noexcept { return may_fail_.load(std::memory_order_relaxed); }
  void set_may_fail() noexcept { may_fail_.store(true, std::memory_order_relaxed); }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<Failure> failure_;
  std::uint64_t since_ = 0;
  std::atomic<bool> may_fail_{false};
};

/// A recorded point on a stream. Created by `Stream::record`.
class EventImpl {
 public:
  virtual ~EventImpl() = default;
  /// True once all work before the recorded point completed.
  [[nodiscard]] virtual bool query() = 0;
  /// Blocks until the recorded point completed.
  virtual void synchronize() = 0;
  /// Milliseconds between `start` and this event; both must have been recorded with timing.
  [[nodiscard]] virtual double elapsed_ms_since(const EventImpl& start) = 0;

  std::shared_ptr<FailureState> failures;  ///< of the stream it was recorded on
  std::uint64_t seq = 0;                   ///< last operation number before the recorded point
  std::uint64_t timeline = 0;              ///< unique id of the context it was recorded on
  Device device;
};

/// One ordered queue of work on a device.
class Stream {
 public:
  virtual ~Stream() = default;

  /// Runs `fn` on a host thread once all earlier work on this stream completed. If `fn` throws,
  /// the exception is recorded in the failure state under `op` and later work is skipped.
  virtual void host_task(std::function<void()> fn, const OpInfo& op) = 0;
  /// Copies `bytes` from `src` to `dst`; either side may be device, pinned or pageable memory.
  virtual void copy(void* dst, const void* src, std::size_t bytes, const OpInfo& op) = 0;
  virtual void memset(void* dst, int value, std::size_t bytes, const OpInfo& op) = 0;
  /// Stream-ordered allocation from the device's pool; throws OutOfMemory.
  virtual void* allocate(std::size_t bytes, const OpInfo& op) = 0;
  /// Stream-ordered release into the device's pool. Never throws.
  virtual void deallocate(void* ptr, std::size_t bytes) noexcept = 0;

  /// Records the current end of the stream.
  virtual std::shared_ptr<EventImpl> record(bool timing, const OpInfo& op) = 0;
  /// Makes later work on this stream wait for `event` (possibly of another device).
  virtual void wait(const std::shared_ptr<EventImpl>& event, const OpInfo& op) = 0;

  /// True if all issued work completed.
  [[nodiscard]] virtual bool query() = 0;
  /// Blocks until all issued work completed. Failures of host tasks are left in the failure
  /// state for the core to report; a fault of the device runtime itself is thrown as Error,
  /// naming the operations that were in flight.
  virtual void synchronize() = 0;

  /// The native handle (cudaStream_t on cuda, nullptr on host).
  [[nodiscard]] virtual void* native_handle() noexcept = 0;
  /// The effective (clamped) priority.
  [[nodiscard]] virtual int priority() const noexcept = 0;

  /// Graph capture of one operation (sluice/graph.hpp): work enqueued between `begin_capture`
  /// and `end_capture` is recorded instead of run; `end_capture` returns the recording, which
  /// the same backend's `instantiate_graph` understands as an `ir::Captured` node's recording (null
  /// if nothing was enqueued). Waits and records are never enqueued while capturing (the core turns
  /// them into edges); allocations and frees bypass the recording. `end_capture` throws
  /// Error(invalid_state) if the recording was invalidated (e.g. by a foreign call on a cuda
  /// stream). The default says the backend cannot capture.
  virtual void begin_capture(const OpInfo& op);
  [[nodiscard]] virtual std::shared_ptr<void> end_capture(const OpInfo& op);
  /// Drops a recording begun with `begin_capture` (the operation threw). Never throws.
  virtual void abort_capture() noexcept {}
  /// True if this backend's graphs run `op` as a copy or memset node exactly as this stream would
  /// run it (no staging, no host function): a capture then records it as that node instead of
  /// calling `begin_capture`. The default says no.
  [[nodiscard]] virtual bool can_record_as_node(const SimpleOp& op) const {
    (void)op;
    return false;
  }
};

/// A graph instantiated by a backend (sluice/graph.hpp's GraphExec) from the IR of
/// sluice/ext/graph_ir.hpp.
class GraphExecutable {
 public:
  virtual ~GraphExecutable() = default;
  /// Enqueues one run of the whole graph on `stream` (of the same backend and device), issued as
  /// operation `op` of a context whose failure state is `failures` (event record nodes' points
  /// carry it). `events` gives the points event wait nodes wait for and takes the points event
  /// record nodes record (both empty for a graph without event nodes). The launch keeps what it
  /// uses alive (the IR it was instantiated or updated with) until it completed, also past the
  /// executable's destruction, which never waits for launches in flight (a host node may need
  /// what the destroying thread holds).
  virtual void launch(Stream& stream, const OpInfo& op,
                      const std::shared_ptr<FailureState>& failures, ir::LaunchEvents& events) = 0;
  /// Takes every parameter of `graph`, whose topology the core checked to be the same. Returns
  /// an empty string, or why the backend could not update in place (the core re-instantiates).
  /// Launches already issued keep the parameters they were issued with.
  [[nodiscard]] virtual std::string update(const std::shared_ptr<const ir::Graph>& graph) = 0;
  /// As update(graph), where only the nodes at `changed` (ascending, no repeats) differ from the
  /// graph of the last instantiation or update: a backend may look at those alone (a rebinding
  /// then costs in proportion to what changed, not to the graph's size).
  [[nodiscard]] virtual std::string update_changed(const std::shared_ptr<const ir::Graph>& graph,
                                                   std::span<const std::uint32_t> changed) {
    (void)changed;
    return update(graph);
  }
  /// Nodes of the launched graph that the backend runs merged into batched nodes (such as one
  /// kernel performing many small memsets, sluice/ext/graph_batches.hpp), and how many batched
  /// nodes it made of them; for graph::stats().
  struct Batching {
    std::size_t merged = 0;
    std::size_t batches = 0;
  };
  [[nodiscard]] virtual Batching batching() const noexcept { return {}; }
};

/// Parameters for a new stream.
struct StreamConfig {
  int device = 0;
  int priority = 0;  ///< sluice scale, already clamped by the core
  std::shared_ptr<FailureState> failures;
};

/// A backend plugin: a family of devices and how to drive them.
class Backend {
 public:
  virtual ~Backend() = default;
  [[nodiscard]] virtual std::string_view name() const noexcept = 0;
  [[nodiscard]] virtual std::vector<DeviceInfo> devices() = 0;
  /// Why `devices()` is empty (e.g. "no CUDA driver"); empty if devices exist.
  [[nodiscard]] virtual std::string unavailable_reason() { return {}; }

  virtual std::unique_ptr<Stream> create_stream(const StreamConfig& config) = 0;
  /// Wraps a native stream without owning it; the default says the backend cannot.
  virtual std::unique_ptr<Stream> wrap_stream(const StreamConfig& config, void* native);

  /// Pinned (page-locked) host memory; throws OutOfMemory.
  virtual void* allocate_pinned(std::size_t bytes) = 0;
  virtual void deallocate_pinned(void* ptr) noexcept = 0;

  /// Bytes the device's stream-ordered pool keeps cached after a synchronize.
  virtual void set_pool_release_threshold(int device, std::size_t bytes) = 0;
  /// Releases cached pool memory down to `keep_bytes`.
  virtual void trim_pool(int device, std::size_t keep_bytes) = 0;
  /// Bytes the pool holds (in use and cached).
  [[nodiscard]] virtual std::size_t pool_reserved(int device) = 0;

  /// Instantiates a graph for `device` (sluice/graph.hpp). Throws Error naming the first node
  /// that cannot run here. The default says the backend has no graphs.
  [[nodiscard]] virtual std::unique_ptr<GraphExecutable> instantiate_graph(
      const std::shared_ptr<const ir::Graph>& graph, int device);
};

/// Adds a backend under its name; later lookups of that name find it. Throws if the name is taken.
void register_backend(std::shared_ptr<Backend> backend);

/// The backend registered under `name`; throws Error(no_device) naming the known backends.
[[nodiscard]] std::shared_ptr<Backend> find_backend(std::string_view name);

}  // namespace sluice
