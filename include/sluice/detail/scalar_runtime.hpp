#pragma once
/// @file
/// What the compiled scalar layer (src/scalar/) provides to the header templates of
/// sluice/scalar.hpp: a Managed's shared state, the program builder, and running, reading and
/// checking values.

// Private: only sluice's public headers include this file (they define
// SLUICE_IMPL_PUBLIC_INCLUDE around the include, as Kokkos does for its internals).
#ifndef SLUICE_IMPL_PUBLIC_INCLUDE
#error \
    "sluice/detail/scalar_runtime.hpp is internal to sluice and may change without notice: include <sluice/scalar.hpp> instead"
#endif

#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <string>

#include "sluice/context.hpp"
#include "sluice/detail/scalar_format.hpp"
#include "sluice/memory.hpp"
#include "sluice/platform.hpp"
#include "sluice/scalar/options.hpp"

namespace sluice::detail {

/// The shared state of a Managed: its storage (one value in device memory, tracked) and whether
/// a value was ever written. Programs hold the cells of their inputs, so they read whatever value
/// the Managed holds when they run, and keep that storage alive.
struct ManagedCell {
  RawDeviceBuffer buffer;
  bool assigned = false;
};
using CellPtr = std::shared_ptr<ManagedCell>;

struct CompiledScalar;  // src/scalar/program.hpp
using ProgramPtr = std::shared_ptr<const CompiledScalar>;
using ScalarNode = std::uint32_t;

/// Builds a program from an expression tree: hash-conses nodes (common subexpressions), folds
/// constants and applies rewrites as nodes are added bottom-up.
class ScalarBuilder {
 public:
  explicit ScalarBuilder(const CompileOptions& options);
  ~ScalarBuilder();
  ScalarBuilder(const ScalarBuilder&) = delete;
  ScalarBuilder& operator=(const ScalarBuilder&) = delete;

  ScalarNode constant(ScalarKind kind, const ScalarValue& value);
  /// Throws Error(invalid_state) for a null cell (a moved-from Managed).
  ScalarNode load(const CellPtr& cell, ScalarKind kind);
  ScalarNode op(ScalarOp op, ScalarKind kind, ScalarNode a, ScalarNode b = 0);
  /// A subtree shared by several parents (AnyExpr), built once: its node if built already.
  [[nodiscard]] const ScalarNode* find_shared(const void* key);
  void remember_shared(const void* key, ScalarNode node);
  /// The program computing `root`. Throws Error(unsupported) past the program limits.
  ProgramPtr finish(ScalarNode root);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Runs `program` into `target` on `ctx` (allocating the target's storage on ctx's device if it
/// has none), ordered by the tracker. Throws for misuse before issuing anything.
void scalar_run(const ProgramPtr& program, ManagedCell& target, ScalarKind kind, const Context& ctx,
                std::source_location loc);
/// As scalar_run, on the blocking context of the device the values live on.
void scalar_run_blocking(const ProgramPtr& program, ManagedCell& target, ScalarKind kind,
                         std::source_location loc);
/// Copies the value to `out` once its producer completed.
void scalar_read(const ManagedCell* cell, void* out, ScalarKind kind, std::source_location loc);
/// Gives `cell` storage on ctx's device if it has none; throws if it lives on another device.
void scalar_prepare(ManagedCell& cell, ScalarKind kind, const Context& ctx,
                    std::source_location loc);
/// Throws unless `cell` holds a value on ctx's device.
void scalar_check_read(const ManagedCell* cell, ScalarKind kind, const Context& ctx,
                       std::source_location loc);
[[nodiscard]] std::optional<Device> scalar_device(const ManagedCell* cell);
[[nodiscard]] const ExpressionInfo& scalar_info(const ProgramPtr& program);
[[nodiscard]] std::string scalar_disassemble(const ProgramPtr& program);

}  // namespace sluice::detail
