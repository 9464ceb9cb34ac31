#include "backends/cuda/cuda_fences.hpp"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"

namespace sluice::detail::cuda {
namespace {

struct Entry {
  int device = 0;
  bool capturing = false;
  int users = 0;  // CudaStreams of this handle (a native stream may be wrapped twice)
};

struct Registry {
  std::mutex mutex;
  std::unordered_map<cudaStream_t, Entry> live;
  std::vector<std::pair<int, Fence>> gone;  // last fences of destroyed streams, by device
};

Registry& registry() {
  static auto* r = new Registry;  // never destroyed: streams may outlive static destruction
  return *r;
}

/// A fence recorded on `stream` now (null if none could be made).
Fence record_on(cudaStream_t stream, int device) noexcept {
  DeviceGuard guard(device, std::nothrow);
  cudaEvent_t e = nullptr;
  if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming | cudaEventBlockingSync) != cudaSuccess) {
    clear_error();
    return nullptr;
  }
  if (cudaEventRecord(e, stream) != cudaSuccess) {
    clear_error();
    (void)cudaEventDestroy(e);
    return nullptr;
  }
  try {
    return Fence(e, [](cudaEvent_t x) { (void)cudaEventDestroy(x); });
  } catch (...) {
    (void)cudaEventDestroy(e);
    return nullptr;
  }
}

}  // namespace

void register_stream(cudaStream_t stream, int device) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  auto& e = r.live[stream];
  e.device = device;
  ++e.users;
}

void unregister_stream(cudaStream_t stream) noexcept {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.live.find(stream);
  if (it == r.live.end()) return;
  const int device = it->second.device;
  if (--it->second.users == 0) r.live.erase(it);
  // Completed last fences go; this stream's joins them.
  std::erase_if(r.gone, [](const auto& g) {
    const auto err = cudaEventQuery(g.second.get());
    if (err == cudaErrorNotReady) return false;
    clear_error();
    return true;
  });
  if (auto f = record_on(stream, device)) {
    try {
      r.gone.emplace_back(device, std::move(f));
    } catch (...) {
      // Out of memory: a release may then not wait for this stream's last work.
    }
  }
}

void set_capturing(cudaStream_t stream, bool capturing) noexcept {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.live.find(stream);
  if (it != r.live.end()) it->second.capturing = capturing;
}

std::optional<std::vector<Fence>> fence_device(int device) noexcept {
  auto& r = registry();
  // Under capture by sluice (marked) or by the stream's owner (a wrapped stream): a fence there
  // would join the capture.
  auto captured = [&](cudaStream_t s, const Entry& e) {
    if (e.capturing) return true;
    DeviceGuard guard(device, std::nothrow);
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &status) != cudaSuccess) clear_error();
    return status != cudaStreamCaptureStatusNone;
  };
  try {
    std::vector<Fence> fences;
    std::vector<cudaStream_t> later;
    auto fence = [&](cudaStream_t s) {
      auto f = record_on(s, device);
      if (f) fences.push_back(std::move(f));
      return f != nullptr;
    };
    {
      std::lock_guard lock(r.mutex);
      for (const auto& [stream, e] : r.live) {
        if (e.device != device) continue;
        if (captured(stream, e)) {
          later.push_back(stream);
        } else if (!fence(stream)) {
          return std::nullopt;
        }
      }
    }
    while (!later.empty()) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      std::lock_guard lock(r.mutex);
      for (auto it = later.begin(); it != later.end();) {
        auto e = r.live.find(*it);
        if (e == r.live.end()) {
          it = later.erase(it);  // destroyed: its last fence is among `gone` below
        } else if (captured(*it, e->second)) {
          ++it;
        } else if (fence(*it)) {
          it = later.erase(it);
        } else {
          return std::nullopt;
        }
      }
    }
    std::lock_guard lock(r.mutex);
    for (const auto& [d, f] : r.gone) {
      if (d == device) fences.push_back(f);
    }
    return fences;
  } catch (...) {
    return std::nullopt;
  }
}

bool wait_for_streams(int device) noexcept {
  const auto fences = fence_device(device);
  if (!fences) return false;
  bool ok = true;
  for (const auto& f : *fences) {
    if (cudaEventSynchronize(f.get()) != cudaSuccess) {
      clear_error();
      ok = false;
    }
  }
  return ok;
}

}  // namespace sluice::detail::cuda
