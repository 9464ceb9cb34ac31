#pragma once
// Fusion: which lowered nodes get a buffer of their own, and the kernels that compute them.
// A lowered node that is not materialized is substituted into each of its readers (its body at
// their load's indices), so element-wise work, broadcasts and gathers fuse into the kernel that
// reads them; a reduction's element-wise producers fuse into its loop; a reduction read only by
// one element-wise kernel at its own indices becomes that kernel's epilogue.

#include <cstdint>
#include <functional>
#include <vector>

#include "lazy/lower.hpp"

namespace sluice::lazy::detail {

/// A matrix product done by the backend's BLAS (column-major, as BLAS sees the row-major data).
struct GemmPlan {
  int a = -1, b = -1;  // lowered nodes read as A and B (C is the kernel's output)
  bool trans_a = false, trans_b = false;
  std::int64_t m = 1, n = 1, k = 1, lda = 1, ldb = 1, ldc = 1;
  std::int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};

struct Kernel {
  enum class Kind : std::uint8_t { map, reduce, gemm, copy } kind = Kind::map;
  int out = -1;  // the lowered node whose buffer it writes
  DType dtype = DType::f64;
  Shape shape;
  ExPtr body;  // map: over the output's vars; reduce: then the reduction's vars
  ReduceOp rop = ReduceOp::sum;
  Shape red;
  ExPtr epilogue;          // reduce: the value stored, in terms of `acc` (null: acc itself)
  std::vector<int> reads;  // lowered nodes read (all materialized), in order of first load
  std::vector<int> parts;  // lowered nodes it computes (inlined ones included)
  GemmPlan gemm;
  int copy_from = -1;  // copy: the lowered node copied
  // reduce: outputs along the last axis computed by one cuda thread (register tiles,
  // Options::tile); 1: one each. Fusion counted its readers' evaluations per tile.
  int tile = 1;
  // Further outputs computed in the same loop nest (multi-output fusion, merge_siblings): each
  // one's lowered node and body over the same variables; in a reduction, a sibling that is a
  // reduction too (`reduce`) sums its body over the same `red` with `rop`, the others are
  // element values. `reads` and `parts` cover them.
  struct Sibling {
    int out = -1;
    ExPtr body;
    bool reduce = false;
    ReduceOp rop = ReduceOp::sum;
  };
  std::vector<Sibling> siblings;
  /// Every lowered node it writes: `out`, then the siblings'.
  [[nodiscard]] std::vector<int> outputs() const {
    std::vector<int> o{out};
    for (const auto& s : siblings) o.push_back(s.out);
    return o;
  }
};

struct Fused {
  std::vector<bool> materialized;  // per lowered node
  std::vector<Kernel> kernels;     // in topological order
};

/// Whether a matrix product goes through the backend's BLAS (empty: none does).
using GemmRule = std::function<bool(const GemmPlan&)>;

/// `outputs`: lowered nodes that must be materialized (the program's outputs). With `tile`,
/// reductions that read something independent of their last output axis are tiled along it
/// (Kernel::tile) and fusion counts their reads of such operands once per tile.
[[nodiscard]] Fused fuse(const Lowered& lowered, const std::vector<bool>& outputs, Fusion mode,
                         const GemmRule& gemm, bool tile = false);

/// Multi-output fusion (Options::multi_output): kernels over the same domain (output shape) that
/// share a materialized input and are not ordered (neither reads, directly or through other
/// kernels, what the other writes) become one kernel with several outputs (Kernel::siblings), so
/// that what they share is loaded once per element and one launch does the pass. Element-wise
/// kernels merge, and so do short reductions (fewer than 8 terms, no epilogue, no register tiles:
/// the DG normal fluxes' sum over x) with the same reduction extents, element-wise kernels joining
/// them; a kernel that reads an element-wise member's output at its own indices only joins too
/// (the load becomes the value computed in the same iteration) when nothing else orders them.
/// Merging only such kernels keeps the kernel DAG acyclic; the kernels stay in topological order.
/// Returns how many kernels multi-output kernels compute (each one's outputs: 0 when none merged).
std::size_t merge_siblings(Fused& fused, const Lowered& lowered);

/// The lowered nodes a kernel's bodies load (its siblings' too), in order of first load.
[[nodiscard]] std::vector<int> kernel_reads(const Kernel& k);

}  // namespace sluice::lazy::detail
