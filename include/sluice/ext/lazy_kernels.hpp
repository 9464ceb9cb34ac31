#pragma once
/// @file
/// The lazy layer's extension interface (sluice/extension.hpp): how a backend builds the source
/// that the lazy layer generates for a program (sluice/lazy.hpp) and turns each kernel of it into
/// the work of a graph's kernel node. For backend authors; users never need it.
///
/// The layer generates one module per program instance in the backend's dialect: C++ for a host
/// backend (extern "C" functions `void name(const void* args, long long lo, long long hi)` that
/// compute output elements [lo, hi)), CUDA C++ for a cuda backend (extern "C" kernels taking their
/// argument struct by value, each thread of a grid-stride loop computing elements). A kernel's
/// argument struct is its buffer addresses (8 bytes each) followed by its 64-bit parameters.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/ext/canned.hpp"
#include "sluice/graph.hpp"
#include "sluice/platform.hpp"

namespace sluice {

/// The source language a backend compiles.
enum class LazyDialect : std::uint8_t { cpp, cuda };

/// A built module: the backend's handle on its compiled kernels.
class LazyModule {
 public:
  virtual ~LazyModule() = default;
};

/// How a module was obtained.
struct LazyBuildInfo {
  std::string origin;  ///< "compiled", "disk" or "memory"
  double ms = 0;       ///< time taken
};

/// Where a kernel's unit starts in a generated source: this mark, the kernel's name, a line
/// end, then its code up to the next mark. The text before the first mark is a prelude that
/// every unit needs; each unit needs nothing of another. A comment, so the whole source also
/// compiles as one.
inline constexpr std::string_view lazy_unit_mark = "\n// sluice unit: ";

/// A buffer of a timed kernel (LazyKernels::time): `bytes` of scratch memory filled as `fill`
/// says (reals with a spread of moderate values, integers with their own index, booleans
/// alternating, `zero` zeroed), or, where `data` is set, that memory read as it is (a program's
/// constant; never written).
struct LazyTimedBuffer {
  enum class Fill : std::uint8_t { zero, real32, real64, int32, int64, boolean } fill = Fill::zero;
  std::size_t bytes = 0;
  const void* data = nullptr;
};

/// Kernels of one module that compute the same output in different shapes, timed on the same
/// buffers: buffer j goes into slot j of each kernel's argument struct (8 bytes each; the rest
/// of `args[k]`, the parameters, is as given).
struct LazyTimedGroup {
  std::vector<LazyTimedBuffer> buffers;
  std::vector<std::size_t> kernels;          ///< indices in the module
  std::vector<std::int64_t> elements;        ///< per kernel, as for `work`
  std::vector<std::int64_t> max_blocks;      ///< per kernel, as for `work`
  std::vector<std::vector<std::byte>> args;  ///< per kernel
};

/// A backend's builder and launcher of generated lazy kernels.
class LazyKernels {
 public:
  static constexpr std::string_view extension_name = "LazyKernels";
  /// Registers the built-in implementations (host, and cuda where built).
  static void register_builtins();

