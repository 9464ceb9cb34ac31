// The cuda part of interop.hpp: contexts wrapping other libraries' streams; one numbered
// operation of a context that links its stream with another stream through an event (record on
// one, wait on the other); kernels of a KernelSpec loaded for launches on a raw stream.

#include <cuda_runtime_api.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
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

/// The current device for the scope (restored after).
struct CurrentDevice {
  int previous = -1;
  explicit CurrentDevice(int device) {
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    (void)cudaSetDevice(device);
  }
  ~CurrentDevice() {
    if (previous >= 0) (void)cudaSetDevice(previous);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;
};

}  // namespace

bool available() noexcept {
  return true;
}

int device_of(const void* ptr, std::source_location loc) {
  cudaPointerAttributes attr{};
  check(cudaPointerGetAttributes(&attr, ptr), "__cuda_array_interface__: the data pointer", loc);
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged ? attr.device : -1;
}

Context consumer(const Device& device, std::uintptr_t stream, std::source_location loc) {
  if (stream == 0) {
    throw Error(Errc::invalid_argument,
                "stream 0 is ambiguous in the array protocols: 1 is the legacy default stream, 2 "
                "the per-thread one",
                loc);
  }
  unsigned long long id = 0;
  const auto get_id = [&] {
    const cudaError_t err = cudaStreamGetId(reinterpret_cast<cudaStream_t>(stream), &id);
    if (err != cudaSuccess) check(err, "the consumer's stream " + std::to_string(stream), loc);
  };
  if (stream == kLegacyDefaultStream || stream == kPerThreadStream) {
    CurrentDevice guard(device.index);  // the default streams are the current device's
    get_id();
  } else {
    get_id();  // a stream handle names its device itself: no switch of the current device
  }
  struct Key {
    int device;
    std::uintptr_t handle;
    unsigned long long id;
    bool operator<(const Key& o) const {
      return std::tie(device, handle, id) < std::tie(o.device, o.handle, o.id);
    }
  };
  static std::mutex mutex;
  static auto* wrapped = new std::map<Key, Context*>;  // never destroyed (see interop.hpp)
  std::lock_guard lock(mutex);
  auto& slot = (*wrapped)[Key{device.index, stream, id}];
  if (slot == nullptr) {
    char name[64];
    std::snprintf(name, sizeof name, "consumer stream %#llx",
                  static_cast<unsigned long long>(stream));
    slot = new Context(Context::wrap(device, reinterpret_cast<void*>(stream), name));
  }
  return *slot;
}

void link(const Context& ctx, std::string_view what, std::optional<std::uintptr_t> producer,
          std::optional<std::uintptr_t> waiter, std::source_location loc) {
  const int device = ctx.device().index;
  sluice::cuda::enqueue(
      ctx, what,
      [&](CUstream_st* stream) {
        if (!producer && !waiter) return;
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

namespace {
std::string code_bytes(const KernelSpec& spec, const KernelSpec::Code& c,
                       std::source_location loc) {
  if (c.path.empty()) return c.bytes;
  std::ifstream in(c.path, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.empty()) {
    throw Error(Errc::invalid_argument,
                "kernel " + spec.name() + ": cannot read " + c.path.string(), loc);
  }
  return data;
}
}  // namespace

const void* native_kernel(const KernelSpec& spec, const Device& device, std::source_location loc) {
  CurrentDevice guard(device.index);
  int major = 0, minor = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device.index),
        "kernel load", loc);
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device.index),
        "kernel load", loc);
  const KernelSpec::Code* chosen = nullptr;
  int best = 99;
  for (const auto& c : spec.code()) {
    int rank = 99;
    switch (c.format) {
      case KernelFormat::cubin:
        rank = (c.arch / 10 == major && c.arch % 10 <= minor) ? 0 : 99;
        break;
      case KernelFormat::fatbin:
        rank = 1;
        break;
      case KernelFormat::ptx:
        rank = 2;
        break;
      case KernelFormat::cuda_source:
        rank = 3;
        break;
      case KernelFormat::host:
        break;
    }
    if (rank < best) {
      best = rank;
      chosen = &c;
    }
  }
  if (chosen == nullptr) {
    throw Error(Errc::unsupported,
                "kernel " + spec.name() + ": the spec holds no code for " + device.to_string(),
                loc);
  }
  std::string image, name = spec.name();
  if (chosen->format == KernelFormat::cuda_source) {
    auto compiled = kernel_cache::compile(code_bytes(spec, *chosen, loc), spec.name(),
                                          chosen->options, major * 10 + minor, loc);
    image = std::move(compiled.image);
    name = compiled.lowered_name;
  } else {
    image = code_bytes(spec, *chosen, loc);
    if (chosen->format == KernelFormat::ptx && (image.empty() || image.back() != '\0')) {
      image.push_back('\0');  // the driver reads PTX as a C string
    }
  }
  // The library stays loaded for the process: a command group may be queued on it at any time.
  cudaLibrary_t library = nullptr;
  check(cudaLibraryLoadData(&library, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
        "kernel " + spec.name() + ": loading the module", loc);
  cudaKernel_t kernel = nullptr;
  check(cudaLibraryGetKernel(&kernel, library, name.c_str()),
        "kernel " + spec.name() + ": finding '" + name + "' in the module", loc);
  return reinterpret_cast<const void*>(kernel);
}

const char* launch_native(void* stream, const void* kernel, const Dims& grid, const Dims& block,
                          std::size_t shared, void** args) {
  const cudaError_t err =
      cudaLaunchKernel(kernel, dim3(grid.x, grid.y, grid.z), dim3(block.x, block.y, block.z), args,
                       shared, static_cast<cudaStream_t>(stream));
  if (err == cudaSuccess) return nullptr;
  (void)cudaGetLastError();
  return cudaGetErrorName(err);
}

}  // namespace sluice::python::interop::cuda
