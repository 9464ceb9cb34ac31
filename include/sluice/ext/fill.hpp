#pragma once
/// @file
/// The memory layer's typed fill as an extension (sluice/extension.hpp): setting elements to a
/// pattern of any size, which a backend's byte-wise memset cannot do. For backend authors; users
/// call `sluice::fill` (sluice/memory.hpp) or the dataflow layer's `fill`.

#include <cstddef>
#include <string_view>

#include "sluice/backend.hpp"

namespace sluice {

/// Sets `count[0]` contiguous elements of `elem` bytes at `dst` to `pattern`, repeated
/// `count[1]` times `pitch[1]` bytes apart, that repeated `count[2]` times `pitch[2]` bytes apart.
struct FillArgs {
  static constexpr std::size_t kMaxPattern = 128;
  void* dst = nullptr;
  std::size_t elem = 1;
  std::size_t count[3] = {0, 1, 1};
  std::size_t pitch[3] = {0, 0, 0};
  alignas(16) unsigned char pattern[kMaxPattern] = {};
};

/// A backend's fill: one operation on `stream`, never blocking the host.
class Fill {
 public:
  static constexpr std::string_view extension_name = "Fill";
  static void register_builtins();
  virtual ~Fill() = default;
  virtual void fill(Stream& stream, const FillArgs& args, const OpInfo& op) = 0;
};

}  // namespace sluice
