#include "backends/cuda/cuda_backend.hpp"

#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_graph.hpp"
#include "backends/cuda/cuda_memory.hpp"
#include "backends/cuda/cuda_stream.hpp"
#include "backends/cuda/kernel_preload.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::cuda {
namespace {

// Stateless apart from process-wide tables (devices, pools, events) that CUDA itself keeps per
// process; constructing it makes no CUDA call, so a host-only run never starts the runtime
// until devices are listed.
class CudaBackend final : public Backend {
 public:
  std::string_view name() const noexcept override { return "cuda"; }

  std::vector<DeviceInfo> devices() override { return device_table().devices; }

  std::string unavailable_reason() override {
    const auto& t = device_table();
    return t.devices.empty() ? t.unavailable_reason : std::string();
  }

  // A device's first stream loads sluice's kernels on it (kernel_preload.hpp: a lazy load may
  // wait for the work running on the device).
  std::unique_ptr<Stream> create_stream(const StreamConfig& config) override {
    auto s = std::make_unique<CudaStream>(config);
    load_kernels_once(config.device);
    return s;
  }

  std::unique_ptr<Stream> wrap_stream(const StreamConfig& config, void* native) override {
    auto s = std::make_unique<CudaStream>(config, static_cast<cudaStream_t>(native));
    load_kernels_once(config.device);
    return s;
  }

  void* allocate_pinned(std::size_t bytes) override { return cuda::allocate_pinned(bytes); }
  void deallocate_pinned(void* ptr) noexcept override { free_pinned(ptr); }

  void set_pool_release_threshold(int device, std::size_t bytes) override {
    require_device(device);
    set_release_threshold(device, bytes);
  }
  void trim_pool(int device, std::size_t keep_bytes) override {
    require_device(device);
    cuda::trim_pool(device, keep_bytes);
  }
  std::size_t pool_reserved(int device) override {
    require_device(device);
    return cuda::pool_reserved(device);
  }

  std::unique_ptr<GraphExecutable> instantiate_graph(const std::shared_ptr<const ir::Graph>& graph,
                                                     int device) override {
    return instantiate_cuda_graph(graph, device);
  }
};

}  // namespace

std::shared_ptr<Backend> make_backend() {
  return std::make_shared<CudaBackend>();
}

}  // namespace sluice::detail::cuda
