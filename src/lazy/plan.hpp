#pragma once
// An instance of a program for one set of input shapes on one device: lowered, fused, generated
// and built once; its steps (kernels, BLAS calls, copies, the debug check), their order and the
// buffers they use, with temporaries shared by liveness.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lazy/codegen.hpp"
#include "lazy/fuse.hpp"
#include "sluice/graph.hpp"

namespace sluice::lazy::detail {

/// A buffer the steps use.
struct Buf {
  enum class Role : std::uint8_t { placeholder, constant, temp, output } role;
  int index =
      -1;  // placeholder: which; constant: the user node; temp: physical temp; output: which
  std::size_t bytes = 0;
};

struct Step {
  enum class Kind : std::uint8_t { kernel, gemm, copy, check } kind = Kind::kernel;
  int kernel = -1;         // fused kernel
  int code = -1;           // kernel: generated code
  std::vector<int> reads;  // bufs
  int writes = -1;         // buf
  std::vector<int> after;  // steps it runs after
  std::string name;
};

struct InstanceDesc {
  std::vector<Shape> shapes;  // per user node (program order)
  Lowered lowered;
  Fused fused;
  std::vector<KernelCode> codes;
  std::string source;
  std::vector<Buf> bufs;
  std::vector<int> buf_of;              // per lowered node (-1: not materialized)
  std::vector<std::size_t> temp_bytes;  // per physical temporary
  std::vector<Step> steps;
  std::size_t width = 0;  // most kernel steps that may run at once
  double codegen_ms = 0;
};

struct PlanInput {
  std::span<const NodePtr> order;     // the program's nodes, operands first
  std::span<const int> placeholders;  // their positions in order
  std::span<const int> outputs;       // positions of the outputs in order
  std::span<const Shape> shapes;      // per node
  Fusion fusion = Fusion::full;
  Schedule schedule = Schedule::dataflow;
  bool debug = false;
  LazyDialect dialect = LazyDialect::cpp;
  /// Which matrix products the backend's BLAS does (empty: none).
  GemmRule gemm;
  BroadcastSum broadcast_sum = BroadcastSum::automatic;
};

/// Lowers, fuses, generates and plans one instance (no device work).
[[nodiscard]] InstanceDesc plan_instance(const PlanInput& in);
/// The module source of `d`'s kernel codes (after a code was generated again in another shape).
[[nodiscard]] std::string assemble_source(const InstanceDesc& d, LazyDialect dialect);

}  // namespace sluice::lazy::detail
