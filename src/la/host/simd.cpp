#include "la/host/simd.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backends/host/host_topology.hpp"

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

bool stream_stores_for(std::size_t n) noexcept {
#if SLUICE_HOST_HAVE_STREAM_STORES
  static const std::size_t threshold = []() -> std::size_t {
    const char* env = std::getenv("SLUICE_HOST_STREAM_STORES");
    if (env != nullptr && std::strcmp(env, "off") == 0) return SIZE_MAX;
    if (env != nullptr && std::strcmp(env, "on") == 0) return 0;
    std::size_t bytes = 0;
    try {
      bytes = last_level_cache_bytes();
    } catch (...) {
    }
    if (bytes == 0) bytes = std::size_t{32} << 20;  // sysfs silent: a common last level
    return bytes / 4 / sizeof(double);
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
