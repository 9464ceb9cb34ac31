#include "backends/cuda/cuda_device.hpp"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <mutex>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_host_callback.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::cuda {
namespace {

std::string version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::string pci_text(const cudaDeviceProp& p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.0", static_cast<unsigned>(p.pciDomainID),
                static_cast<unsigned>(p.pciBusID), static_cast<unsigned>(p.pciDeviceID));
  return buf;
}

std::string no_device_reason(cudaError_t err) {
  if (err == cudaErrorInsufficientDriver) {
    return "no CUDA driver (" + std::string(cudaGetErrorName(err)) +
           "): this machine has no NVIDIA driver or one older than the CUDA runtime sluice was "
           "built with";
  }
  if (err == cudaErrorNoDevice) {
    return "no CUDA device (" + std::string(cudaGetErrorName(err)) +
           "): the driver sees no GPU; check CUDA_VISIBLE_DEVICES";
  }
  return "the CUDA runtime failed to start: " + describe(err);
}

// Reads one device's properties; returns an empty reason on success.
std::string describe_device(int i, int driver, int runtime, DeviceInfo& d) {
  cudaDeviceProp p{};
  if (auto err = cudaGetDeviceProperties(&p, i); err != cudaSuccess) {
    clear_error();
    return "cuda:" + std::to_string(i) + " cannot be queried: " + describe(err);
  }
  // The priority range belongs to the device's context, so the device must be current.
  int least = 0, greatest = 0;
  {
    DeviceGuard guard(i, std::nothrow);
    if (auto err = cudaDeviceGetStreamPriorityRange(&least, &greatest); err != cudaSuccess) {
      clear_error();
      least = greatest = 0;
    }
  }
  int pools = 0;
  if (cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, i) != cudaSuccess) {
    clear_error();
  }
  // CUDA 13 dropped the clock fields from cudaDeviceProp; the attributes still report them.
  auto attribute = [i](cudaDeviceAttr a) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, a, i) != cudaSuccess) {
      clear_error();
      v = 0;
    }
    return v;
  };
  d.compute_capability_major = p.major;
  d.compute_capability_minor = p.minor;
  d.multiprocessors = p.multiProcessorCount;
  d.clock_khz = attribute(cudaDevAttrClockRate);
  d.memory_clock_khz = attribute(cudaDevAttrMemoryClockRate);
  d.memory_bus_bits = attribute(cudaDevAttrGlobalMemoryBusWidth);
  // Double data rate: two transfers per clock over the whole bus.
  d.memory_bandwidth_gbs = 2.0 * d.memory_clock_khz * 1e3 * (d.memory_bus_bits / 8.0) / 1e9;
  d.l2_cache_bytes = static_cast<std::size_t>(p.l2CacheSize);
  d.shared_memory_per_block =
      p.sharedMemPerBlockOptin > 0 ? p.sharedMemPerBlockOptin : p.sharedMemPerBlock;
  d.shared_memory_per_multiprocessor = p.sharedMemPerMultiprocessor;
  d.max_threads_per_block = p.maxThreadsPerBlock;
  d.max_threads_per_multiprocessor = p.maxThreadsPerMultiProcessor;
  d.warp_size = p.warpSize;
  d.device = {"cuda", i};
  d.name = p.name;
  d.total_memory = p.totalGlobalMem;
  d.compute_units = p.multiProcessorCount;
  // sluice counts like CUDA: 0 is the least urgent and more negative is more urgent.
  d.priority_lowest = least;
  d.priority_highest = greatest;
  d.details = "compute capability " + std::to_string(p.major) + "." + std::to_string(p.minor) +
              ", PCI " + pci_text(p) + ", stream priorities " + std::to_string(greatest) + ".." +
              std::to_string(least) + " (lower is more urgent), stream-ordered pools " +
              (pools != 0 ? "yes" : "no") + ", driver " + version_text(driver) + ", runtime " +
              version_text(runtime);
  return {};
}

DeviceTable enumerate() {
  DeviceTable t;
  int count = 0;
  if (auto err = cudaGetDeviceCount(&count); err != cudaSuccess) {
    clear_error();
    t.unavailable_reason = no_device_reason(err);
    return t;
  }
  if (count == 0) {
    t.unavailable_reason = "no CUDA device: the driver reports none; check CUDA_VISIBLE_DEVICES";
    return t;
  }
  int driver = 0, runtime = 0;
  (void)cudaDriverGetVersion(&driver);
  (void)cudaRuntimeGetVersion(&runtime);
  for (int i = 0; i < count; ++i) {
    DeviceInfo d;
    // Stop at the first device that cannot be queried: sluice indices must equal CUDA ordinals.
    if (auto why = describe_device(i, driver, runtime, d); !why.empty()) {
      t.unavailable_reason = why;
      break;
    }
    t.devices.push_back(std::move(d));
  }
  // The peer-access matrix; copies between devices without access are staged by the driver.
  const int n = static_cast<int>(t.devices.size());
  for (int a = 0; a < n; ++a) {
    auto& row = t.devices[static_cast<std::size_t>(a)].peer_access;
    row.assign(static_cast<std::size_t>(n), false);
    for (int b = 0; b < n; ++b) {
      int can = a == b ? 1 : 0;
      if (a != b && cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess) {
        clear_error();
        can = 0;
      }
      row[static_cast<std::size_t>(b)] = can != 0;
    }
  }
  return t;
}

std::once_flag table_once;
const DeviceTable* table = nullptr;
std::atomic<bool> table_ready{false};

}  // namespace

const DeviceTable& device_table() {
  if (!table_ready.load(std::memory_order_acquire)) {
    if (in_host_callback()) {
      // Enumerating calls CUDA, which is forbidden here; caching a bogus "no device" would be
      // worse.
      throw Error(Errc::invalid_state,
                  "cuda: devices enumerated for the first time inside a host task, where CUDA "
                  "calls are forbidden; list devices before issuing host tasks");
    }
    std::call_once(table_once, [] {
      table = new DeviceTable(enumerate());  // process lifetime: read by callbacks during exit
      table_ready.store(true, std::memory_order_release);
    });
  }
  return *table;
}

int device_count() {
  return static_cast<int>(device_table().devices.size());
}

void require_device(int device, std::source_location where) {
  const auto& t = device_table();
  if (device >= 0 && device < static_cast<int>(t.devices.size())) return;
  std::string message = "cuda:" + std::to_string(device) +
                        " does not exist: the cuda backend has " +
                        std::to_string(t.devices.size()) + " device(s)";
  if (!t.unavailable_reason.empty()) message += " (" + t.unavailable_reason + ")";
  throw Error(Errc::no_device, message + "; `sluice devices` lists them", where);
}

DeviceGuard::DeviceGuard(int device, std::source_location where) {
  refuse_in_host_callback(where);
  if (has_deferred()) [[unlikely]]
    run_deferred();
  int current = -1;
  check(cudaGetDevice(&current), "cudaGetDevice", where);
  if (current != device) {
    check(cudaSetDevice(device), "cudaSetDevice", where);
    previous_ = current;
  }
}

DeviceGuard::DeviceGuard(int device, std::nothrow_t) noexcept {
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess) {
    clear_error();
    return;
  }
  if (current != device) {
    if (cudaSetDevice(device) != cudaSuccess) {
      clear_error();
      return;
    }
    previous_ = current;
  }
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) clear_error();
}

}  // namespace sluice::detail::cuda
