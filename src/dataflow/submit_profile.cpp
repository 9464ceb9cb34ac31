#include "dataflow/submit_profile.hpp"

namespace sluice::dataflow::detail {

std::atomic<bool> g_submit_profiling{false};

namespace {
constexpr int kPhases = static_cast<int>(SubmitPhase::count);
std::atomic<std::uint64_t> g_ns[kPhases];
std::atomic<std::uint64_t> g_submits{0};
}  // namespace

void set_submit_profiling(bool on) noexcept {
  if (on) {
    for (auto& n : g_ns) n.store(0, std::memory_order_relaxed);
    g_submits.store(0, std::memory_order_relaxed);
  }
  g_submit_profiling.store(on, std::memory_order_relaxed);
}

SubmitProfile submit_profile() noexcept {
  SubmitProfile p;
  p.submits = g_submits.load(std::memory_order_relaxed);
  for (int i = 0; i < kPhases; ++i) p.ns[i] = g_ns[i].load(std::memory_order_relaxed);
  return p;
}

void PhaseClock::mark(SubmitPhase phase) noexcept {
  if (!on_) return;
  const auto now = std::chrono::steady_clock::now();
  g_ns[static_cast<int>(phase)].fetch_add(
      static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count()),
      std::memory_order_relaxed);
  last_ = now;
}

void count_submit() noexcept {
  if (g_submit_profiling.load(std::memory_order_relaxed)) {
    g_submits.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace sluice::dataflow::detail
