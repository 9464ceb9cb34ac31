// NVRTC: CUDA C++ source to a cubin for one architecture. Needs the toolkit's libnvrtc, not a GPU
// or a driver.

#include <nvrtc.h>

#include <memory>
#include <string>
#include <vector>

#include "kernel/nvrtc.hpp"
#include "sluice/error.hpp"

namespace sluice::detail {
namespace {

struct ProgramDeleter {
  void operator()(nvrtcProgram p) const noexcept { nvrtcDestroyProgram(&p); }
};
using Program = std::unique_ptr<_nvrtcProgram, ProgramDeleter>;

void check(nvrtcResult r, const char* what, std::source_location loc) {
  if (r != NVRTC_SUCCESS) {
    throw Error(Errc::backend_failure, std::string(what) + " failed: " + nvrtcGetErrorString(r),
                loc);
  }
}

std::string log_of(nvrtcProgram p) {
  std::size_t size = 0;
  if (nvrtcGetProgramLogSize(p, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(p, log.data()) != NVRTC_SUCCESS) return {};
  log.resize(size - 1);
  return log;
}

NvrtcOutput nvrtc_compile(std::string_view source, std::string_view kernel_name,
                          std::span<const std::string> options, int arch,
                          std::source_location loc) {
  const std::string src(source);
  const std::string name(kernel_name);
  nvrtcProgram raw = nullptr;
  check(nvrtcCreateProgram(&raw, src.c_str(), "sluice_kernel.cu", 0, nullptr, nullptr),
        "nvrtcCreateProgram", loc);
  Program program(raw);
  // A name expression makes NVRTC keep the kernel (templates get instantiated) and tells us its
  // mangled name; it works for extern "C" kernels too.
  check(nvrtcAddNameExpression(raw, name.c_str()), "nvrtcAddNameExpression", loc);

  std::vector<std::string> all(options.begin(), options.end());
  all.push_back("--gpu-architecture=sm_" + std::to_string(arch));  // sm_: a cubin, not PTX
  std::vector<const char*> argv;
  for (const auto& o : all) argv.push_back(o.c_str());
  const nvrtcResult r = nvrtcCompileProgram(raw, static_cast<int>(argv.size()), argv.data());
  if (r != NVRTC_SUCCESS) {
    throw Error(Errc::invalid_argument,
                "kernel " + name + ": NVRTC could not compile the CUDA source for sm_" +
                    std::to_string(arch) + " (" + nvrtcGetErrorString(r) + "); its log:\n" +
                    log_of(raw),
                loc);
  }
  const char* lowered = nullptr;
  check(nvrtcGetLoweredName(raw, name.c_str(), &lowered), "nvrtcGetLoweredName", loc);
  NvrtcOutput out;
  out.lowered_name = lowered;
  std::size_t size = 0;
  check(nvrtcGetCUBINSize(raw, &size), "nvrtcGetCUBINSize", loc);
  out.image.resize(size);
  check(nvrtcGetCUBIN(raw, out.image.data()), "nvrtcGetCUBIN", loc);
  return out;
}

class NvrtcImpl final : public Nvrtc {
 public:
  NvrtcOutput compile(std::string_view source, std::string_view kernel_name,
                      std::span<const std::string> options, int arch,
                      std::source_location loc) override {
    return nvrtc_compile(source, kernel_name, options, arch, loc);
  }
  std::string version() override {
    int major = 0, minor = 0;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
    return std::to_string(major) + "." + std::to_string(minor);
  }
};

}  // namespace

namespace cuda {
Nvrtc& nvrtc() {
  static NvrtcImpl impl;
  return impl;
}
}  // namespace cuda

}  // namespace sluice::detail
