// The cuda implementation of the dataflow layer's DeviceOps extension: the host-accessor gate
// kernel and managed memory.

#include <cuda_runtime.h>

#include <string>

#include "backends/cuda/cuda_release.hpp"
#include "backends/cuda/kernel_preload.hpp"
#include "dataflow/device_ops.hpp"
#include "sluice/error.hpp"

namespace sluice::dataflow::detail {
namespace {

// Holds its stream until the host sets *flag (mapped pinned memory).
__global__ void gate_kernel(const volatile int* flag) {
  while (*flag == 0) __nanosleep(2000);
}

class CudaDeviceOps final : public DeviceOps {
 public:
  void launch_gate(Stream& stream, const volatile int* flag) override {
    gate_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream.native_handle())>>>(flag);
    if (auto err = cudaGetLastError(); err != cudaSuccess) {
      throw Error(Errc::backend_failure,
                  std::string("host accessor gate: launch failed with ") + cudaGetErrorName(err));
    }
  }

  void* allocate_shared(int device, std::size_t bytes, std::string& why) override {
    int previous = 0;
    if (cudaGetDevice(&previous) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) {
      why = "cannot select the device";
      (void)cudaGetLastError();
      return nullptr;
    }
    std::size_t free_bytes = 0, total = 0;
    void* p = nullptr;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
      why = "cudaMemGetInfo failed";
    } else if (bytes > free_bytes) {
      // Managed memory could oversubscribe; the dataflow layer never asks for more than is free.
      why = "the device has " + std::to_string(free_bytes) + " bytes free; ask for less";
    } else if (cudaMallocManaged(&p, bytes) != cudaSuccess) {
      why = "cudaMallocManaged failed";
      p = nullptr;
    }
    (void)cudaGetLastError();
    (void)cudaSetDevice(previous);
    return p;
  }

  void free_shared(void* ptr) noexcept override {
    // The tracked work is known complete, but cudaFree waits for the whole device, where a
    // HostAccessor's gate may hold other work back.
    sluice::detail::cuda::release_device_wide([ptr] {
      if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
    });
  }
};

// Every kernel of this file, loaded ahead where one process drives several GPUs
// (backends/cuda/kernel_preload.hpp).
SLUICE_CUDA_KERNEL_FILE(gate_kernel);

}  // namespace

DeviceOps& cuda_device_ops() {
  static CudaDeviceOps ops;
  return ops;
}

}  // namespace sluice::dataflow::detail
