// Loading the module's kernels ahead of their first launch (backends/cuda/kernel_preload.hpp).
// The driver calls that enumerate a module's functions and load them (CUDA 12.4) are taken from
// the driver through the runtime (cudaGetDriverEntryPointByVersion): the module links no libcuda.

#include "backends/cuda/kernel_preload.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"

namespace sluice::detail::cuda {
namespace {

struct Registered {
  const char* file;
  const void* anchor;
  WarmUp warm_up;
};

std::vector<Registered>& registry() {
  static auto* files = new std::vector<Registered>;  // filled during static initialization
  return *files;
}

std::mutex& registry_mutex() {
  static auto* m = new std::mutex;
  return *m;
}

/// The driver calls used here, or why they are missing.
struct Driver {
  CUresult (*func_get_module)(CUmodule*, CUfunction) = nullptr;
  CUresult (*function_count)(unsigned int*, CUmodule) = nullptr;
  CUresult (*enumerate)(CUfunction*, unsigned int, CUmodule) = nullptr;
  CUresult (*load)(CUfunction) = nullptr;
  CUresult (*is_loaded)(CUfunctionLoadingState*, CUfunction) = nullptr;
  CUresult (*loading_mode)(CUmoduleLoadingMode*) = nullptr;
  std::string missing;
};

const Driver& driver() {
  static const Driver d = [] {
    Driver r;
    auto get = [&r](const char* name, auto& fn, unsigned version) {
      void* p = nullptr;
      cudaDriverEntryPointQueryResult found{};
      if (cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &found) !=
              cudaSuccess ||
          found != cudaDriverEntryPointSuccess || p == nullptr) {
        (void)cudaGetLastError();
        r.missing += (r.missing.empty() ? "" : ", ") + std::string(name);
        return;
      }
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    get("cuFuncGetModule", r.func_get_module, 11000);
    get("cuModuleGetFunctionCount", r.function_count, 12040);
    get("cuModuleEnumerateFunctions", r.enumerate, 12040);
    get("cuFuncLoad", r.load, 12040);
    get("cuFuncIsLoaded", r.is_loaded, 12040);
    get("cuModuleGetLoadingMode", r.loading_mode, 11070);
    return r;
  }();
  return d;
}

std::string driver_error(const char* call, CUresult r) {
  return std::string(call) + " returned CUresult " + std::to_string(static_cast<int>(r));
}

/// Walks every function of every registered file on the current device: `load` loads them
/// (cuFuncLoad). Counts into `report`; a failure is appended to `report.failure`.
void walk(PreloadReport& report, bool load) {
  const Driver& d = driver();
  std::vector<Registered> files;
  {
    std::lock_guard lock(registry_mutex());
    files = registry();
  }
  auto fail = [&report](const std::string& what) {
    report.failure += (report.failure.empty() ? "" : "; ") + what;
  };
  if (d.loading_mode != nullptr) {
    CUmoduleLoadingMode mode{};
    if (d.loading_mode(&mode) == CUDA_SUCCESS) report.lazy = mode == CU_MODULE_LAZY_LOADING;
  }
  if (!d.missing.empty()) fail("the driver lacks " + d.missing);
  std::vector<CUmodule> seen;
  for (const auto& f : files) {
    report.files.emplace_back(f.file);
    if (load) {
      // Whatever else fails, the anchor itself is loaded.
      cudaFuncAttributes attr{};
      if (const auto e = cudaFuncGetAttributes(&attr, f.anchor); e != cudaSuccess) {
        fail(std::string(f.file) + ": cudaFuncGetAttributes: " + describe(e));
        clear_error();
      }
    }
    if (!d.missing.empty()) continue;
    cudaFunction_t fn = nullptr;
    if (const auto e = cudaGetFuncBySymbol(&fn, f.anchor); e != cudaSuccess) {
      fail(std::string(f.file) + ": cudaGetFuncBySymbol: " + describe(e));
      clear_error();
      continue;
    }
    CUmodule mod = nullptr;
    if (const auto r = d.func_get_module(&mod, reinterpret_cast<CUfunction>(fn));
        r != CUDA_SUCCESS) {
      fail(std::string(f.file) + ": " + driver_error("cuFuncGetModule", r));
      continue;
    }
    if (std::find(seen.begin(), seen.end(), mod) != seen.end()) continue;
    seen.push_back(mod);
    unsigned int n = 0;
    if (const auto r = d.function_count(&n, mod); r != CUDA_SUCCESS) {
      fail(std::string(f.file) + ": " + driver_error("cuModuleGetFunctionCount", r));
      continue;
    }
    std::vector<CUfunction> fns(n);
    if (const auto r = d.enumerate(fns.data(), n, mod); r != CUDA_SUCCESS) {
      fail(std::string(f.file) + ": " + driver_error("cuModuleEnumerateFunctions", r));
      continue;
    }
    report.functions += n;
    for (CUfunction g : fns) {
      if (load) {
        if (const auto r = d.load(g); r != CUDA_SUCCESS) {
          fail(std::string(f.file) + ": " + driver_error("cuFuncLoad", r));
          continue;
        }
      }
      CUfunctionLoadingState state{};
      if (d.is_loaded(&state, g) == CUDA_SUCCESS && state == CU_FUNCTION_LOADING_STATE_LOADED) {
        ++report.loaded;
      }
    }
  }
}

void warm_up(PreloadReport& report) {
  std::vector<Registered> files;
  {
    std::lock_guard lock(registry_mutex());
    files = registry();
  }
  cudaStream_t s = nullptr;
  if (const auto e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); e != cudaSuccess) {
    report.failure += (report.failure.empty() ? "" : "; ") +
                      std::string("cudaStreamCreateWithFlags (warm-up): ") + describe(e);
    clear_error();
    return;
  }
  for (const auto& f : files) {
    if (f.warm_up == nullptr) continue;
    try {
      f.warm_up(s);
      check(cudaStreamSynchronize(s), "cudaStreamSynchronize (warm-up)");
    } catch (const std::exception& e) {
      report.failure +=
          (report.failure.empty() ? "" : "; ") + std::string(f.file) + ": warm-up: " + e.what();
    }
  }
  (void)cudaStreamDestroy(s);
}

}  // namespace

