#include "kernel/cuda/cuda_loader.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_device.hpp"
#include "backends/cuda/cuda_reaper.hpp"
#include "backends/cuda/cuda_stream.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::cuda {
namespace {

class CudaKernel final : public LoadedKernel {
 public:
  CudaKernel(Device device, std::string name, KernelFormat format, std::vector<std::size_t> sizes,
             cudaLibrary_t library, cudaKernel_t kernel)
      : LoadedKernel(std::move(device), std::move(name), format, std::move(sizes)),
        library_(library),
        kernel_(kernel) {}

  // Launches already queued may still run code of the library: unloaded after the device's
  // earlier work, on the reaper's thread (never a wait here).
  ~CudaKernel() override { unload_libraries_later(device().index, {library_}); }

  void launch(Stream& stream, const Dims& grid, const Block& block, void** args,
              const OpInfo& op) const override {
    as_cuda_stream(stream, "kernel launch")
        .launch(reinterpret_cast<const void*>(kernel_), dim3(grid.x, grid.y, grid.z),
                dim3(block.x, block.y, block.z), block.shared_bytes, args, op);
  }

 private:
  cudaLibrary_t library_;
  cudaKernel_t kernel_;
};

std::string where_of(const KernelSpec::Code& c) {
  std::string s = to_string(c.format);
  if (c.format == KernelFormat::cubin) s += " sm_" + std::to_string(c.arch);
  return s + (c.path.empty() ? " in memory" : " file " + c.path.string());
}

std::string read_file(const KernelSpec& spec, const KernelSpec::Code& c, std::source_location loc) {
  std::ifstream in(c.path, std::ios::binary);
  std::string data;
  if (in) data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) {
    throw Error(Errc::invalid_argument,
                "kernel " + spec.name() + ": cannot read " + where_of(c) +
                    ": check that the file exists and is readable",
                loc);
  }
  if (data.empty()) {
    throw Error(Errc::invalid_argument,
                "kernel " + spec.name() + ": " + where_of(c) + " is empty or missing", loc);
  }
  return data;
}

// Candidates in order of preference: a cubin of this architecture family (newest first), a
// fatbin, PTX, then source.
std::vector<const KernelSpec::Code*> candidates(const KernelSpec& spec, int major, int minor) {
  std::vector<const KernelSpec::Code*> out;
  auto rank = [&](const KernelSpec::Code& c) {
    switch (c.format) {
      case KernelFormat::cubin:
        return (c.arch / 10 == major && c.arch % 10 <= minor) ? 0 : -1;
      case KernelFormat::fatbin:
        return 1;
      case KernelFormat::ptx:
        return 2;
      case KernelFormat::cuda_source:
        return 3;
      case KernelFormat::host:
        return -1;
    }
    return -1;
  };
  for (const auto& c : spec.code()) {
    if (rank(c) >= 0) out.push_back(&c);
  }
  std::stable_sort(out.begin(), out.end(), [&](auto* a, auto* b) {
    if (rank(*a) != rank(*b)) return rank(*a) < rank(*b);
    return a->arch > b->arch;
  });
  return out;
}

struct LoadFailure {
  cudaError_t err;
};

