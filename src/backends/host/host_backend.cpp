// The host backend: every context is a FIFO worker thread; device memory is host memory.

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "backends/host/faults.hpp"
#include "backends/host/host_graph.hpp"
#include "backends/host/host_pool.hpp"
#include "backends/host/host_stream.hpp"
#include "backends/host/host_topology.hpp"
#include "sluice/error.hpp"

namespace sluice::detail::host {
namespace {

// A priority below 0 raises the worker's nice value (makes it less urgent) by up to this much;
// the other direction needs privilege.
// Priorities are nice offsets of a context's worker: up to 10 less urgent than the process, and
// as much more urgent where the process may raise a thread's priority.
constexpr int kLeastUrgent = 10;

/// Whether this process may lower a thread's nice value (root with CAP_SYS_NICE, or
/// RLIMIT_NICE): tried on the calling thread, which is restored at once.
bool may_raise_priority() {
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, tid);
  if (errno != 0 || nice <= -20) return false;
  if (setpriority(PRIO_PROCESS, tid, nice - 1) != 0) return false;
  (void)setpriority(PRIO_PROCESS, tid, nice);
  return true;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "host CPU";
}

class HostBackend final : public Backend {
 public:
  std::string_view name() const noexcept override { return "host"; }

  // Computed once: every context creation asks for the device's properties, and reading
  // /proc/cpuinfo (hundreds of KiB on large machines) each time dominated that cost.
  std::vector<DeviceInfo> devices() override {
    static const DeviceInfo d = [] {
      DeviceInfo info;
      info.device = {"host", 0};
      info.name = cpu_model();
      info.total_memory = physical_memory();
      info.compute_units = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      info.priority_lowest = kLeastUrgent;
      info.priority_highest = may_raise_priority() ? -kLeastUrgent : 0;
      info.details = "a worker thread per context; priority p runs it at nice value +p";
      describe_topology(info);
      return info;
    }();
    return {d};
  }

  std::unique_ptr<Stream> create_stream(const StreamConfig& config) override {
    check_device(config.device);
    return std::make_unique<HostStream>(config, pool_);
  }

  void* allocate_pinned(std::size_t bytes) override {
    maybe_fail_allocation(bytes);
    check_allocation_size(bytes, "pinned memory");
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (p == nullptr) {
      throw OutOfMemory(
          bytes, "host: cannot allocate " + std::to_string(bytes) + " bytes of pinned memory");
    }
    counters().pinned_allocations.fetch_add(1);
    return p;
  }

  void deallocate_pinned(void* ptr) noexcept override {
    std::free(ptr);
    counters().pinned_allocations.fetch_sub(1);
  }

  void set_pool_release_threshold(int device, std::size_t bytes) override {
    check_device(device);
    pool_.set_release_threshold(bytes);
  }
  void trim_pool(int device, std::size_t keep_bytes) override {
    check_device(device);
    pool_.trim(keep_bytes);
  }
  std::size_t pool_reserved(int device) override {
    check_device(device);
    return pool_.reserved();
  }

  std::unique_ptr<GraphExecutable> instantiate_graph(const std::shared_ptr<const GraphData>& graph,
                                                     int device) override {
    check_device(device);
    return instantiate_host_graph(graph);
  }

 private:
  static void check_device(int device) {
    if (device != 0) {
      throw Error(Errc::no_device, "host:" + std::to_string(device) +
                                       " does not exist; the host backend has one device, host:0");
    }
  }

  HostPool pool_;
};

}  // namespace
}  // namespace sluice::detail::host

namespace sluice::detail {

// Declared in core/builtin_backends.hpp, which the registry includes and this file does not: the
// backends sit below the platform layer. A signature that drifted would not link (libsluice is
// linked with --no-undefined).
std::shared_ptr<Backend> make_host_backend() {
  return std::make_shared<host::HostBackend>();
}

}  // namespace sluice::detail
