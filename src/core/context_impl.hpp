#pragma once
// The state behind a Context handle. Other sluice layers issue work through `issue`, which
// numbers each operation, applies the blocking-kind rules and keeps issue order.

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "sluice/backend.hpp"
#include "sluice/context.hpp"
#include "sluice/error.hpp"
#include "sluice/extension.hpp"

namespace sluice::detail {

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
    std::vector<std::shared_ptr<EventImpl>> prior;
    if (kind_ == StreamKind::blocking) prior = record_device_work(loc);
    std::lock_guard lock(mutex_);
    for (auto& e : prior) stream_->wait(e, next_op("wait (blocking)", loc));
    auto op = next_op(what, loc);
    f(*stream_, op);
    return op.seq;
  }

  /// Completes the work of a blocking context (and throws its failure); no-op when async.
  void finish_if_blocking() {
    if (kind_ == StreamKind::blocking) synchronize();
  }

  /// Records the current end of this context's work.
  std::shared_ptr<EventImpl> record(bool timing, std::source_location loc);
  /// Makes later work here wait for `event`. Returns false (and enqueues nothing) if this context
  /// already waits for that point or a later one of the same context (the vector clock).
  /// Like `enqueue`, it leaves completing blocking work to `finish_if_blocking`.
  bool wait(const std::shared_ptr<EventImpl>& event, std::source_location loc);
  /// True if work issued here from now on is already ordered after operation `seq` of `timeline`.
  [[nodiscard]] bool waits_for(std::uint64_t timeline, std::uint64_t seq);
  /// Blocks until all issued work completed, then throws the unreported failure if any.
  void synchronize();
  /// Releases device memory in stream order. Never throws.
  void deallocate(void* ptr, std::size_t bytes) noexcept;
  /// Throws the carried failure once (used after the context drained).
  void throw_failure();

  [[nodiscard]] Stream& stream() noexcept { return *stream_; }
  [[nodiscard]] Backend& backend() noexcept { return *backend_; }
  [[nodiscard]] const std::shared_ptr<Backend>& shared_backend() const noexcept { return backend_; }
  [[nodiscard]] const std::shared_ptr<FailureState>& failures() const noexcept { return failures_; }
  [[nodiscard]] const Device& device() const noexcept { return device_; }
  [[nodiscard]] StreamKind kind() const noexcept { return kind_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// Unique id of this context's sequence of operations (never reused).
  [[nodiscard]] std::uint64_t timeline() const noexcept { return timeline_; }
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
  // Numbers are assigned under mutex_; the atomic lets `issued()` read without it.
  OpInfo next_op(std::string_view what, std::source_location loc) {
    return {seq_.fetch_add(1, std::memory_order_acq_rel) + 1, what, loc};
  }
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
  // Vector clock: per other timeline, the highest operation this context already waits for.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> clock_;
  // Extensions of this context's backend, by slot (accessed through std::atomic_ref).
  std::array<void*, 16> extension_cache_{};
  // Extensions' per-context state, by slot; declared after stream_ so that it goes first (the
  // destructor has synchronized by then).
  std::array<std::shared_ptr<void>, 16> extension_state_{};
};

}  // namespace sluice::detail
