#pragma once
// Waiting in two phases: spin for a short while, then sleep. A hand-off between two running
// threads through an atomic takes well under a microsecond; one through a condition variable's
// sleep and wake-up takes several (tens on a virtual machine, whose idle vCPU must be woken by
// the hypervisor). The la layer hands every kernel to a context's worker and from there to the
// pool, and sync solves wait for each reduction, so these hand-offs set the speed of small
// solves (docs/bench/la.md, "host"). The spin is bounded so that a waiter whose work is long gives
// its core back to the threads doing that work.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace sluice::detail::host {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

/// How long a waiter spins before it sleeps: SLUICE_HOST_SPIN_US microseconds (default 50;
/// 0 sleeps at once, which is how the bench measures what the spin buys).
[[nodiscard]] inline std::chrono::nanoseconds spin_budget() {
  static const std::chrono::nanoseconds budget = [] {
    long us = 50;
    if (const char* env = std::getenv("SLUICE_HOST_SPIN_US"); env != nullptr && *env != '\0') {
      us = std::max(0L, std::strtol(env, nullptr, 10));
    }
    return std::chrono::nanoseconds(std::chrono::microseconds(us));
  }();
  return budget;
}

/// Spins until `ready()` holds or spin_budget() has passed; returns ready(). After the first
/// microseconds it yields between checks: where more threads are runnable than there are cores
/// (a busy machine, or more contexts than cores), the thread it waits for may need this core.
template <class Ready>
bool spin_until(Ready&& ready) {
  if (ready()) return true;
  const auto budget = spin_budget();
  if (budget.count() == 0) return false;
  for (int i = 0; i < 256; ++i) {
    cpu_relax();
    if (ready()) return true;
  }
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    std::this_thread::yield();
    for (int i = 0; i < 16; ++i) {
      cpu_relax();
      if (ready()) return true;
    }
    if (std::chrono::steady_clock::now() - start > budget) return ready();
  }
}

}  // namespace sluice::detail::host
