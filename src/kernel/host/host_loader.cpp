#include "kernel/host/host_loader.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <typeindex>
#include <vector>

#include "backends/host/host_parallel.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::host {
namespace {

/// "<float, float*>" for typeid(std::tuple<float, float*>) (demangled where the ABI allows).
std::string type_list(std::type_index t) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(t.name(), nullptr, nullptr, &status), std::free);
  std::string s = status == 0 && name ? name.get() : t.name();
  if (const auto open = s.find('<'); open != std::string::npos) s.erase(0, open);
  if (s == "std::tuple" || s.empty()) return "<>";
  return s;
}

// Indices per chunk of the pool: enough work per chunk to pay for handing it out.
constexpr std::size_t kChunkIndices = 4096;

class HostKernel final : public LoadedKernel {
 public:
  HostKernel(Device device, const KernelSpec& spec, std::vector<std::size_t> sizes)
      : LoadedKernel(std::move(device), spec.name(), KernelFormat::host, std::move(sizes)) {
    auto layout = std::make_shared<Layout>();
    layout->fn = *spec.host();
    std::size_t offset = 0;
    for (std::size_t size : param_sizes()) {
      layout->offsets.push_back(offset);
      offset += (size + kAlign - 1) / kAlign * kAlign;
    }
    blob_words_ = offset / kAlign;
    layout_ = std::move(layout);
  }

  void launch(Stream& stream, const Dims& grid, const Block& block, void** args,
              const OpInfo& op) const override {
    // The arguments travel with the operation: the caller's values are gone when it runs.
    auto blob =
        std::make_shared<std::vector<std::max_align_t>>(std::max<std::size_t>(blob_words_, 1));
    auto* base = reinterpret_cast<std::byte*>(blob->data());
    const auto& offsets = layout_->offsets;
    for (std::size_t i = 0; i < offsets.size(); ++i) {
      std::memcpy(base + offsets[i], args[i], param_sizes()[i]);
    }
    const std::size_t n = grid.count() * block.count();
    // The layout is shared, not borrowed: the kernel's last handle may go before the task runs.
    stream.host_task(
        [layout = layout_, blob = std::move(blob), n, grid_dims = Dims(grid),
         block_dims = Dims(block)] {
          const HostKernelFn& fn = layout->fn;
          auto* b = reinterpret_cast<std::byte*>(blob->data());
          std::vector<void*> pointers(layout->offsets.size());
          for (std::size_t i = 0; i < pointers.size(); ++i) pointers[i] = b + layout->offsets[i];
          const std::size_t chunks = (n + kChunkIndices - 1) / kChunkIndices;
          auto body = [&](std::size_t c) {
            std::size_t begin = c * kChunkIndices;
            fn.run(fn.fn.get(), begin, std::min(n, begin + kChunkIndices), pointers.data(),
                   grid_dims, block_dims);
          };
          parallel_chunks(chunks, body);
        },
        op);
  }

 private:
  static constexpr std::size_t kAlign = alignof(std::max_align_t);
  struct Layout {
    HostKernelFn fn;
    std::vector<std::size_t> offsets;  // of each parameter in the argument blob
  };
  std::shared_ptr<const Layout> layout_;
  std::size_t blob_words_ = 0;
};

class HostLoader final : public KernelLoader {
 public:
  std::shared_ptr<const LoadedKernel> load(const Device& device, const KernelSpec& spec,
                                           const KernelSignature& signature,
                                           std::source_location loc) override {
    const auto& host = spec.host();
    if (!host) {
      std::string formats;
      for (const auto& c : spec.code())
        formats += std::string(formats.empty() ? "" : ", ") + to_string(c.format);
      throw Error(Errc::unsupported,
                  "kernel " + spec.name() + ": the spec has no host implementation (it holds " +
                      (formats.empty() ? std::string("nothing") : formats) +
                      "), so it cannot run on " + device.to_string() +
                      "; add one with KernelSpec::add_host<Args...>(f)",
                  loc);
    }
    if (host->signature != signature.args) {
      throw Error(Errc::invalid_argument,
                  "kernel " + spec.name() + " (host implementation): add_host" +
                      type_list(host->signature) +
                      " was given other parameter types than the "
                      "TypedKernel" +
                      type_list(signature.args) + "; make both list the kernel's parameter types",
                  loc);
    }
    std::vector<std::size_t> sizes(signature.sizes.begin(), signature.sizes.end());
    check_parameters(spec, signature, sizes, "host implementation", loc);
    return std::make_shared<HostKernel>(device, spec, std::move(sizes));
  }
};

}  // namespace

KernelLoader& kernel_loader() {
  static HostLoader loader;
  return loader;
}

}  // namespace sluice::detail::host
