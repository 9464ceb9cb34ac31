// The cuda part of interop.hpp: one numbered operation of a context that links its stream with
// another library's stream through an event (record on one, wait on the other).

#include <cuda_runtime_api.h>

#include <mutex>
#include <string>
#include <unordered_map>

#include "interop.hpp"
#include "sluice/cuda.hpp"

namespace sluice::python::interop::cuda {
namespace {

// One event per device, reused: a wait takes the event's state when it is enqueued, so the
// event may be recorded again at once. Calls come from inside `enqueue`, which holds the
// context's lock; the mutex guards the table and the event across contexts of one device.
struct Events {
  std::mutex mutex;
  std::unordered_map<int, cudaEvent_t> by_device;
};
Events& events() {
  static auto* e = new Events;  // never destroyed: events live as long as the process
  return *e;
}

void check(cudaError_t err, std::string_view what, std::source_location loc) {
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();
  throw Error(Errc::backend_failure,
              std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                  "); a stream handle passed by another library may be invalid or of another "
                  "device",
              loc);
}

}  // namespace

bool available() noexcept { return true; }

void link(const Context& ctx, std::string_view what, std::optional<std::uintptr_t> waiter,
          std::optional<std::uintptr_t> producer, std::source_location loc) {
  const int device = ctx.device().index;
  sluice::cuda::enqueue(
      ctx, what,
      [&](CUstream_st* stream) {
        if (!waiter && !producer) return;
        auto& e = events();
        std::lock_guard lock(e.mutex);
        cudaEvent_t& ev = e.by_device[device];
        if (ev == nullptr) check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), what, loc);
        if (producer) {
          check(cudaEventRecord(ev, reinterpret_cast<cudaStream_t>(*producer)), what, loc);
          check(cudaStreamWaitEvent(stream, ev, 0), what, loc);
        }
        if (waiter) {
          check(cudaEventRecord(ev, stream), what, loc);
          check(cudaStreamWaitEvent(reinterpret_cast<cudaStream_t>(*waiter), ev, 0), what, loc);
        }
      },
      loc);
}

}  // namespace sluice::python::interop::cuda
