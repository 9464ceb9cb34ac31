#pragma once
// The state behind a Context handle. Other sluice layers issue work through `issue`, which
// numbers each operation, applies the blocking-kind rules and keeps issue order.

#include <memory>
#include <mutex>
#include <string>

#include "sluice/backend.hpp"
#include "sluice/context.hpp"
#include "sluice/error.hpp"

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
    if (kind_ == StreamKind::blocking) {
      auto prior = record_device_work(loc);
      {
        std::lock_guard lock(mutex_);
        for (auto& e : prior) stream_->wait(e, next_op("wait (blocking)", loc));
        f(*stream_, next_op(what, loc));
      }
      stream_->synchronize();
      throw_failure();
      return;
    }
    std::lock_guard lock(mutex_);
    f(*stream_, next_op(what, loc));
  }

  /// Records the current end of this context's work.
  std::shared_ptr<EventImpl> record(bool timing, std::source_location loc);
  /// Makes later work here wait for `event`.
  void wait(const std::shared_ptr<EventImpl>& event, std::source_location loc);
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

 private:
  OpInfo next_op(std::string_view what, std::source_location loc) { return {++seq_, what, loc}; }
  /// Events marking the end of every other context's work on this device (blocking kind).
  std::vector<std::shared_ptr<EventImpl>> record_device_work(std::source_location loc);

  std::shared_ptr<Backend> backend_;
  Device device_;
  StreamKind kind_;
  std::string name_;
  std::shared_ptr<FailureState> failures_;
  std::unique_ptr<Stream> stream_;
  std::mutex mutex_;  // issue order: op numbering and enqueue happen together
  std::uint64_t seq_ = 0;
};

}  // namespace sluice::detail
