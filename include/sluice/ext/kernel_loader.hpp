#pragma once
/// @file
/// The kernel layer's extension interface (sluice/extension.hpp): how a backend loads a
/// `KernelSpec` and launches what it loaded (sluice/kernel.hpp). For backend authors; users
/// never need it.

#include <cstddef>
#include <memory>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/backend.hpp"
#include "sluice/kernel.hpp"

namespace sluice {

/// A kernel loaded for one device by a backend's `KernelLoader`.
class LoadedKernel {
 public:
  LoadedKernel(Device device, std::string name, KernelFormat format,
               std::vector<std::size_t> param_sizes)
      : device_(std::move(device)),
        name_(std::move(name)),
        op_name_("kernel " + name_),
        format_(format),
        param_sizes_(std::move(param_sizes)) {}
  virtual ~LoadedKernel() = default;
  LoadedKernel(const LoadedKernel&) = delete;
  LoadedKernel& operator=(const LoadedKernel&) = delete;

  /// Enqueues one launch on `stream` (a stream of `device()`). `args[i]` points at parameter
  /// i's value, valid during the call only: a backend copies what it keeps.
  virtual void launch(Stream& stream, const Dims& grid, const Block& block, void** args,
                      const OpInfo& op) const = 0;

  [[nodiscard]] const Device& device() const noexcept { return device_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// "kernel <name>": what errors call a launch of it.
  [[nodiscard]] const std::string& op_name() const noexcept { return op_name_; }
  [[nodiscard]] KernelFormat format() const noexcept { return format_; }
  [[nodiscard]] const std::vector<std::size_t>& param_sizes() const noexcept {
    return param_sizes_;
  }

 private:
  Device device_;
  std::string name_;
  std::string op_name_;
  KernelFormat format_;
  std::vector<std::size_t> param_sizes_;
};

/// A backend's kernel loader: picks the code of a spec that fits a device, loads it and checks
/// it against the typed signature. Every mismatch is an Error here, never at launch.
class KernelLoader {
 public:
  static constexpr std::string_view extension_name = "KernelLoader";
  /// Registers the host loader; the cuda module registers its own when it loads.
  static void register_builtins();

  virtual ~KernelLoader() = default;
  [[nodiscard]] virtual std::shared_ptr<const LoadedKernel> load(
      const Device& device, const KernelSpec& spec, const detail::KernelSignature& signature,
      std::source_location loc) = 0;
};

namespace detail {
/// Throws Error(invalid_argument) when a module's parameter sizes (`found`, as the module
/// reports them) differ from the signature's or from the spec's arity. `where` names the code,
/// e.g. "PTX in memory".
void check_parameters(const KernelSpec& spec, const KernelSignature& signature,
                      const std::vector<std::size_t>& found, std::string_view where,
                      std::source_location loc);
}  // namespace detail

}  // namespace sluice
