#include "backends/host/host_topology.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace sluice::detail::host {
namespace {

const std::string kCpu = "/sys/devices/system/cpu/";

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

long read_long(const std::string& path) {
  const auto s = read_line(path);
  return s.empty() ? -1 : std::strtol(s.c_str(), nullptr, 10);
}

// sysfs writes cache sizes as "48K" or "2048K" (or "32M").
std::size_t parse_size(const std::string& s) {
  if (s.empty()) return 0;
  char* end = nullptr;
  const auto v = std::strtoull(s.c_str(), &end, 10);
  switch (*end) {
    case 'K':
      return v * 1024;
    case 'M':
      return v * 1024 * 1024;
    case 'G':
      return v * 1024 * 1024 * 1024;
    default:
      return v;
  }
}

// The CPU's rated clock: cpufreq's maximum, else the first "cpu MHz" of /proc/cpuinfo (a
// virtual machine often has no cpufreq).
int clock_khz() {
  if (auto khz = read_long(kCpu + "cpu0/cpufreq/cpuinfo_max_freq"); khz > 0) {
    return static_cast<int>(khz);
  }
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        return static_cast<int>(std::strtod(line.c_str() + colon + 1, nullptr) * 1000.0);
      }
    }
  }
  return 0;
}

}  // namespace

void describe_topology(DeviceInfo& info) {
  const int logical = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Physical cores: distinct (package, core) pairs over the online CPUs.
  std::set<std::pair<long, long>> cores;
  for (int c = 0; c < logical; ++c) {
    const auto base = kCpu + "cpu" + std::to_string(c) + "/topology/";
    const long core = read_long(base + "core_id");
    if (core < 0) continue;
    cores.insert({read_long(base + "physical_package_id"), core});
  }
  info.multiprocessors = cores.empty() ? logical : static_cast<int>(cores.size());
  info.max_threads_per_multiprocessor = std::max(1, logical / info.multiprocessors);
  info.max_threads_per_block = 1;
  info.warp_size = 1;
  info.clock_khz = clock_khz();
  for (int i = 0;; ++i) {
    const auto base = kCpu + "cpu0/cache/index" + std::to_string(i) + "/";
    const long level = read_long(base + "level");
    if (level < 0) break;
    const auto type = read_line(base + "type");
    const auto size = parse_size(read_line(base + "size"));
    if (level == 1 && type == "Data") {
      info.shared_memory_per_block = size;
      info.shared_memory_per_multiprocessor = size;
    }
  }
  info.l2_cache_bytes = last_level_cache_bytes();
  info.peer_access = {true};
}

std::size_t last_level_cache_bytes() {
  std::size_t largest = 0;
  for (int i = 0;; ++i) {
    const auto base = kCpu + "cpu0/cache/index" + std::to_string(i) + "/";
    const long level = read_long(base + "level");
    if (level < 0) break;
    if (level >= 2 && read_line(base + "type") != "Instruction") {
      largest = std::max<std::size_t>(largest, parse_size(read_line(base + "size")));
    }
  }
  return largest;
}

}  // namespace sluice::detail::host
