#pragma once
// What the host backend reports about the CPU (sluice::DeviceInfo): cores, caches and clock from
// Linux's sysfs and /proc, left 0 where the system does not say.

#include "sluice/platform.hpp"

namespace sluice::detail::host {

/// Fills the inspection fields of `info` (multiprocessors, caches, clock, threads per core).
void describe_topology(DeviceInfo& info);

}  // namespace sluice::detail::host
