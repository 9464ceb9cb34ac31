// The cuda backend's lazy kernels: a program instance's generated CUDA C++ is compiled by NVRTC
// in chunks of its units (lazy/units.hpp) on a thread each, through the kernel cache
// (kernel_cache::compile: memory and disk), each chunk loaded with the runtime's library API,
// and each kernel becomes a graph kernel node whose argument struct is passed by value (so
// rebinding a buffer is a parameter update of the node).
//
// Matrix products from 2^20 multiply-adds with every dimension at least 48 are cuBLAS calls
// recorded as captured nodes (gemm_recording.cpp); others stay generated kernels, which fuse
// their producers and readers and cost no node of their own.

#include "lazy/cuda/lazy_kernels.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <future>
#include <mutex>
#include <unordered_map>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_reaper.hpp"
#include "lazy/units.hpp"
#include "sluice/error.hpp"
#include "sluice/kernel.hpp"

namespace sluice::detail::cuda {
namespace {

class CudaModule final : public LazyModule {
 public:
  CudaModule(int device, std::vector<cudaLibrary_t> libraries, std::vector<cudaKernel_t> kernels,
             int sms)
      : device_(device),
        libraries_(std::move(libraries)),
        kernels_(std::move(kernels)),
        sms_(sms) {}
  // Launches already queued may still run its code: unloaded after the device's earlier work,
  // on the reaper's thread (never a wait here).
  ~CudaModule() override { unload_libraries_later(device_, libraries_); }
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;
  [[nodiscard]] const void* function(std::size_t i) const {
    return reinterpret_cast<const void*>(kernels_.at(i));
  }
  [[nodiscard]] int sms() const noexcept { return sms_; }

