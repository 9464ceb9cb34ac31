#pragma once
// The shape of a generated cuda reduction kernel, chosen from the instance's shapes when it is
// planned (the choice changes the source; the sizes stay run-time parameters):
//
// - Staged operands: a small buffer that many outputs read (an einsum's operator: the DG
//   differentiation, lifting and mass matrices, the wide DAG's M) is copied once per block into
//   shared memory, with every stride but the last made odd so that 32 consecutive indices along
//   any one axis fall in distinct banks. Reading it per term then costs no global traffic and no
//   uncoalesced L1 sectors (a thread per output reads the operator's rows 8·Np bytes apart).
// - Grouped outputs: when the reduction is long and runs along the contiguous axis of what it
//   reads while consecutive outputs do not (a sum over the last axis), G lanes of a warp share
//   an output: lane l sums terms l, l + G, ... (coalesced loads), then a warp shuffle combines.
// - Register tiles (Kernel::tile, chosen by fusion under Options::tile): a thread computes T
//   consecutive outputs of the last axis (an element's nodes i), T accumulators in registers;
//   what does not depend on that axis (the element's values, geometric factors, fused face
//   fluxes) is loaded and computed once per term for all T, only the operator's row is read per
//   output (from shared memory when staged).
//
// The size rule (choose_cuda_shape) is one guess; cuda_shape_candidates lists every valid shape
// of a kernel (the rule's first) so that the layer can time them on the device and keep the
// fastest (tune.hpp).

#include <cstdint>
#include <string>
#include <vector>

#include "lazy/fuse.hpp"

namespace sluice::lazy::detail {

/// Thresholds of the choice (tests force the new shapes onto small random programs).
struct CudaShapeRules {
  std::int64_t stage_bytes = 44 * 1024;  // shared memory for staged operands per block (static)
  std::int64_t stage_reuse = 8;          // staged only if terms evaluated >= reuse x its elements
  std::int64_t group_terms = 32;         // grouped only with at least this many terms per output
  bool force_group = false;              // group every eligible reduction (tests)
};
/// The process's rules (tests may change them; codegen reads them once per kernel).
CudaShapeRules& cuda_shape_rules() noexcept;

struct StagedBuffer {
  int read = -1;                      // index in Kernel::reads
  std::vector<std::int64_t> strides;  // padded strides, in elements
  std::int64_t capacity = 0;          // elements of the shared array (a multiple of 1024)
};

struct CudaShape {
  std::vector<StagedBuffer> staged;
  int group = 1;  // lanes per output (1: a thread per output)
  int tile = 1;   // outputs of the last axis per thread (1: one; never with lanes)
  friend bool operator==(const CudaShape& a, const CudaShape& b) {
    if (a.group != b.group || a.tile != b.tile || a.staged.size() != b.staged.size()) return false;
    for (std::size_t i = 0; i < a.staged.size(); ++i) {
      if (a.staged[i].read != b.staged[i].read) return false;
    }
    return true;
  }
};

/// The shape of kernel `k` by the size rule (a reduction; other kernels get the default).
[[nodiscard]] CudaShape choose_cuda_shape(const Kernel& k, const Lowered& lowered);

/// Every shape worth timing for kernel `k`, the size rule's first, no two alike: the operands
/// staged as the rule stages them, every operand that fits staged (reused at least twice), or
/// none; each with a thread per output or, for reductions of at least 8 terms, lanes per output,
/// and for a kernel fused for register tiles (Kernel::tile) also tiled.
/// One element (the rule's) when there is no alternative (element-wise kernels, short sums).
[[nodiscard]] std::vector<CudaShape> cuda_shape_candidates(const Kernel& k, const Lowered& lowered);

/// "thread", "staged(b2)", "lanes16", "staged(b1,b2)+lanes8", "staged(b3)+tile7": what the shape
/// is, for the
/// generated source and the program's introspection (b<j> is the kernel's buffer j).
[[nodiscard]] std::string describe(const CudaShape& shape);

}  // namespace sluice::lazy::detail
