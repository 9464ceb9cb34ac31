#pragma once
// What the host backend reports about the CPU (sluice::DeviceInfo): cores, caches and clock from
// Linux's sysfs and /proc, left 0 where the system does not say.

#include <cstddef>

#include "sluice/platform.hpp"

namespace sluice::detail::host {

/// Fills the inspection fields of `info` (multiprocessors, caches, clock, threads per core).
void describe_topology(DeviceInfo& info);

/// Bytes of the largest data cache (the last level's, as lscpu reads it from sysfs: glibc's
/// sysconf reports the whole host's in some virtual machines); 0 where sysfs does not say.
[[nodiscard]] std::size_t last_level_cache_bytes();

}  // namespace sluice::detail::host
