// What the dataflow layer's info::device queries report (SYCL 2020 §4.6.4.2), from the sluice
// device's properties; computed once per device.

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "dataflow/state.hpp"

namespace sluice::dataflow::detail {
namespace {

/// The CPU's vendor as /proc/cpuinfo names it ("GenuineIntel", "AuthenticAMD", ...).
std::string cpu_vendor() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("vendor_id", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

/// Work-items per group the dataflow layer allows (check_nd_range): the cuda limit, on both.
constexpr std::size_t kMaxWorkGroup = 1024;

DeviceQuery query(const Device& d) {
  const DeviceInfo info = device_info(d);
  DeviceQuery q;
  q.name = info.name;
  q.compute_units = static_cast<std::uint32_t>(info.compute_units);
  q.clock_mhz = static_cast<std::uint32_t>(info.clock_khz / 1000);
  q.global_mem = info.total_memory;
  q.cache = info.l2_cache_bytes;
  q.max_work_group = kMaxWorkGroup;
  q.sub_group_sizes = {sub_group_size};
  q.max_sub_groups = static_cast<std::uint32_t>(kMaxWorkGroup / sub_group_size);
  if (d.backend == "cuda") {
    q.vendor = "NVIDIA Corporation";
    // Shared memory a block may opt in to; group algorithms take about 1 KiB of it themselves.
    q.local_mem = info.shared_memory_per_block;
    q.local_type = info::local_mem_type::local;
  } else {
    q.vendor = d.backend == "host" ? cpu_vendor() : "unknown";
    // Any size works (heap memory per group); a core's L1 data cache is the size that stays fast.
    q.local_mem = info.shared_memory_per_block;
    q.local_type = info::local_mem_type::global;
  }
  return q;
}

}  // namespace

const DeviceQuery& device_query(const Device& d) {
  static std::mutex mutex;
  static auto* cache = new std::map<std::string, std::unique_ptr<DeviceQuery>>;  // process-wide
  std::lock_guard lock(mutex);
  auto& slot = (*cache)[d.to_string()];
  if (!slot) slot = std::make_unique<DeviceQuery>(query(d));
  return *slot;
}

}  // namespace sluice::dataflow::detail