 private:
  int device_;
  std::vector<cudaLibrary_t> libraries_;  // one per chunk
  std::vector<cudaKernel_t> kernels_;
  int sms_;
};

/// Blocks of a lazy kernel over `elements` threads: a grid-stride loop with enough blocks to fill
/// the device several times over, no more.
constexpr std::int64_t kBlock = 256;
std::int64_t blocks_for(std::int64_t elements, int sms, std::int64_t max_blocks) {
  const auto b =
      std::clamp<std::int64_t>((elements + kBlock - 1) / kBlock, 1, std::int64_t{sms} * 16);
  return max_blocks > 0 ? std::min(b, max_blocks) : b;
}

/// What timing candidates holds on the device, released however it ends (on error too). The
/// scratch memory is stream-ordered (cudaMallocAsync/cudaFreeAsync on the private stream): a
/// cudaFree would wait for the whole device, where other contexts' work may be held back.
struct TimingResources {
  int device = 0;
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> events;
  std::vector<void*> memory;
  void free_memory() noexcept {
    for (auto m : memory) (void)cudaFreeAsync(m, stream);
    memory.clear();
  }
  ~TimingResources() {
    DeviceGuard guard(device, std::nothrow);
    if (stream != nullptr) {
      free_memory();
      (void)cudaStreamSynchronize(stream);
    }
    for (auto e : events) (void)cudaEventDestroy(e);
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
    clear_error();
  }
};

/// Host contents of a scratch buffer: values of moderate size for reals (no denormals, no
/// overflow in a product of a few), each integer its own index (gathers spread over their
/// array; they are clamped into range anyway), booleans alternating.
std::vector<std::byte> scratch_contents(const LazyTimedBuffer& b) {
  std::vector<std::byte> h(b.bytes);
  auto fill = [&](auto tag, auto value) {
    using T = decltype(tag);
    const std::size_t n = b.bytes / sizeof(T);
    for (std::size_t i = 0; i < n; ++i) {
      const T v = value(i);
      std::memcpy(h.data() + i * sizeof(T), &v, sizeof(T));
    }
  };
  using F = LazyTimedBuffer::Fill;
  switch (b.fill) {
    case F::zero:
      break;
    case F::real32:
      fill(float{}, [](std::size_t i) { return 0.5f + static_cast<float>(i % 17) / 32.0f; });
      break;
    case F::real64:
      fill(double{}, [](std::size_t i) { return 0.5 + static_cast<double>(i % 17) / 32.0; });
      break;
    case F::int32:
      fill(int{}, [](std::size_t i) { return static_cast<int>(i & 0x3fffffff); });
      break;
    case F::int64:
      fill(static_cast<long long>(0), [](std::size_t i) { return static_cast<long long>(i); });
      break;
    case F::boolean:
      fill(bool{}, [](std::size_t i) { return i % 2 == 0; });
      break;
  }
  return h;
}

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
    const auto chunks =
        lazy::detail::module_chunks(source, std::vector<std::string>(names.begin(), names.end()));
    // Every chunk on a thread of its own (the first on this one); all are waited for before an
    // error is thrown, so no compile outlives the call.
    const int arch = major * 10 + minor;
    auto compile = [&](std::size_t c) {
      return kernel_cache::compile(chunks[c].source, chunks[c].names.front(), options, arch, loc);
    };
    std::vector<std::future<kernel_cache::Compiled>> rest;
    for (std::size_t c = 1; c < chunks.size(); ++c) {
      rest.push_back(std::async(std::launch::async, compile, c));
    }
    std::vector<kernel_cache::Compiled> compiled;
    std::exception_ptr failed;
    try {
      compiled.push_back(compile(0));
    } catch (...) {
      failed = std::current_exception();
    }
    for (auto& f : rest) {
      try {
        compiled.push_back(f.get());
      } catch (...) {
        if (!failed) failed = std::current_exception();
      }
    }
    if (failed) std::rethrow_exception(failed);
    auto worst = kernel_cache::Origin::memory;
    for (const auto& c : compiled) {
      if (c.origin == kernel_cache::Origin::compiled ||
          (c.origin == kernel_cache::Origin::disk && worst == kernel_cache::Origin::memory)) {
        worst = c.origin;
      }
    }
    info.origin = worst == kernel_cache::Origin::compiled ? "compiled"
                  : worst == kernel_cache::Origin::disk   ? "disk"
                                                          : "memory";
    DeviceGuard guard(ordinal, loc);
    std::vector<cudaLibrary_t> libraries;
    auto unload = [&] {
      for (auto l : libraries) (void)cudaLibraryUnload(l);
      clear_error();
    };
    std::unordered_map<std::string, std::size_t> chunk_of;
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      cudaLibrary_t library = nullptr;
      const auto err = cudaLibraryLoadData(&library, compiled[c].image.data(), nullptr, nullptr, 0,
                                           nullptr, nullptr, 0);
      if (err != cudaSuccess) {
        unload();
        check(err, "cudaLibraryLoadData (generated lazy kernels)", loc);
      }
      libraries.push_back(library);
      for (const auto& n : chunks[c].names) chunk_of.emplace(n, c);
    }
    std::vector<cudaKernel_t> kernels;
    for (const auto& n : names) {
      cudaKernel_t k = nullptr;
      const auto it = chunk_of.find(n);
      const auto err = it == chunk_of.end()
                           ? cudaErrorSymbolNotFound
                           : cudaLibraryGetKernel(&k, libraries[it->second], n.c_str());
      if (err != cudaSuccess) {
        unload();
        throw Error(
            Errc::backend_failure,
            "sluice::lazy: the generated module has no kernel " + n + " (" + describe(err) + ")",
            loc);
      }
      // Loaded into the device's context now: with CUDA's lazy loading a kernel's first use
      // (here the program's first graph instantiation) loads it, and loading may wait for the
      // kernels running on the device, so a first run would hold the host until the device's
      // queued work drained (CUDA programming guide, "Lazy Loading", concurrent execution).
      cudaFuncAttributes attr{};
      if (const auto e = cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(k));
          e != cudaSuccess) {
        unload();
        check(e, "cudaFuncGetAttributes (loading a generated lazy kernel)", loc);
      }
      kernels.push_back(k);
    }
    auto m =
        std::make_shared<const CudaModule>(ordinal, std::move(libraries), std::move(kernels), sms);
    memory_[key] = m;
    info.ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return m;
  }

  KernelWork work(const std::shared_ptr<const LazyModule>& module, std::size_t index,
                  std::int64_t elements, double weight, std::int64_t max_blocks,
                  std::span<const std::byte> args) override {
    (void)weight;
    const auto& m = static_cast<const CudaModule&>(*module);
    DeviceKernel dk;
    dk.function = m.function(index);
    dk.grid[0] = static_cast<unsigned>(blocks_for(elements, m.sms(), max_blocks));
    dk.block[0] = static_cast<unsigned>(kBlock);
    dk.args.emplace_back(args.begin(), args.end());
    KernelWork k;
    k.range = static_cast<std::size_t>(elements);
    k.device = std::move(dk);
    return k;
  }

  std::shared_ptr<void> gemm_recording(const Device& device, const BlasGemmArgs& args,
                                       std::source_location loc) override {
    return record_gemm(device, args, loc);
  }
  [[nodiscard]] bool has_gemm() const noexcept override { return true; }
  std::shared_ptr<void> gemm_table_recording(const Device& device, const BlasGemmArgs& args,
                                             const void* table, std::source_location loc) override {
    return record_gemm_table(device, args, table, loc);
  }
  [[nodiscard]] bool has_gemm_table() const noexcept override { return true; }
  /// From 2^20 multiply-adds with every dimension at least 48: a smaller or thinner product (the
  /// DG inverse mass, Np x Np times Np x E) is memory-bound, and a generated kernel reads it once
  /// with its producers and readers fused, where a cuBLAS call adds a node and a round trip of
  /// its output through memory.
  [[nodiscard]] bool gemm_pays(std::int64_t m, std::int64_t n, std::int64_t k,
                               std::int64_t batch) const noexcept override {
    return std::min({m, n, k}) >= 48 && static_cast<double>(m) * static_cast<double>(n) *
                                                static_cast<double>(k) *
                                                static_cast<double>(batch) >=
                                            static_cast<double>(std::int64_t{1} << 20);
  }

  std::vector<std::vector<std::vector<double>>> time(
      const Device& device, const std::shared_ptr<const LazyModule>& module,
      std::span<const LazyTimedGroup> groups, int reps, std::source_location loc) override {
    const auto& m = static_cast<const CudaModule&>(*module);
    TimingResources res;
    res.device = device.index;
    DeviceGuard guard(device.index, loc);
    // A stream of its own: nothing of the program's contexts waits on it or is waited on.
    check(cudaStreamCreateWithFlags(&res.stream, cudaStreamNonBlocking), "cudaStreamCreate", loc);
    std::vector<std::vector<std::vector<double>>> out;
    for (const auto& g : groups) {
      std::vector<void*> ptrs;
      for (const auto& b : g.buffers) {
        if (b.data != nullptr) {
          ptrs.push_back(const_cast<void*>(b.data));
          continue;
        }
        void* p = nullptr;
        check(cudaMallocAsync(&p, std::max<std::size_t>(b.bytes, 8), res.stream),
              "cudaMallocAsync (lazy tuning)", loc);
        res.memory.push_back(p);
        const auto h = scratch_contents(b);
        check(cudaMemcpyAsync(p, h.data(), b.bytes, cudaMemcpyHostToDevice, res.stream),
              "cudaMemcpyAsync (lazy tuning)", loc);
        check(cudaStreamSynchronize(res.stream), "cudaStreamSynchronize", loc);
        ptrs.push_back(p);
      }
      const std::size_t n = g.kernels.size();
      std::vector<std::vector<std::byte>> args = g.args;
      for (auto& a : args) {
        for (std::size_t j = 0; j < ptrs.size() && 8 * (j + 1) <= a.size(); ++j) {
          std::memcpy(a.data() + 8 * j, &ptrs[j], sizeof(void*));
        }
      }
      auto launch = [&](std::size_t i) {
        void* params[] = {args[i].data()};
        check(cudaLaunchKernel(
                  m.function(g.kernels[i]),
                  dim3(static_cast<unsigned>(blocks_for(g.elements[i], m.sms(), g.max_blocks[i]))),
                  dim3(static_cast<unsigned>(kBlock)), params, 0, res.stream),
              "cudaLaunchKernel (lazy tuning)", loc);
      };
      while (res.events.size() < 2 * n * static_cast<std::size_t>(reps)) {
        cudaEvent_t e = nullptr;
        check(cudaEventCreate(&e), "cudaEventCreate", loc);
        res.events.push_back(e);
      }
      for (std::size_t i = 0; i < n; ++i) launch(i);  // warm-up (caches, clocks, lazy loading)
      // Rounds: each candidate once per round, so that drift affects every one alike.
      for (int r = 0; r < reps; ++r) {
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t e = 2 * (static_cast<std::size_t>(r) * n + i);
          check(cudaEventRecord(res.events[e], res.stream), "cudaEventRecord", loc);
          launch(i);
          check(cudaEventRecord(res.events[e + 1], res.stream), "cudaEventRecord", loc);
        }
      }
      check(cudaStreamSynchronize(res.stream), "cudaStreamSynchronize (lazy tuning)", loc);
      std::vector<std::vector<double>> times(n);
      for (int r = 0; r < reps; ++r) {
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t e = 2 * (static_cast<std::size_t>(r) * n + i);
          float ms = 0;
          check(cudaEventElapsedTime(&ms, res.events[e], res.events[e + 1]), "cudaEventElapsedTime",
                loc);
          times[i].push_back(ms);
        }
      }
      out.push_back(std::move(times));
      res.free_memory();
    }
    return out;
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