KernelFile::KernelFile(const char* file, const void* anchor, WarmUp warm_up) noexcept {
  try {
    std::lock_guard lock(registry_mutex());
    registry().push_back({file, anchor, warm_up});
  } catch (...) {
    // Out of memory while the module loads: the preload misses this file, and says so nowhere
    // else; nothing sensible can be done at static initialization.
  }
}

namespace {

/// Loads the registered kernels on `device` once, and runs the warm-ups once when `warm_ups`;
/// devices in parallel (the NCCL engine preloads each on a thread of its own). The report of
/// what was done so far.
PreloadReport load_once(int device, bool warm_ups) noexcept {
  struct Slot {
    std::mutex mutex;
    bool loaded = false;
    bool warmed = false;
    PreloadReport report;
  };
  static std::mutex mutex;
  static auto* slots = new std::map<int, Slot>;  // never destroyed
  PreloadReport report;
  try {
    Slot* slot = nullptr;
    {
      std::lock_guard lock(mutex);
      slot = &(*slots)[device];
    }
    std::lock_guard lock(slot->mutex);
    if (!slot->loaded || (warm_ups && !slot->warmed)) {
      DeviceGuard guard(device);
      if (!slot->loaded) {
        PreloadReport r;
        walk(r, true);
        slot->report = std::move(r);
        slot->loaded = true;
      }
      if (warm_ups && !slot->warmed) {
        warm_up(slot->report);
        slot->warmed = true;
      }
    }
    return slot->report;
  } catch (const std::exception& e) {
    report.failure += (report.failure.empty() ? "" : "; ") + std::string(e.what());
  }
  return report;
}

}  // namespace

PreloadReport preload_kernels(int device) noexcept {
  return load_once(device, true);
}

void load_kernels_once(int device) noexcept {
  static const bool enabled = [] {
    const char* v = std::getenv("SLUICE_CUDA_PRELOAD");
    return v == nullptr || std::string_view(v) != "0";
  }();
  // A failure leaves the kernels to lazy loading (its report says nothing a launch would not).
  if (enabled) (void)load_once(device, false);
}

PreloadReport kernel_status(int device) noexcept {
  PreloadReport report;
  try {
    DeviceGuard guard(device);
    walk(report, false);
  } catch (const std::exception& e) {
    report.failure += (report.failure.empty() ? "" : "; ") + std::string(e.what());
  }
  return report;
}

}  // namespace sluice::detail::cuda
