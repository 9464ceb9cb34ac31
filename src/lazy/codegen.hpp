#pragma once
// Source generation: a kernel (fuse.hpp) as a C++ function over a range of output elements (the
// host's dialect, compiled at run time) or a CUDA kernel over a grid (compiled by NVRTC). Both
// dialects share the element code; they differ in the loop around it and a small prelude.
//
// Sizes, strides and other integers of the index arithmetic are not part of the source: each
// occurrence is a run-time parameter (except 0, 1 and -1), so a new shape with the same structure
// gives the same source and needs no compilation.

#include <cstdint>
#include <string>
#include <vector>

#include "lazy/cuda_shape.hpp"
#include "lazy/fuse.hpp"
#include "sluice/ext/lazy_kernels.hpp"

namespace sluice::lazy::detail {

struct KernelCode {
  std::string name;          // "sl_k3"
  std::string text;          // its argument struct and function
  std::vector<int> buffers;  // lowered nodes bound to b[1..] (b[0] is the output; a multi-output
                             // kernel's further outputs follow these, then the debug error
                             // record, if any)
  std::vector<std::int64_t> params;
  std::int64_t elements = 0;    // output elements (cuda, lanes per output: threads)
  std::int64_t max_blocks = 0;  // cuda: the most blocks worth launching (0: no limit)
  double weight = 1;            // work per element (host chunking)
  bool debug = false;
  // Its buffer slots hold addresses of a binding table's entries, read there (the debug error
  // record's slot excepted): read_slots_through_table.
  bool indirect = false;
  int kernel = -1;    // the fused kernel it computes
  std::string shape;  // cuda: describe(shape) of the kernel's shape (empty on the host)
  std::vector<std::string> candidates;  // cuda, with alternatives: every candidate's shape
  std::vector<double> candidate_us;     // their median times where timed in this process
  std::string choice;                   // "rule", "timed", "memory", "disk" (with alternatives)
  // Horizontal fusion: the kernel computes `members` kernels of this same code at once, member m
  // with the buffer slots [m * buffer_slots(), (m + 1) * buffer_slots()) (`elements` and
  // `max_blocks` count them all; `buffers` are the first member's).
  int members = 1;
  // Outputs per member (multi-output fusion, Kernel::siblings): output 0 in slot 0, output
  // o > 0 in slot buffers.size() + o.
  int outputs = 1;
  [[nodiscard]] std::size_t buffer_slots() const noexcept {
    return static_cast<std::size_t>(outputs) + buffers.size() + (debug ? 1 : 0);
  }
  /// Buffer slots of the argument struct (every member's); the parameters follow them.
  [[nodiscard]] std::size_t all_slots() const noexcept {
    return static_cast<std::size_t>(members) * buffer_slots();
  }
  /// Bytes of the argument struct: the buffer pointers (of every member), then the parameters.
  [[nodiscard]] std::size_t arg_bytes() const noexcept {
    return 8 * (all_slots() + std::max<std::size_t>(params.size(), 1));
  }
};

/// Most buffer slots of a horizontal kernel (all members): 2 KB of addresses, half of what the
/// argument struct of a CUDA kernel has always been allowed.
inline constexpr std::size_t kMaxMemberSlots = 256;

/// Generates kernel `index` of an instance (named sl_k<index><suffix>). On cuda, `shape` is the
/// kernel's shape (null: the size rule's, choose_cuda_shape); the host ignores it.
/// With `members` > 1, a horizontal kernel of that many kernels of the same code (KernelCode).
[[nodiscard]] KernelCode emit_kernel(const Kernel& k, const Lowered& lowered, LazyDialect dialect,
                                     int index, bool debug, const CudaShape* shape = nullptr,
                                     const std::string& suffix = {}, int members = 1);
/// Makes generated kernel `code` read each buffer's address from the table entry its slot points
/// at (a binding table, InstanceDesc::table) instead of from the slot.
void read_slots_through_table(KernelCode& code);
/// Kernel `index` that stores the addresses in its buffer slots 1..count into the buffer of slot
/// 0 (a batched matrix product's lists of operands), one element per address.
[[nodiscard]] KernelCode emit_table(int index, std::int64_t count, LazyDialect dialect);
/// The dialect's prelude (types, math, index checks).
[[nodiscard]] std::string prelude(LazyDialect dialect);
/// A kernel's code as a unit of a module's source (lazy_unit_mark, its name, its text): a
/// backend may compile units apart.
[[nodiscard]] inline std::string unit_text(const KernelCode& c) {
  return std::string(lazy_unit_mark) + c.name + "\n" + c.text;
}

}  // namespace sluice::lazy::detail
