// sluice_bench_core: the benchmarks of benchmarks.hpp, registered for the host, for cuda:0 when
// the cuda backend has a device, and as raw host baselines. Names read "<benchmark>/<device>".

#include <benchmark/benchmark.h>

#include <string>
#include <utility>
#include <vector>

#include "benchmarks.hpp"

namespace {

using sluice::Device;
using DeviceBench = void (*)(benchmark::State&, const Device&);
using RawBench = void (*)(benchmark::State&);

struct Entry {
  const char* name;
  DeviceBench on_device;
  RawBench raw;  // nullptr where no raw analogue is meaningful
};

const std::vector<Entry>& entries() {
  namespace b = sluice::bench;
  static const std::vector<Entry> all{
      {"enqueue_host_task", b::enqueue_host_task, b::raw_enqueue_host_task},
      {"enqueue_memset_256B", b::enqueue_memset, b::raw_enqueue_memset},
      {"event_record", b::event_record, nullptr},
      {"task_record_wait", b::task_record_wait, b::raw_task_record_wait},
      {"task_wait_for", b::task_wait_for, nullptr},
      {"wait_for_redundant", b::wait_for_redundant, nullptr},
      {"context_create_destroy", b::context_create_destroy, b::raw_queue_create_destroy},
      {"buffer_alloc_free_4KiB", b::buffer_alloc_free, b::raw_alloc_free},
      {"enqueue_hook_checked", b::enqueue_hook_checked, nullptr},
      {"enqueue_hook_compiled_out", b::enqueue_hook_compiled_out, nullptr},
      {"enqueue_hook_observed", b::enqueue_hook_observed, nullptr},
  };
  return all;
}

std::vector<Device> devices_present() {
  std::vector<Device> out{Device{"host", 0}};
  for (const auto& b : sluice::backends()) {
    if (b.name == "cuda" && b.device_count > 0) out.push_back(Device{"cuda", 0});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const auto devices = devices_present();
  for (const auto& e : entries()) {
    for (const auto& d : devices) {
      const std::string name = std::string(e.name) + "/" + d.to_string();
      benchmark::RegisterBenchmark(name.c_str(), e.on_device, d)->UseRealTime();
    }
    if (e.raw != nullptr) {
      const std::string name = std::string(e.name) + "/raw";
      benchmark::RegisterBenchmark(name.c_str(), e.raw)->UseRealTime();
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
