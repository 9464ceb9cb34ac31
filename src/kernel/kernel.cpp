// Loading a spec through the device's backend's KernelLoader, and launching a loaded kernel as
// one operation of a context (tracked when it has marked arguments).

#include <array>
#include <string>
#include <vector>

#include "core/context_impl.hpp"
#include "deps/issue.hpp"
#include "kernel/host/host_loader.hpp"
#include "sluice/error.hpp"
#include "sluice/ext/kernel_loader.hpp"
#include "sluice/extension.hpp"

namespace sluice {

namespace {
template <class T>
std::shared_ptr<T> unowned(T& k) {  // the built-ins are process-lifetime statics
  return {std::shared_ptr<void>(), &k};
}
}  // namespace

void KernelLoader::register_builtins() {
  register_extension<KernelLoader>("host", unowned<KernelLoader>(detail::host::kernel_loader()));
}

namespace detail {

std::size_t checked_range(std::size_t size, std::size_t first, std::size_t count,
                          std::source_location loc) {
  if (first > size || count > size - first) {
    throw Error(Errc::invalid_argument,
                "kernel argument: elements [" + std::to_string(first) + ", " +
                    std::to_string(first) + " + " + std::to_string(count) +
                    ") lie outside a buffer of " + std::to_string(size) + " elements",
                loc);
  }
  return count;
}

void check_parameters(const KernelSpec& spec, const KernelSignature& signature,
                      const std::vector<std::size_t>& found, std::string_view where,
                      std::source_location loc) {
  auto list = [](auto sizes) {
    std::string s = "(";
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      s += (i ? ", " : "") + std::to_string(sizes[i]);
    }
    return s + ")";
  };
  const std::string head = "kernel " + spec.name() + " (" + std::string(where) + "): ";
  if (spec.arity() && *spec.arity() != found.size()) {
    throw Error(Errc::invalid_argument,
                head + "the spec says " + std::to_string(*spec.arity()) +
                    " parameters, the module's kernel takes " + std::to_string(found.size()),
                loc);
  }
  if (found.size() != signature.sizes.size()) {
    throw Error(Errc::invalid_argument,
                head + "the module's kernel takes " + std::to_string(found.size()) +
                    " parameters, the TypedKernel declares " +
                    std::to_string(signature.sizes.size()) +
                    ": make TypedKernel<...> list the kernel's parameter types",
                loc);
  }
  for (std::size_t i = 0; i < found.size(); ++i) {
    if (found[i] != signature.sizes[i]) {
      throw Error(Errc::invalid_argument,
                  head + "parameter " + std::to_string(i) + " is " + std::to_string(found[i]) +
                      " bytes in the module but " + std::to_string(signature.sizes[i]) +
                      " bytes in the TypedKernel (module sizes " + list(found) +
                      ", TypedKernel sizes " + list(signature.sizes) + ")",
                  loc);
    }
  }
}

std::shared_ptr<const LoadedKernel> load_kernel(const Device& device, const KernelSpec& spec,
                                                const KernelSignature& signature,
                                                std::source_location loc) {
  (void)device_info(device);  // throws no_device, naming the device, if it does not exist
  return extension<KernelLoader>(device.backend, loc).load(device, spec, signature, loc);
}

void launch_kernel(const Context& ctx, const LoadedKernel* kernel, const Grid& grid,
                   const Block& block, void** args, std::span<const Use> accesses) {
  if (kernel == nullptr) {
    throw Error(Errc::invalid_state,
                "kernel launch: the TypedKernel is not loaded; construct it from a KernelSpec "
                "and a device first",
                grid.where);
  }
  auto& c = ctx.impl();
  if (kernel->device() != c.device()) [[unlikely]] {
    throw Error(Errc::invalid_argument,
                "kernel " + kernel->name() + " was loaded for " + kernel->device().to_string() +
                    " but launched on context '" + c.name() + "' of " + c.device().to_string() +
                    ": load it for that device too (TypedKernel(ctx, spec))",
                grid.where);
  }
  if (grid.count() == 0 || block.count() == 0) {
    throw Error(Errc::invalid_argument,
                "kernel " + kernel->name() + ": grid and block dimensions must all be >= 1",
                grid.where);
  }
  AccessList list;
  for (const auto& a : accesses) list.add(a);
  issue_tracked(c, list, kernel->op_name(), grid.where,
                [&](Stream& s, const OpInfo& op) { kernel->launch(s, grid, block, args, op); });
}

const Device& kernel_device(const LoadedKernel& k) noexcept {
  return k.device();
}
const std::string& kernel_name(const LoadedKernel& k) noexcept {
  return k.name();
}
KernelFormat kernel_format(const LoadedKernel& k) noexcept {
  return k.format();
}

}  // namespace detail
}  // namespace sluice
