#pragma once
// NVRTC, as an extension that the cuda module registers for "cuda" (src/kernel/cuda/nvrtc.cpp);
// the cache around it is src/kernel/kernel_cache.cpp, in libsluice.

#include <source_location>
#include <span>
#include <string>
#include <string_view>

namespace sluice::detail {

struct NvrtcOutput {
  std::string image;         // a cubin
  std::string lowered_name;  // the kernel's name in it
};

class Nvrtc {
 public:
  static constexpr std::string_view extension_name = "Nvrtc";
  virtual ~Nvrtc() = default;
  /// Compiles `source` for sm_`arch`; throws Error(invalid_argument) with NVRTC's log.
  [[nodiscard]] virtual NvrtcOutput compile(std::string_view source, std::string_view kernel_name,
                                            std::span<const std::string> options, int arch,
                                            std::source_location loc) = 0;
  /// "13.0": part of the cache key, so a new NVRTC never reuses an old one's output.
  [[nodiscard]] virtual std::string version() = 0;
};

}  // namespace sluice::detail
