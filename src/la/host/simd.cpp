#include "la/host/simd.hpp"

#include <cstdlib>
#include <cstring>

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

const char* host_isa_name(HostIsa isa) noexcept {
  return isa == HostIsa::avx2 ? "avx2" : "baseline";
}

}  // namespace sluice::detail::host
