// A shared library that uses libsluice, for a program that loads it privately (RTLD_LOCAL), as
// Python loads an extension module: modules loaded from inside it must still find libsluice.

#include <cstdio>

#include "sluice/platform.hpp"

extern "C" __attribute__((visibility("default"))) void sluice_test_list_backends() {
  for (const auto& b : sluice::backends()) {
    std::printf("%s: %zu devices", b.name.c_str(), b.device_count);
    if (!b.module.empty()) std::printf(" (module %s)", b.module.c_str());
    if (!b.unavailable_reason.empty()) std::printf(": %s", b.unavailable_reason.c_str());
    std::printf("\n");
  }
}
