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
  // table: the binding table (InstanceDesc::table), memory of its own
  enum class Role : std::uint8_t { placeholder, constant, temp, output, table } role;
  int index =
      -1;  // placeholder: which; constant: the user node; temp: physical temp; output: which
  std::size_t bytes = 0;
};

struct Step {
  // table: writes the addresses of `addresses` into its buffer (a batched gemm's operand lists,
  // or the binding table: every buffer's address, then the products' operand lists)
  enum class Kind : std::uint8_t { kernel, gemm, table, copy, check } kind = Kind::kernel;
  int kernel = -1;           // fused kernel (the first member)
  std::vector<int> members;  // kernel, gemm: the fused kernels it computes (several: horizontal)
  int code = -1;             // kernel, table: generated code
  // bufs read: a kernel's per member in order (member m: [m * R, (m + 1) * R)); a batched gemm's
  // A and B of each member, then the table
  std::vector<int> reads;
  // bufs written: each member's outputs in order (member m: [m * O, (m + 1) * O), O outputs per
  // member, several for a multi-output kernel); table, copy: one
  std::vector<int> writes;
  std::vector<int> addresses;  // table: bufs whose addresses it stores (no access to them)
  std::vector<int> after;      // steps it runs after
  // gemm under a binding table: its operand lists (A's, B's, C's) start at this entry of the
  // table (a batched call, of one product where it stands alone); a binding table's step: the
  // first entry it writes
  int list = -1;
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
  std::size_t width = 0;     // most kernel steps that may run at once
  std::size_t merged = 0;    // kernels computed by horizontal kernels (horizontal fusion)
  std::size_t batched = 0;   // matrix products computed by batched calls
  std::size_t tiled = 0;     // reductions fused and generated for register tiles (Options::tile)
  std::size_t siblings = 0;  // kernels computed by multi-output kernels (Options::multi_output)
  // The binding table's buffer (-1: none; Binding::table): the first steps write buffer b's
  // address into entry b (b < table), then the operand lists; generated kernels are made to read
  // their buffers there (read_slots_through_table) once their shapes are chosen.
  int table = -1;
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
  /// Register tiles of reductions (Options::tile, resolved: automatic tiles on cuda only).
  Tile tile = Tile::automatic;
  /// Horizontal fusion: independent kernels of the same code become one kernel over their
  /// members; independent matrix products of the same sizes one batched call (with `gemm_table`,
  /// the backend's batched BLAS over lists of operand addresses).
  bool horizontal = true;
  bool gemm_table = false;
  /// Multi-output fusion (merge_siblings; not with Fusion::none, one kernel per operation).
  bool multi_output = true;
  /// Options::binding, resolved but for `automatic` (decided here by the bytes bound).
  Binding binding = Binding::arguments;
};

/// Under Binding::automatic, a binding table where a rebinding of every input and output would
/// otherwise set this many graph nodes or more, or record a cuBLAS product again (10-15 us each).
/// On an H100 (2026-11-27) a fused DG right-hand side's rebinding added 6.5-11.5 us with
/// arguments and 5.5-12.3 with the table, whose first node cost 1-5 % per run at full size (up
/// to 33 % at 1/8): it keeps arguments (at most 14 kernels).
inline constexpr std::size_t kTableFromNodes = 16;
/// The most steps that write a binding table (kMaxMemberSlots entries each).
inline constexpr std::size_t kMaxTableSteps = 16;

/// The kernels of `d` read their buffers through its binding table (if it has one): after the
/// kernels' shapes are chosen (tune_instance generates them anew).
void finish_binding(InstanceDesc& d, LazyDialect dialect);

/// Lowers, fuses, generates and plans one instance (no device work).
[[nodiscard]] InstanceDesc plan_instance(const PlanInput& in);
/// The module source of `d`'s kernel codes (after a code was generated again in another shape).
[[nodiscard]] std::string assemble_source(const InstanceDesc& d, LazyDialect dialect);

}  // namespace sluice::lazy::detail
