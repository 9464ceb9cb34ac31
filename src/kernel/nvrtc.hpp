#pragma once
// NVRTC itself (src/kernel/cuda/nvrtc.cpp, built with the cuda backend); the cache around it is
// src/kernel/kernel_cache.cpp.

#include <source_location>
#include <span>
#include <string>
#include <string_view>

namespace sluice::detail {

struct NvrtcOutput {
  std::string image;         // a cubin
  std::string lowered_name;  // the kernel's name in it
};

/// Compiles `source` for sm_`arch`; throws Error(invalid_argument) with NVRTC's log.
[[nodiscard]] NvrtcOutput nvrtc_compile(std::string_view source, std::string_view kernel_name,
                                        std::span<const std::string> options, int arch,
                                        std::source_location loc);
/// "13.0": part of the cache key, so a new NVRTC never reuses an old one's output.
[[nodiscard]] std::string nvrtc_version();

}  // namespace sluice::detail
