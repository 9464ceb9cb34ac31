#include "backends/cuda/cuda_event.hpp"

#include <mutex>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_host_callback.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::cuda {
namespace {

[[noreturn]] void event_fault(cudaError_t err, const char* during, int device) {
  clear_error();
  std::string message = "cuda:" + std::to_string(device) + ": " + during + " reported " +
                        describe(err) + " for work before the event";
  if (const char* a = advice(err); *a != '\0') message.append("; ").append(a);
  throw Error(Errc::backend_failure, message);
}

}  // namespace

cudaEvent_t EventPool::acquire(bool timing) {
  {
    std::lock_guard lock(mutex_);
    auto& list = free_[timing ? 1 : 0];
    if (!list.empty()) {
      cudaEvent_t e = list.back();
      list.pop_back();
      return e;
    }
  }
  DeviceGuard guard(device_);  // events belong to the device current at creation
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming),
        "cudaEventCreateWithFlags");
  return e;
}

void EventPool::release(cudaEvent_t event, bool timing) noexcept {
  try {
    std::lock_guard lock(mutex_);
    free_[timing ? 1 : 0].push_back(event);
  } catch (...) {
    // Out of memory growing the free list: the event leaks, which is harmless.
  }
}

EventPool& event_pool(int device) {
  // One pool per device, made once; never destroyed, because events may come back from host
  // functions while the process exits, and destroying events after the runtime shut down fails.
  static std::vector<EventPool*>* pools = [] {
    auto* v = new std::vector<EventPool*>();
    for (int i = 0; i < device_count(); ++i) v->push_back(new EventPool(i));
    return v;
  }();
  return *(*pools)[static_cast<std::size_t>(device)];
}

CudaEvent::CudaEvent(int device, bool timing)
    : device_(device), timing_(timing), event_(event_pool(device).acquire(timing)) {}

CudaEvent::~CudaEvent() {
  event_pool(device_).release(event_, timing_);
}

bool CudaEvent::query() {
  refuse_in_host_callback();
  auto err = cudaEventQuery(event_);
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) return false;
  event_fault(err, "cudaEventQuery", device_);
}

void CudaEvent::synchronize() {
  DeviceGuard guard(device_);  // refuses inside host functions, where CUDA would deadlock
  if (auto err = cudaEventSynchronize(event_); err != cudaSuccess) {
    event_fault(err, "cudaEventSynchronize", device_);
  }
}

double CudaEvent::elapsed_ms_since(const EventImpl& start) {
  const auto* s = dynamic_cast<const CudaEvent*>(&start);
  if (s == nullptr || !s->timing_ || !timing_) {
    throw Error(Errc::invalid_argument,
                "elapsed time needs two timing events (Event::Options{.timing = true}) of the "
                "cuda backend");
  }
  float ms = 0;
  check(cudaEventElapsedTime(&ms, s->event_, event_), "cudaEventElapsedTime");
  return ms;
}

}  // namespace sluice::detail::cuda
