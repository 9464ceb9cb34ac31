#pragma once
/// @file
/// How a command group touches a buffer: sluice's one vocabulary of access modes
/// (`sluice::Access`, the same as the tracker's, typed kernels' and graph nodes'), under SYCL
/// 2020's spelling, and the `no_init` property that replaced SYCL 1.2's discard modes.

#include <cstdint>

#include "sluice/access.hpp"

namespace sluice::dataflow {

/// SYCL 2020's `access_mode` is sluice's `Access`: `read`, `write`, `read_write`. The modes build
/// the task graph through the dependency tracker (read after write, write after read or write;
/// reads run concurrently).
using access_mode = sluice::Access;

namespace property {
/// The accessor overwrites what it accesses: the previous contents are not copied in for it
/// (SYCL 2020's `property::no_init`, which replaced `discard_write`). Only with `write` or
/// `read_write`; what the accessed range does not cover keeps its contents.
struct no_init {};
}  // namespace property
inline constexpr property::no_init no_init{};

/// SYCL 2020's access tags: `buf.get_access(h, read_only)` is `get_access<access_mode::read>(h)`.
template <Access Mode>
struct mode_tag_t {
  static constexpr Access mode = Mode;
};
inline constexpr mode_tag_t<Access::read> read_only{};
inline constexpr mode_tag_t<Access::write> write_only{};
inline constexpr mode_tag_t<Access::read_write> read_write{};

}  // namespace sluice::dataflow
