// KernelSpec's setters: they only record where the code is (reading and compiling happen at load).

#include <utility>

#include "sluice/error.hpp"
#include "sluice/kernel.hpp"

namespace sluice {

const char* to_string(KernelFormat format) noexcept {
  switch (format) {
    case KernelFormat::cubin:
      return "cubin";
    case KernelFormat::fatbin:
      return "fatbin";
    case KernelFormat::ptx:
      return "ptx";
    case KernelFormat::cuda_source:
      return "cuda_source";
    case KernelFormat::host:
      return "host";
  }
  return "unknown";
}

KernelSpec::KernelSpec(std::string name, std::optional<std::size_t> arity)
    : name_(std::move(name)), arity_(arity) {
  if (name_.empty()) {
    throw Error(Errc::invalid_argument,
                "KernelSpec: the kernel name is empty; name the kernel "
                "as the module defines it");
  }
}

KernelSpec& KernelSpec::add_ptx_in_memory(std::string ptx) {
  code_.push_back({KernelFormat::ptx, std::move(ptx), {}, 0, {}});
  return *this;
}
KernelSpec& KernelSpec::add_ptx_on_disk(std::filesystem::path path) {
  code_.push_back({KernelFormat::ptx, {}, std::move(path), 0, {}});
  return *this;
}
KernelSpec& KernelSpec::add_cubin_in_memory(std::string cubin, int arch) {
  code_.push_back({KernelFormat::cubin, std::move(cubin), {}, arch, {}});
  return *this;
}
KernelSpec& KernelSpec::add_cubin_on_disk(std::filesystem::path path, int arch) {
  code_.push_back({KernelFormat::cubin, {}, std::move(path), arch, {}});
  return *this;
}
KernelSpec& KernelSpec::add_fatbin_in_memory(std::string fatbin) {
  code_.push_back({KernelFormat::fatbin, std::move(fatbin), {}, 0, {}});
  return *this;
}
KernelSpec& KernelSpec::add_fatbin_on_disk(std::filesystem::path path) {
  code_.push_back({KernelFormat::fatbin, {}, std::move(path), 0, {}});
  return *this;
}
KernelSpec& KernelSpec::add_cuda_source(std::string source, std::vector<std::string> options) {
  code_.push_back({KernelFormat::cuda_source, std::move(source), {}, 0, std::move(options)});
  return *this;
}

}  // namespace sluice
