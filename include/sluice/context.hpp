#pragma once
/// @file
/// `Context`: a device plus one ordered stream of work.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/platform.hpp"

struct CUstream_st;

namespace sluice {

class Event;
class Stream;
class Fluent;
struct Grid;
struct Block;
namespace detail {
class ContextImpl;
}

/// How a context's work relates to the host and to other contexts (reference 000, §3.1).
enum class StreamKind : std::uint8_t {
  /// Asynchronous to the host and to every other context (a non-blocking stream).
  async,
  /// Each operation first waits for all work issued before it on every context of the device,
  /// and is complete when the issuing call returns (the "globally blocking" stream).
  blocking,
};

/// How to build a context.
struct ContextOptions {
  std::optional<Device> device;  ///< default: sluice::default_device()
  StreamKind kind = StreamKind::async;
  /// Lower is more urgent (CUDA's and Warp's convention); 0 is the default. Clamped to the
  /// device's range [priority_highest, priority_lowest] (DeviceInfo): cuda e.g. -5..0; host
  /// -10..10 where the process may raise a thread's scheduling priority, else 0..10.
  int priority = 0;
  std::string name;  ///< shows up in error messages; default "context#N"
};

/// A device plus one ordered stream of work.
///
/// `Context` is a shared handle: copies refer to the same stream. When the last handle goes
/// away, the destructor waits for all pending work to finish (failures not yet reported are
/// then written to the unreported-failure handler, see `set_unreported_failure_handler`).
///
/// Work issued on one context runs in issue order. Work on different contexts is unordered unless
/// ordered by `wait_for`, `wait(Event)`, or by the dependency tracker from what it reads and
/// writes (sluice/deps.hpp).
///
/// Thread safety: any number of host threads may issue to the same or different contexts.
///
/// @code
/// sluice::Context a, b;
/// sluice::DeviceBuffer<float> x(a, 1024);
/// sluice::memset(a, x, 0);
/// b.wait_for(a);           // b's later work sees x zeroed
/// std::vector<float> h(1024);
/// sluice::copy(b, std::span(h), x);
/// b.synchronize();         // h is ready; a failure of any of the above is thrown here
/// @endcode
class Context {
 public:
  /// A context on the default device.
  Context();
  explicit Context(const ContextOptions& options);
  /// A context on `device` with default options.
  explicit Context(const Device& device);

  /// Wraps a native stream (a `cudaStream_t` on the cuda backend) without owning it.
  /// The caller keeps the stream alive for as long as the context and anything issued on it
  /// lives, and must not destroy or capture it behind sluice's back. Not on the host backend,
  /// which has no native queue that other code hands out (its queues are sluice's own worker
  /// threads): interoperate there through host memory, `host_task` and events; wrapping a host
  /// device is an Error(unsupported) saying so.
  [[nodiscard]] static Context wrap(const Device& device, void* native_stream,
                                    std::string name = {});

  [[nodiscard]] const Device& device() const noexcept;
  [[nodiscard]] StreamKind kind() const noexcept;
  /// The effective priority after clamping to the device's range.
  [[nodiscard]] int priority() const noexcept;
  [[nodiscard]] const std::string& name() const noexcept;
  /// A number unique to this context in the process, never reused: the `timeline` observers
  /// (sluice/observe.hpp) and traces name it by.
  [[nodiscard]] std::uint64_t id() const noexcept;

  /// Makes work issued on this context from now on wait for all work issued on `other` so far.
  /// Does not block the host.
  void wait_for(const Context& other,
                std::source_location loc = std::source_location::current()) const;
  /// Makes later work here wait for the point recorded by `event`. Does not block the host.
  void wait(const Event& event, std::source_location loc = std::source_location::current()) const;

  /// True if all work issued so far has completed. Never blocks, never throws for failed work.
  [[nodiscard]] bool idle() const;
  /// Blocks until all work issued so far completed. Throws WorkFailed, once, if any of that work
  /// (or work it waited for) failed and the failure was not reported before.
  void synchronize(std::source_location loc = std::source_location::current()) const;

  /// `n` new contexts on the same device, kind and priority, each starting after all work issued
  /// here so far.
  [[nodiscard]] std::vector<Context> fork(
      std::size_t n, std::source_location loc = std::source_location::current()) const;
  /// Makes later work here wait for everything issued so far on each of `children`.
  void join(std::span<const Context> children,
            std::source_location loc = std::source_location::current()) const;

