#pragma once
/// @file
/// Information descriptors (SYCL 2020 §4.6.4.2, §4.6.6.2): what `Queue::get_info<...>()` (device
/// queries) and `Event::get_profiling_info<...>()` return.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::dataflow::info {

/// Kinds of work-group local memory.
enum class local_mem_type : std::uint8_t {
  none,    ///< no local memory
  local,   ///< dedicated on-chip memory (cuda shared memory)
  global,  ///< carved out of ordinary memory (the host: each group's memory is heap memory)
};

namespace device {
// Each descriptor names a query of the queue's device and its result type.
struct name {
  using return_type = std::string;
};
struct vendor {
  using return_type = std::string;
};
struct max_compute_units {
  using return_type = std::uint32_t;
};
struct global_mem_size {
  using return_type = std::uint64_t;
};
struct local_mem_size {
  using return_type = std::uint64_t;
};
struct local_mem_type {
  using return_type = info::local_mem_type;
};
struct max_work_group_size {
  using return_type = std::size_t;
};
struct sub_group_sizes {
  using return_type = std::vector<std::size_t>;
};
struct max_num_sub_groups {
  using return_type = std::uint32_t;
};
struct max_clock_frequency {  ///< MHz
  using return_type = std::uint32_t;
};
struct global_mem_cache_size {
  using return_type = std::uint64_t;
};
}  // namespace device

namespace event_profiling {
/// Nanoseconds on one steady clock (the host's `std::chrono::steady_clock`, which device times
/// are mapped onto): when `submit` issued the command group, when it started on the device,
/// when it ended.
struct command_submit {
  using return_type = std::uint64_t;
};
struct command_start {
  using return_type = std::uint64_t;
};
struct command_end {
  using return_type = std::uint64_t;
};
}  // namespace event_profiling

}  // namespace sluice::dataflow::info
