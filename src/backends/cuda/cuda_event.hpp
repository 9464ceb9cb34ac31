#pragma once
// Pooled CUDA events. Creating a cudaEvent_t costs far more than recording one, and sluice records
// an event for every cross-context dependency, so events are reused: an EventImpl hands its
// cudaEvent_t back to its device's pool when the last reference to it goes away. Reuse is safe
// because CUDA binds a cudaStreamWaitEvent to the record that preceded it, not to later ones.

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <vector>

#include "sluice/backend.hpp"

namespace sluice::detail::cuda {

/// Free events of one device, with and without timing (timing costs on every record).
class EventPool {
 public:
  explicit EventPool(int device) : device_(device) {}
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  /// A free event of this device; creates one if none is free. Throws on CUDA failure.
  cudaEvent_t acquire(bool timing);
  /// Takes an event back. Makes no CUDA call, so it is safe inside host functions.
  void release(cudaEvent_t event, bool timing) noexcept;

 private:
  int device_;
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_[2];  // [timing]
};

/// The pool of `device`; lives as long as the process (events die with the CUDA context).
[[nodiscard]] EventPool& event_pool(int device);

/// A recorded point on a CUDA stream.
class CudaEvent final : public EventImpl {
 public:
  CudaEvent(int device, bool timing);
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  bool query() override;
  void synchronize() override;
  double elapsed_ms_since(const EventImpl& start) override;

  [[nodiscard]] cudaEvent_t handle() const noexcept { return event_; }
  [[nodiscard]] int cuda_device() const noexcept { return device_; }
  [[nodiscard]] bool timing() const noexcept { return timing_; }

 private:
  int device_;
  bool timing_;
  cudaEvent_t event_;
};

}  // namespace sluice::detail::cuda
