#pragma once
// The host backend's data-parallel loops: a shared pool of worker threads that splits one
// kernel's chunks among itself and the calling context worker.
//
// Plain std::thread, mutex, condition variable and atomics rather than OpenMP or TBB: the
// sanitizers understand them (OpenMP's runtime gives ThreadSanitizer false positives), nothing
// is added to what a user must install, and the semantics the la layer needs are few: a
// fork-join over chunks in which the caller always takes part, so that a kernel progresses even
// when every pool thread is busy with other contexts' kernels (no deadlock, no oversubscription
// beyond one thread per context).

#include <cstddef>

namespace sluice::detail::host {

/// Runs `fn(state, c)` for every chunk c in [0, chunks), spread over the pool and the calling
/// thread; returns when all chunks ran. Chunks must not depend on each other. Thread-safe: any
/// number of threads may call it at once.
void parallel_chunks(std::size_t chunks, void (*fn)(void* state, std::size_t chunk), void* state);

/// Typed form: `f(c)` for every chunk c.
template <class F>
void parallel_chunks(std::size_t chunks, F& f) {
  if (chunks == 0) return;
  if (chunks == 1) {
    f(std::size_t{0});
    return;
  }
  parallel_chunks(
      chunks, [](void* s, std::size_t c) { (*static_cast<F*>(s))(c); }, static_cast<void*>(&f));
}

/// Threads of the pool (not counting callers); 0 on a machine with one hardware thread.
[[nodiscard]] std::size_t parallel_threads();

}  // namespace sluice::detail::host