  virtual ~LazyKernels() = default;
  [[nodiscard]] virtual LazyDialect dialect() const noexcept = 0;
  /// Compiles (or finds in a cache) `source`, which holds the kernels `names`, for `device`.
  /// Throws Error with the compiler's log if it does not compile. The layer divides the source
  /// into units (lazy_unit_mark): a backend may compile them apart, and at once.
  [[nodiscard]] virtual std::shared_ptr<const LazyModule> build(const Device& device,
                                                                const std::string& source,
                                                                std::span<const std::string> names,
                                                                LazyBuildInfo& info,
                                                                std::source_location loc) = 0;
  /// The work of a kernel node running kernel `index` of `module` over `elements` output
  /// elements (more than 0) with the argument struct `args`. `weight` is the work per element
  /// relative to a plain element-wise one (a host backend sizes its chunks by it); `max_blocks`
  /// (cuda; 0: none) is the most blocks the kernel uses (a kernel that stages operands in shared
  /// memory lets blocks beyond it leave at once: launching them would cost for nothing).
  [[nodiscard]] virtual KernelWork work(const std::shared_ptr<const LazyModule>& module,
                                        std::size_t index, std::int64_t elements, double weight,
                                        std::int64_t max_blocks,
                                        std::span<const std::byte> args) = 0;
  /// A matrix product as the work of a kernel node through the backend's BLAS, or nothing when
  /// its BLAS cannot be a node whose addresses change in place (the layer then generates a
  /// kernel). The default has none.
  [[nodiscard]] virtual std::optional<KernelWork> gemm(const BlasGemmArgs& args) {
    (void)args;
    return std::nullopt;
  }
  /// A matrix product as one operation recorded by the backend, for a backend whose BLAS cannot
  /// be a kernel node (`gemm` gives nothing): its format is that of `ir::Captured`
  /// (sluice/ext/graph_ir.hpp), the layer makes it a captured node and, when a binding changes
  /// the product's addresses, records it again and updates the node in place (the recording must
  /// then have the same topology: the same sizes give the same). The default has none.
  [[nodiscard]] virtual std::shared_ptr<void> gemm_recording(const Device& device,
                                                             const BlasGemmArgs& args,
                                                             std::source_location loc) {
    (void)device, (void)args, (void)loc;
    return nullptr;
  }
  /// A batch of `args.batch` matrix products of the sizes and type of `args` whose operands are
  /// listed in memory of the device at `table`: the batch's A addresses, then its B addresses,
  /// then its C addresses (written there by an earlier node of the same graph; args.a, b, c and
  /// the strides are not used). As a kernel node's work, or nothing (then
  /// `gemm_table_recording`). The default has none.
  [[nodiscard]] virtual std::optional<KernelWork> gemm_table(const BlasGemmArgs& args,
                                                             const void* table) {
    (void)args, (void)table;
    return std::nullopt;
  }
  /// The same batch as one recorded operation (as `gemm_recording`). The default has none.
  [[nodiscard]] virtual std::shared_ptr<void> gemm_table_recording(const Device& device,
                                                                   const BlasGemmArgs& args,
                                                                   const void* table,
                                                                   std::source_location loc) {
    (void)device, (void)args, (void)table, (void)loc;
    return nullptr;
  }
  /// True if `gemm_table` or `gemm_table_recording` gives work (the layer then batches
  /// independent products of the same sizes).
  [[nodiscard]] virtual bool has_gemm_table() const noexcept { return false; }
  /// True if `gemm` or `gemm_recording` gives work (the layer then keeps matrix products for it).
  [[nodiscard]] virtual bool has_gemm() const noexcept { return false; }
  /// Whether a product of these sizes is worth a BLAS call rather than a generated kernel (which
  /// may fuse its producers and readers), under `Gemm::automatic`. The default: always.
  [[nodiscard]] virtual bool gemm_pays(std::int64_t m, std::int64_t n, std::int64_t k,
                                       std::int64_t batch) const noexcept {
    (void)m, (void)n, (void)k, (void)batch;
    return true;
  }
  /// Times every kernel of every group on scratch buffers, each launched as `work` launches it:
  /// one warm-up launch each, then `reps` rounds in which each kernel of a group runs once.
  /// Result [group][kernel][round] in milliseconds. A backend whose kernels have no alternative
  /// shapes returns nothing (the default).
  [[nodiscard]] virtual std::vector<std::vector<std::vector<double>>> time(
      const Device& device, const std::shared_ptr<const LazyModule>& module,
      std::span<const LazyTimedGroup> groups, int reps, std::source_location loc) {
    (void)device, (void)module, (void)groups, (void)reps, (void)loc;
    return {};
  }
  /// Forgets the modules cached in memory (a later build reads the disk cache).
  virtual void forget_memory() {}
};

}  // namespace sluice
