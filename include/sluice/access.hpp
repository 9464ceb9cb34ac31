#pragma once
/// @file
/// The vocabulary of accesses: how an operation touches which bytes of which tracked object.
/// Graph nodes declare `Use`s, kernels' `read()`/`write()` marks and dataflow accessors become
/// them, and the dependency tracker (sluice/deps.hpp) orders work by them.

#include <cstddef>
#include <cstdint>
#include <limits>

namespace sluice {

/// How an operation touches memory.
enum class Access : std::uint8_t { read, write, read_write };

/// Identifies a tracked object or registered memory region. 0 is "no object".
using ObjectId = std::uint64_t;

/// A byte range [offset, offset + size) of an object; the default is the whole object.
struct ByteRange {
  std::size_t offset = 0;
  std::size_t size = std::numeric_limits<std::size_t>::max();
  [[nodiscard]] static ByteRange whole() { return {}; }
};

/// One access of an operation: which tracked object, which bytes, how. The one vocabulary of
/// accesses: graph nodes declare them, kernels' `read()`/`write()` marks and dataflow accessors
/// become them, and the tracker orders work by them.
struct Use {
  ObjectId id = 0;
  Access mode = Access::read;
  ByteRange range;
};

}  // namespace sluice
