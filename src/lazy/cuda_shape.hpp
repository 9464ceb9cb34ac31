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

#include <cstdint>
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
};

/// The shape of kernel `k` (a reduction; other kernels get the default).
[[nodiscard]] CudaShape choose_cuda_shape(const Kernel& k, const Lowered& lowered);

}  // namespace sluice::lazy::detail
