#pragma once
// Shape rules shared by the DAG's checks (node.cpp) and lowering (lower.cpp): broadcasting,
// axes, slices, NumPy indexing and einsum specs.

#include <cstdint>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <vector>

#include "lazy/ir.hpp"

namespace sluice::lazy::detail {

/// Throws Error(invalid_argument) "<what>: <message>" at `where`.
[[noreturn]] void shape_error(const std::string& what, const std::string& message,
                              std::source_location where);

/// NumPy broadcasting of several shapes; `what` names the operation in the error.
[[nodiscard]] Shape broadcast_shapes(std::span<const Shape> shapes, const std::string& what,
                                     std::source_location where);
/// An axis in [-rank, rank) made non-negative.
[[nodiscard]] int normalize_axis(int axis, std::size_t rank, const std::string& what,
                                 std::source_location where);

/// A slice resolved against an extent: first index, step and length.
struct ResolvedSlice {
  std::int64_t start = 0, step = 1, length = 0;
};
[[nodiscard]] ResolvedSlice resolve_slice(const Slice& s, std::int64_t extent,
                                          const std::string& what, std::source_location where);

/// NumPy indexing resolved against shapes.
struct IndexPlan {
  struct Axis {  // one axis of the indexed array
    enum class Kind : std::uint8_t { slice, integer, advanced } kind = Kind::slice;
    ResolvedSlice slice;
    int out_axis = -1;       // slice: the output axis it spans
    std::int64_t value = 0;  // integer (wrapped into range)
    int array = -1;          // advanced: which index array (position in the index arrays)
  };
  std::vector<Axis> axes;  // one per axis of the indexed array
  Shape out;
  Shape advanced;           // broadcast shape of the index arrays (empty if none)
  int advanced_first = -1;  // first output axis of the advanced block (-1 if none)
};
/// `a_shape` indexed by `items`, whose array items have shapes `array_shapes` (in order).
[[nodiscard]] IndexPlan plan_index(const Shape& a_shape, std::span<const IndexItem> items,
                                   std::span<const Shape> array_shapes, const std::string& what,
                                   std::source_location where);

/// Parses "ab,bc->ac" for `operands` operands of the given ranks.
[[nodiscard]] EinsumSpec parse_einsum(std::string_view spec, std::span<const Shape> shapes,
                                      std::source_location where);
/// Extent of every letter ('a'..'z', 'A'..'Z' as index 0..51), checked for agreement.
[[nodiscard]] std::vector<std::int64_t> einsum_extents(const EinsumSpec& spec,
                                                       std::span<const Shape> shapes,
                                                       const std::string& what,
                                                       std::source_location where);
[[nodiscard]] int letter_index(char c) noexcept;

}  // namespace sluice::lazy::detail
