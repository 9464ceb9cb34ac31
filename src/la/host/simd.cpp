#include "la/host/simd.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace sluice::detail::host {

bool host_cpu_has_avx2() noexcept {
#if SLUICE_HOST_HAVE_AVX2_BUILD
  // libgcc's CPUID check, which also asks the OS whether it saves the AVX registers (XGETBV).
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") != 0;
#else
  return false;
#endif
}

HostIsa host_isa() noexcept {
  static const HostIsa isa = [] {
    const char* env = std::getenv("SLUICE_HOST_ISA");
    if (env != nullptr && std::strcmp(env, "baseline") == 0) return HostIsa::baseline;
    return host_cpu_has_avx2() ? HostIsa::avx2 : HostIsa::baseline;
  }();
  return isa;
}

namespace {

/// The last-level cache's size in bytes: Linux's sysfs (what lscpu reads; glibc's sysconf reports
/// the whole host's in some virtual machines, ten times too much), else sysconf, else 32 MiB.
std::size_t last_level_cache_bytes() {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level(dir + "/level"), size(dir + "/size");
    int l = 0;
    std::size_t value = 0;
    std::string unit;
    if (!(level >> l) || l != 3 || !(size >> value)) continue;
    size >> unit;
    return value * (unit == "K" ? 1024 : unit == "M" ? 1024 * 1024 : 1);
  }
#ifdef _SC_LEVEL3_CACHE_SIZE
  if (const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE); l3 > 0) return static_cast<std::size_t>(l3);
#endif
  return std::size_t{32} << 20;
}

}  // namespace

bool stream_stores_for(std::size_t n) noexcept {
#if SLUICE_HOST_HAVE_STREAM_STORES
  static const std::size_t threshold = []() -> std::size_t {
    const char* env = std::getenv("SLUICE_HOST_STREAM_STORES");
    if (env != nullptr && std::strcmp(env, "off") == 0) return SIZE_MAX;
    if (env != nullptr && std::strcmp(env, "on") == 0) return 0;
    try {
      return last_level_cache_bytes() / 4 / sizeof(double);
    } catch (...) {
      return SIZE_MAX;
    }
  }();
  return n > threshold;
#else
  (void)n;
  return false;
#endif
}

const char* host_isa_name(HostIsa isa) noexcept {
  return isa == HostIsa::avx2 ? "avx2" : "baseline";
}

}  // namespace sluice::detail::host