class CudaLoader final : public KernelLoader {
 public:
  std::shared_ptr<const LoadedKernel> load(const Device& device, const KernelSpec& spec,
                                           const KernelSignature& signature,
                                           std::source_location loc) override {
    const int ordinal = device.index;
    int major = 0, minor = 0;
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal),
          "cudaDeviceGetAttribute", loc);
    check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ordinal),
          "cudaDeviceGetAttribute", loc);
    const auto list = candidates(spec, major, minor);
    if (list.empty()) {
      std::string have;
      for (const auto& c : spec.code()) have += (have.empty() ? "" : ", ") + where_of(c);
      if (spec.host()) have += std::string(have.empty() ? "" : ", ") + "a host implementation";
      throw Error(Errc::unsupported,
                  "kernel " + spec.name() + ": the spec has no code that fits " +
                      device.to_string() + " (compute capability " + std::to_string(major) + "." +
                      std::to_string(minor) + "); it holds " +
                      (have.empty() ? std::string("nothing") : have) +
                      ". Add PTX, CUDA source, or a cubin for sm_" + std::to_string(major) +
                      std::to_string(minor),
                  loc);
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto& code = *list[i];
      const bool last = i + 1 == list.size();
      try {
        return load_one(device, spec, signature, code, major * 10 + minor, loc);
      } catch (const LoadFailure& f) {
        // A fatbin without an image for this device: try the next format, if any.
        if (last) {
          throw Error(Errc::unsupported,
                      "kernel " + spec.name() + ": " + where_of(code) + " has no image for " +
                          device.to_string() + " (" + describe(f.err) + ")",
                      loc);
        }
      }
    }
    throw Error(Errc::unsupported, "kernel " + spec.name() + ": nothing could be loaded", loc);
  }

 private:
  static std::shared_ptr<const LoadedKernel> load_one(const Device& device, const KernelSpec& spec,
                                                      const KernelSignature& signature,
                                                      const KernelSpec::Code& code, int arch,
                                                      std::source_location loc) {
    std::string data;
    std::string name = spec.name();
    KernelFormat format = code.format;
    if (code.format == KernelFormat::cuda_source) {
      auto compiled = kernel_cache::compile(code.bytes, spec.name(), code.options, arch, loc);
      data = std::move(compiled.image);
      name = std::move(compiled.lowered_name);
    } else if (code.path.empty()) {
      data = code.bytes;
    } else {
      data = read_file(spec, code, loc);
    }
    if (data.empty()) {
      throw Error(Errc::invalid_argument,
                  "kernel " + spec.name() + ": " + where_of(code) + " is empty", loc);
    }

    DeviceGuard guard(device.index, loc);
    char log[4096] = {};
    cudaJitOption options[] = {cudaJitErrorLogBuffer, cudaJitErrorLogBufferSizeBytes};
    void* values[] = {log, reinterpret_cast<void*>(std::uintptr_t{sizeof log})};
    cudaLibrary_t library = nullptr;
    // PTX is text and must end in a NUL, which std::string::data() provides.
    cudaError_t err =
        cudaLibraryLoadData(&library, data.data(), options, values, 2, nullptr, nullptr, 0);
    if (err != cudaSuccess) {
      clear_error();
      if (code.format == KernelFormat::fatbin && err == cudaErrorNoKernelImageForDevice) {
        throw LoadFailure{err};
      }
      std::string jit(log, strnlen(log, sizeof log));
      throw Error(Errc::invalid_argument,
                  "kernel " + spec.name() + ": the driver could not load " + where_of(code) +
                      " on " + device.to_string() + ": " + describe(err) +
                      (jit.empty() ? std::string() : "; JIT log:\n" + jit),
                  loc);
    }
    struct Unload {  // until the kernel owns the library
      cudaLibrary_t lib;
      ~Unload() {
        if (lib != nullptr) {
          (void)cudaLibraryUnload(lib);
          clear_error();
        }
      }
    } unload{library};

    cudaKernel_t kernel = nullptr;
    err = cudaLibraryGetKernel(&kernel, library, name.c_str());
    if (err != cudaSuccess) {
      clear_error();
      // With lazy module loading (the default) the driver parses the image only here: a module
      // whose kernels cannot be listed did not load at all (malformed PTX, a corrupt cubin).
      const std::string names = kernel_names(library);
      std::string jit(log, strnlen(log, sizeof log));
      if (names.empty()) {
        throw Error(Errc::invalid_argument,
                    "kernel " + spec.name() + ": the driver could not load " + where_of(code) +
                        " on " + device.to_string() + ": " + describe(err) +
                        (jit.empty() ? std::string("; is it well-formed?") : "; JIT log:\n" + jit),
                    loc);
      }
      throw Error(Errc::invalid_argument,
                  "kernel " + spec.name() + ": " + where_of(code) + " has no kernel named '" +
                      name + "'" + names +
                      "; check the name given to KernelSpec (a C++ kernel needs extern \"C\" "
                      "unless it comes as CUDA source)",
                  loc);
    }
    // Loads the code into the device's context now, so a missing image fails here, not at launch.
    cudaFuncAttributes attributes{};
    err = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel));
    if (err != cudaSuccess) {
      clear_error();
      if (code.format == KernelFormat::fatbin) throw LoadFailure{err};
      throw Error(Errc::invalid_argument,
                  "kernel " + spec.name() + ": " + where_of(code) + " does not run on " +
                      device.to_string() + ": " + describe(err),
                  loc);
    }
    std::vector<std::size_t> sizes;
    for (std::size_t i = 0;; ++i) {
      std::size_t offset = 0, size = 0;
      if (cudaFuncGetParamInfo(reinterpret_cast<const void*>(kernel), i, &offset, &size) !=
          cudaSuccess) {
        clear_error();  // past the last parameter
        break;
      }
      sizes.push_back(size);
    }
    check_parameters(spec, signature, sizes, where_of(code), loc);
    unload.lib = nullptr;
    return std::make_shared<CudaKernel>(device, spec.name(), format, std::move(sizes), library,
                                        kernel);
  }

  static std::string kernel_names(cudaLibrary_t library) {
    unsigned count = 0;
    if (cudaLibraryGetKernelCount(&count, library) != cudaSuccess || count == 0) {
      clear_error();
      return {};
    }
    std::vector<cudaKernel_t> kernels(count);
    if (cudaLibraryEnumerateKernels(kernels.data(), count, library) != cudaSuccess) {
      clear_error();
      return {};
    }
    std::string s = " (it has: ";
    for (unsigned i = 0; i < count; ++i) {
      const char* n = nullptr;
      if (cudaFuncGetName(&n, reinterpret_cast<const void*>(kernels[i])) != cudaSuccess) {
        clear_error();
        n = "?";
      }
      s += (i ? ", " : "") + std::string(n);
    }
    return s + ")";
  }
};

}  // namespace

KernelLoader& kernel_loader() {
  static CudaLoader loader;
  return loader;
}

}  // namespace sluice::detail::cuda
