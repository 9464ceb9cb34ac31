// Host backend execution of dataflow kernels: a thin adapter over the host backend's CPU pool
// (src/backends/host/host_parallel.hpp; only this file names it) and work-groups as fibers.

#include <algorithm>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <new>

#include "backends/host/host_parallel.hpp"
#include "dataflow/host/host_fibers.hpp"
#include "sluice/dataflow/handler.hpp"

namespace sluice::dataflow::detail {

void host_parallel(std::size_t chunks, void (*fn)(void*, std::size_t), void* state) {
  // The pool's threads must not see exceptions: the first one a kernel throws is kept and
  // rethrown here, after every chunk finished (later chunks still run).
  struct Guarded {
    void (*fn)(void*, std::size_t);
    void* state;
    std::mutex mutex;
    std::exception_ptr error;
  } g{fn, state, {}, {}};
  sluice::detail::host::parallel_chunks(
      chunks,
      [](void* p, std::size_t c) {
        auto& gd = *static_cast<Guarded*>(p);
        try {
          gd.fn(gd.state, c);
        } catch (...) {
          std::lock_guard lock(gd.mutex);
          if (!gd.error) gd.error = std::current_exception();
        }
      },
      &g);
  if (g.error) std::rethrow_exception(g.error);
}

std::size_t host_chunks(std::size_t items) noexcept {
  // A few chunks per thread balance uneven work-items without paying much per chunk.
  const std::size_t workers = sluice::detail::host::parallel_threads() + 1;
  return std::max<std::size_t>(1, std::min(items, workers * 4));
}

void host_groups(std::size_t groups, std::size_t group_items, std::size_t local_bytes,
                 void (*item)(void*, std::size_t, std::size_t), void* state) {
  const std::size_t chunks = host_chunks(groups);
  auto body = [&](std::size_t c) {
    // Local memory of the groups this thread runs, one after another; 16-byte aligned as on
    // the device.
    std::unique_ptr<std::byte[], void (*)(std::byte*)> local(
        local_bytes == 0
            ? nullptr
            : static_cast<std::byte*>(::operator new[](local_bytes, std::align_val_t{16})),
        [](std::byte* p) { ::operator delete[](p, std::align_val_t{16}); });
    const std::size_t lo = groups * c / chunks, hi = groups * (c + 1) / chunks;
    for (std::size_t g = lo; g < hi; ++g) {
      run_group_fibers(g, group_items, local.get(), item, state);
    }
  };
  host_parallel_for(chunks, body);
}

}  // namespace sluice::dataflow::detail
