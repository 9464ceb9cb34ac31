#pragma once
/// @file
/// The scalar layer's extension interface (sluice/extension.hpp): a backend's interpreter of
/// scalar programs (sluice/scalar.hpp). For backend authors; users never need it.

#include <cstdint>
#include <memory>
#include <string_view>

#include "sluice/backend.hpp"
#include "sluice/detail/scalar_format.hpp"

namespace sluice {

/// A scalar program ready to run (see sluice/scalar.hpp): `size` instructions, their constants,
/// the device addresses of its inputs, and where its result goes (a value of the last
/// instruction's kind).
struct ScalarProgramView {
  const ScalarInstr* code = nullptr;  ///< owned by `keep_alive`
  std::uint32_t size = 0;
  const ScalarValue* constants = nullptr;  ///< owned by `keep_alive`
  std::uint32_t constant_count = 0;
  void* const* inputs = nullptr;  ///< valid during `ScalarKernels::run` only: copy what you keep
  std::uint32_t input_count = 0;
  void* output = nullptr;
  std::shared_ptr<const void> keep_alive;  ///< keeps `code` and `constants` alive while queued
};

/// A backend's interpreter of scalar programs.
class ScalarKernels {
 public:
  static constexpr std::string_view extension_name = "ScalarKernels";
  /// Registers the host implementation; the cuda module registers its own when it loads.
  static void register_builtins();

  virtual ~ScalarKernels() = default;
  /// Enqueues the whole program on `stream` as one unit of work (one kernel launch on a device),
  /// so that it is one operation and can be captured into a graph. Ordering and tracking are
  /// the caller's; this only enqueues.
  virtual void run(Stream& stream, const ScalarProgramView& program, const OpInfo& op) = 0;
  /// True if the host may read a value written by `run` directly once the work completed
  /// (device memory is host memory); otherwise the scalar layer copies it back.
  [[nodiscard]] virtual bool host_readable() const noexcept { return false; }
};

}  // namespace sluice
