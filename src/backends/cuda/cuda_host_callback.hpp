#pragma once
// Host functions enqueued with cudaLaunchHostFunc run on a thread of the CUDA runtime where any
// CUDA call is forbidden (it fails or deadlocks). Yet sluice objects can die there: a host task's
// captures may hold the last handle of a context or buffer. This file marks those threads and
// lets the backend defer the CUDA calls of such destructors to the next ordinary backend call.

#include <functional>
#include <source_location>

namespace sluice::detail::cuda {

/// True on a thread that is running one of sluice's host functions.
[[nodiscard]] bool in_host_callback() noexcept;

/// Throws Error(invalid_state) on such a thread: CUDA calls there fail or deadlock.
void refuse_in_host_callback(std::source_location where = std::source_location::current());

/// Marks the current thread as inside a host function for its lifetime.
class HostCallbackScope {
 public:
  HostCallbackScope() noexcept;
  ~HostCallbackScope();
  HostCallbackScope(const HostCallbackScope&) = delete;
  HostCallbackScope& operator=(const HostCallbackScope&) = delete;

 private:
  bool outer_;
};

/// Queues `fn` (CUDA calls that could not be made inside a host function) to run, in queue order,
/// at the next backend call made outside host functions. Never throws: if even queueing fails,
/// the resource leaks rather than the process crashing.
void defer(std::function<void()> fn) noexcept;

/// True if deferred work is waiting (cheap: one relaxed atomic load).
[[nodiscard]] bool has_deferred() noexcept;

/// Runs the deferred work. Call only outside host functions. Never throws.
void run_deferred() noexcept;

}  // namespace sluice::detail::cuda
