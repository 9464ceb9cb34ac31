#pragma once
// Where a command group's submit spends host time, phase by phase (std::chrono around each step),
// for bench/dataflow: off unless switched on, then summed over every submit of the process.
// Costs one relaxed load per phase boundary while off.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace sluice::dataflow::detail {

/// Phases of one submit, in order (see submit.cpp and queue.cpp).
enum class SubmitPhase : std::uint8_t {
  begin,    ///< begin_submit: the command group's state from the thread's pool
  cgf,      ///< the command-group function: accessors, dependencies, the kernel's description
  waits,    ///< waits for dependencies on other contexts
  enqueue,  ///< the context's issue path around the launch (lock, operation number, tracker)
  launch,   ///< the backend launch itself (cuda: the kernel's <<<>>> and cudaGetLastError)
  point,    ///< the group's deferred completion point
  after,    ///< buffers' writes, gates, the Event
  end,      ///< end_submit's release of the state
  count
};

struct SubmitProfile {
  std::uint64_t submits = 0;
  std::uint64_t ns[static_cast<int>(SubmitPhase::count)] = {};
};

/// Starts (or stops) summing; starting clears the sums.
void set_submit_profiling(bool on) noexcept;
/// The sums since profiling started.
[[nodiscard]] SubmitProfile submit_profile() noexcept;

// ---- used by the submit path ----

extern std::atomic<bool> g_submit_profiling;

/// A clock that reads only while profiling.
class PhaseClock {
 public:
  PhaseClock() noexcept : on_(g_submit_profiling.load(std::memory_order_relaxed)) {
    if (on_) last_ = std::chrono::steady_clock::now();
  }
  /// Adds the time since the previous mark to `phase`.
  void mark(SubmitPhase phase) noexcept;
  [[nodiscard]] bool on() const noexcept { return on_; }
  [[nodiscard]] std::chrono::steady_clock::time_point last() const noexcept { return last_; }
  void restart_from(std::chrono::steady_clock::time_point t) noexcept { last_ = t; }

 private:
  bool on_;
  std::chrono::steady_clock::time_point last_{};
};

/// Counts one submit (at its end).
void count_submit() noexcept;

}  // namespace sluice::dataflow::detail
