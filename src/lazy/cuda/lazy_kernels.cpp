// The cuda backend's lazy kernels: a program instance's generated CUDA C++ is one NVRTC module,
// compiled through the kernel cache (kernel_cache::compile: memory and disk), loaded with the
// runtime's library API, and each kernel becomes a graph kernel node whose argument struct is
// passed by value (so rebinding a buffer is a parameter update of the node).
//
// Matrix products are generated kernels here: a cuBLAS call cannot be a kernel node whose
// addresses change in place (it would have to be captured again for every new binding).

#include "lazy/cuda/lazy_kernels.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <unordered_map>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_release.hpp"
#include "sluice/error.hpp"
#include "sluice/kernel.hpp"

namespace sluice::detail::cuda {
namespace {

class CudaModule final : public LazyModule {
 public:
  CudaModule(int device, cudaLibrary_t library, std::vector<cudaKernel_t> kernels, int sms)
      : device_(device), library_(library), kernels_(std::move(kernels)), sms_(sms) {}
  // Launches already queued may still run its code: wait for the device before unloading (a
  // module is dropped with its program, rarely on a hot path).
  ~CudaModule() override {
    release_device_wide([device = device_, library = library_] {
      DeviceGuard guard(device, std::nothrow);
      (void)cudaDeviceSynchronize();
      (void)cudaLibraryUnload(library);
      clear_error();
    });
  }
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;
  [[nodiscard]] const void* function(std::size_t i) const {
    return reinterpret_cast<const void*>(kernels_.at(i));
  }
  [[nodiscard]] int sms() const noexcept { return sms_; }

 private:
  int device_;
  cudaLibrary_t library_;
  std::vector<cudaKernel_t> kernels_;
  int sms_;
};

class CudaLazyKernels final : public LazyKernels {
 public:
  [[nodiscard]] LazyDialect dialect() const noexcept override { return LazyDialect::cuda; }

  std::shared_ptr<const LazyModule> build(const Device& device, const std::string& source,
                                          std::span<const std::string> names, LazyBuildInfo& info,
                                          std::source_location loc) override {
    const auto start = std::chrono::steady_clock::now();
    const int ordinal = device.index;
    int major = 0, minor = 0, sms = 0;
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal),
          "cudaDeviceGetAttribute", loc);
    check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ordinal),
          "cudaDeviceGetAttribute", loc);
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal),
          "cudaDeviceGetAttribute", loc);
    const std::string key = std::to_string(ordinal) + ":" + source;
    std::lock_guard lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end()) {
      if (auto m = it->second.lock()) {
        info.origin = "memory";
        info.ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        return m;
      }
    }
    const std::vector<std::string> options{"-std=c++17"};
    const auto compiled =
        kernel_cache::compile(source, names.front(), options, major * 10 + minor, loc);
    info.origin = compiled.origin == kernel_cache::Origin::compiled ? "compiled"
                  : compiled.origin == kernel_cache::Origin::disk   ? "disk"
                                                                    : "memory";
    DeviceGuard guard(ordinal, loc);
    cudaLibrary_t library = nullptr;
    check(cudaLibraryLoadData(&library, compiled.image.data(), nullptr, nullptr, 0, nullptr,
                              nullptr, 0),
          "cudaLibraryLoadData (generated lazy kernels)", loc);
    std::vector<cudaKernel_t> kernels;
    for (const auto& n : names) {
      cudaKernel_t k = nullptr;
      const auto err = cudaLibraryGetKernel(&k, library, n.c_str());
      if (err != cudaSuccess) {
        clear_error();
        (void)cudaLibraryUnload(library);
        throw Error(
            Errc::backend_failure,
            "sluice::lazy: the generated module has no kernel " + n + " (" + describe(err) + ")",
            loc);
      }
      kernels.push_back(k);
    }
    auto m = std::make_shared<const CudaModule>(ordinal, library, std::move(kernels), sms);
    memory_[key] = m;
    info.ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return m;
  }

  KernelWork work(const std::shared_ptr<const LazyModule>& module, std::size_t index,
                  std::int64_t elements, double weight, std::span<const std::byte> args) override {
    (void)weight;
    const auto& m = static_cast<const CudaModule&>(*module);
    constexpr std::int64_t block = 256;
    // A grid-stride loop: enough blocks to fill the device several times over, no more.
    const std::int64_t blocks =
        std::clamp<std::int64_t>((elements + block - 1) / block, 1, std::int64_t{m.sms()} * 16);
    DeviceKernel dk;
    dk.function = m.function(index);
    dk.grid[0] = static_cast<unsigned>(blocks);
    dk.block[0] = static_cast<unsigned>(block);
    dk.args.emplace_back(args.begin(), args.end());
    KernelWork k;
    k.range = static_cast<std::size_t>(elements);
    k.device = std::move(dk);
    return k;
  }

 private:
  void forget_memory() override {
    std::lock_guard lock(mutex_);
    memory_.clear();
  }

  std::mutex mutex_;
  std::unordered_map<std::string, std::weak_ptr<const LazyModule>> memory_;
};

}  // namespace

LazyKernels& lazy_kernels() {
  static CudaLazyKernels k;
  return k;
}

}  // namespace sluice::detail::cuda
