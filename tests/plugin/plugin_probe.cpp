// The program behind the plugin tests (tests/plugin/CMakeLists.txt), built against libsluice.so
// and against the static archive. Plain main, no GoogleTest: each test is one fresh process,
// so what a process has loaded is what this run made it load.
//
//   plugin_probe host-only [--elements N] [--max-hwm-mb M]
//       host work only: a dataflow vector add of N floats (default 2^20), then a copy and a BLAS
//       axpy through a host context; fails if any CUDA library or backend module is mapped into
//       the process afterwards. Prints resident memory at the start of main, after the vector
//       add and at the end, and fails above M MiB peak (not under a sanitizer).
//   plugin_probe backends
//       sluice::backends(), one line each: "name: N devices (module PATH): reason".
//   plugin_probe context DEVICE
//       a round trip of data through a context on DEVICE; prints the error if there is one.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "sluice/blas.hpp"
#include "sluice/dataflow.hpp"
#include "sluice/sluice.hpp"

namespace {

namespace df = sluice::dataflow;

long status_kib(const char* key) {
  std::ifstream in("/proc/self/status");
  const std::size_t n = std::strlen(key);
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, n, key) == 0) return std::stol(line.substr(n));
  }
  return -1;
}

bool sanitized() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

// Libraries that only the cuda module may bring in.
constexpr const char* kCudaLibraries[] = {"libcuda.",    "libcudart",    "libcublas",
                                          "libcusparse", "libcufft",     "libcurand",
                                          "libnvrtc",    "libnvJitLink", "libsluice-"};

int host_only(std::size_t n, long max_hwm_mib) {
  const long rss0 = status_kib("VmRSS:"), hwm0 = status_kib("VmHWM:");

  std::vector<float> a(n), b(n), c(n, 0.0f);
  std::iota(a.begin(), a.end(), 0.0f);
  std::fill(b.begin(), b.end(), 2.0f);
  {
    df::Queue q(sluice::Device{"host", 0});
    df::Buffer<float> A(a.data(), df::range{n}), B(b.data(), df::range{n}),
        C(c.data(), df::range{n});
    q.submit([&](df::Handler& h) {
      auto x = A.get_access<df::access_mode::read>(h);
      auto y = B.get_access<df::access_mode::read>(h);
      auto z = C.get_access<df::access_mode::write>(h, df::no_init);
      h.parallel_for(df::range{n}, [=](df::id<1> i) { z[i] = x[i] + y[i]; });
    });
  }  // writes back into c
  const long rss1 = status_kib("VmRSS:"), hwm1 = status_kib("VmHWM:");

  sluice::Context ctx(sluice::ContextOptions{.device = sluice::Device{"host", 0}, .name = "probe"});
  sluice::DeviceBuffer<float> x(ctx, n), y(ctx, n);
  sluice::copy(ctx, x, a);
  sluice::copy(ctx, y, b);
  sluice::blas::axpy(ctx, 1.0f, x, y);  // y = a + b again, through the host's BLAS
  std::vector<float> d(n);
  sluice::copy(ctx, d, y);
  ctx.synchronize();
  const long rss2 = status_kib("VmRSS:"), hwm2 = status_kib("VmHWM:");

  bool ok = true;
  for (std::size_t i = 0; i < n; i += 4099) {
    const float want = static_cast<float>(i) + 2.0f;
    if (c[i] != want || d[i] != want) {
      std::printf("WRONG: element %zu is %g and %g, expected %g\n", i, double(c[i]), double(d[i]),
                  double(want));
      ok = false;
      break;
    }
  }
  std::printf("resident at the start of main: VmRSS %ld kB, VmHWM %ld kB\n", rss0, hwm0);
  std::printf("after a vector add of %zu floats: VmRSS %ld kB, VmHWM %ld kB\n", n, rss1, hwm1);
  std::printf("after a copy and an axpy on a host context: VmRSS %ld kB, VmHWM %ld kB\n", rss2,
              hwm2);

  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    for (const char* lib : kCudaLibraries) {
      if (line.find(lib) != std::string::npos) {
        std::printf("MAPPED in a host-only process: %s\n", line.c_str());
        ok = false;
      }
    }
  }
  if (max_hwm_mib > 0 && !sanitized() && hwm2 > max_hwm_mib * 1024) {
    std::printf("TOO MUCH: peak resident %ld kB is above %ld MiB\n", hwm2, max_hwm_mib);
    ok = false;
  }
  std::printf("%s\n", ok ? "probe: ok" : "probe: FAILED");
  return ok ? 0 : 1;
}

int list_backends() {
  for (const auto& b : sluice::backends()) {
    std::printf("%s: %zu devices", b.name.c_str(), b.device_count);
    if (!b.module.empty()) std::printf(" (module %s)", b.module.c_str());
    if (!b.unavailable_reason.empty()) std::printf(": %s", b.unavailable_reason.c_str());
    std::printf("\n");
  }
  std::printf("probe: ok\n");
  return 0;
}

int round_trip(const char* device) {
  try {
    sluice::Context ctx(sluice::ContextOptions{.device = sluice::Device::parse(device)});
    std::vector<int> in(4096), out(in.size(), 0);
    std::iota(in.begin(), in.end(), 1);
    sluice::DeviceBuffer<int> buffer(ctx, in.size());
    sluice::copy(ctx, buffer, in);
    sluice::copy(ctx, out, buffer);
    int sum = 0;
    ctx.host_task([&] { sum = std::accumulate(out.begin(), out.end(), 0); }, "sum");
    ctx.synchronize();
    const bool ok = out == in && sum == 4096 * 4097 / 2;
    std::printf("context on %s: round trip %s\n", device, ok ? "ok" : "WRONG");
    std::printf("resident after the round trip: VmRSS %ld kB, VmHWM %ld kB\n", status_kib("VmRSS:"),
                status_kib("VmHWM:"));
    std::printf("%s\n", ok ? "probe: ok" : "probe: FAILED");
    return ok ? 0 : 1;
  } catch (const sluice::Error& e) {
    std::printf("error: %s\n", e.what());
    std::printf("probe: done\n");
    return 3;
  }
}

int usage() {
  std::fprintf(stderr,
               "usage: plugin_probe host-only [--elements N] [--max-hwm-mb M] | backends | "
               "context DEVICE\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "host-only") == 0) {
    std::size_t elements = std::size_t{1} << 20;
    long max = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
      if (std::strcmp(argv[i], "--elements") == 0) {
        elements = std::stoul(argv[i + 1]);
      } else if (std::strcmp(argv[i], "--max-hwm-mb") == 0) {
        max = std::stol(argv[i + 1]);
      } else {
        return usage();
      }
    }
    return argc % 2 == 0 ? host_only(elements, max) : usage();
  }
  if (argc == 2 && std::strcmp(argv[1], "backends") == 0) return list_backends();
  if (argc == 3 && std::strcmp(argv[1], "context") == 0) return round_trip(argv[2]);
  return usage();
}
