#pragma once
// Lowering: the user's DAG, with the shapes of one instance, into lowered nodes that are each a
// buffer (a placeholder or constant), an element expression over the output's index variables (a
// "lambda": element-wise work, broadcasts, gathers, slices, reshapes, ...) or a reduction of one
// over more variables (sums, products, extrema, einsum). Every array read is a load at index
// expressions, so fusion is substitution (fuse.hpp).

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lazy/ir.hpp"

namespace sluice::lazy::detail {

struct LNode {
  enum class Kind : std::uint8_t { buffer, lambda, reduce } kind = Kind::lambda;
  DType dtype = DType::f64;
  Shape shape;
  ExPtr body;  // lambda: over vars [0, rank); reduce: [0, rank) then the reduction's vars
  ReduceOp rop = ReduceOp::sum;
  Shape red;          // reduce: extents of the reduction's vars
  int node = -1;      // the user node it stands for (-1: the first stage of a split reduction)
  bool fill = false;  // a lambda whose body is a literal
};

/// Where an index is checked (debug mode): the message names the operation and the axis.
struct Site {
  int node = -1;
  std::string what;  // "take (file.cpp:12), axis 0"
};

struct Lowered {
  std::vector<LNode> nodes;  // in topological order
  std::vector<int> of_node;  // user node (program order) -> its lowered node
  std::vector<Site> sites;
};

/// Lowers `order` (the program's nodes, operands first) with `shapes` (one per node).
/// `split_reductions`: reductions with few outputs and many terms become two stages.
/// `broadcast_sum`: where einsums sum a letter under which an operand is broadcast.
/// `tiles`: reductions will be register-tiled (fuse.hpp): an einsum is contracted pairwise only
/// where that costs less than its one tiled loop nest.
[[nodiscard]] Lowered lower(std::span<const NodePtr> order, std::span<const Shape> shapes,
                            bool split_reductions,
                            BroadcastSum broadcast_sum = BroadcastSum::automatic,
                            bool tiles = false);

/// The register tile of a reduction of `shape`: consecutive outputs of the last axis per thread,
/// at most 8 and as even as the axis allows (Np = 4: 4, 10: 5, 20 and 35: 7); 1 where the axis is
/// shorter than 2 or longer than 64, or the type is bool.
[[nodiscard]] int tile_width(const Shape& shape, DType t);

/// The reduction's identity as a literal of `t`.
[[nodiscard]] ExPtr reduce_identity(ReduceOp op, DType t);

}  // namespace sluice::lazy::detail