  /// Runs `fn` on a host thread after all earlier work here completed. An exception thrown by
  /// `fn` is reported by the next call that waits on this context's work, naming `what` and the
  /// line that called host_task. On cuda, `fn` must not call CUDA.
  void host_task(std::function<void()> fn, std::string_view what = "host_task",
                 std::source_location loc = std::source_location::current()) const;

  /// A fluent handle issuing on this context (`then_copy(...).then_launch(...)...`); declared
  /// here, defined by the kernel layer (sluice/kernel.hpp), which the caller includes.
  [[nodiscard]] Fluent then() const;
  /// Launches a `TypedKernel` and returns the fluent handle (sluice/kernel.hpp defines it).
  template <class Kernel, class... Args>
  Fluent then_launch(const Kernel& kernel, Grid grid, Block block, Args&&... args) const;

  /// The native stream (`cudaStream_t` on cuda, nullptr on host). Do not destroy it, do not
  /// issue to it while sluice work may be pending without ordering with `synchronize`.
  [[nodiscard]] void* native_handle() const noexcept;

  /// Internal: the implementation (for other sluice layers).
  [[nodiscard]] detail::ContextImpl& impl() const noexcept { return *impl_; }
  [[nodiscard]] const std::shared_ptr<detail::ContextImpl>& shared_impl() const noexcept {
    return impl_;
  }

  friend bool operator==(const Context& a, const Context& b) noexcept { return a.impl_ == b.impl_; }

 private:
  explicit Context(std::shared_ptr<detail::ContextImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::ContextImpl> impl_;
};

/// Blocks until all work issued so far on every context of `device` completed (a device-wide
/// synchronize, for handing the device's memory to code outside sluice). It covers every context
/// sluice made or wrapped on the device, not streams it does not know (wrap them with
/// `Context::wrap`, or use the vendor's own device synchronize for those). Throws the first
/// unreported failure among those contexts as WorkFailed, after waiting for all of them.
void synchronize(const Device& device, std::source_location loc = std::source_location::current());

/// How a `ScopedContext` orders itself with the context it replaces (Warp's `ScopedStream`).
struct ScopeOptions {
  /// On entering, the scope's context waits for the work issued so far on the device's previous
  /// current context (without blocking the host).
  bool sync_enter = true;
  /// On leaving, the previous current context waits for the work issued in the scope.
  bool sync_exit = false;
};

/// The current device of the calling thread: the innermost `ScopedDevice` or `ScopedContext`'s
/// device, else `default_device()`.
[[nodiscard]] Device current_device();
/// The current context of the calling thread: the innermost `ScopedContext` of the current
/// device, else that device's default context (one per device and process, made on first use
/// and never destroyed, like CUDA's primary context: synchronize before leaving `main`). Code
/// that takes no context argument (`sluice::copy(dst, src)`, `sluice::fill(dst, v)`, ...) issues
/// here. Explicit contexts remain the primary API; this is for code ported from Warp.
[[nodiscard]] Context current_context();

/// Makes `ctx` the current context of its device (and its device the current device) on the
/// calling thread until destroyed (Warp's `ScopedStream`). Scopes nest; destroy them in reverse
/// order of construction, on the thread that made them.
///
/// @code
/// sluice::Context side;
/// {
///   sluice::ScopedContext scope(side);   // side waits for the default context's work so far
///   sluice::fill(x, 1.0f);               // issued on side
/// }
/// @endcode
class ScopedContext {
 public:
  explicit ScopedContext(const Context& ctx, ScopeOptions options = {},
                         std::source_location loc = std::source_location::current());
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  ~ScopedContext();

 private:
  std::size_t depth_;
};

/// Makes `device` the current device on the calling thread until destroyed (Warp's
/// `ScopedDevice`): `current_context()` is then that device's current context.
class ScopedDevice {
 public:
  explicit ScopedDevice(const Device& device);
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  ~ScopedDevice();

 private:
  std::size_t depth_;
};

/// Receives failures of queued work that no call waited on before their context was destroyed
/// (destructors never throw). The default writes them to stderr. Returns the previous handler.
using UnreportedFailureHandler = std::function<void(const std::string& message)>;
UnreportedFailureHandler set_unreported_failure_handler(UnreportedFailureHandler handler);

}  // namespace sluice
