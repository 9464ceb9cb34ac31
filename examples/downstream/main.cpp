// Uses an installed sluice through find_package(sluice) and sluice::sluice (or
// sluice::sluice_static).

#include <sluice/sluice.hpp>

#include <cstdio>
#include <vector>

int main() {
  for (const auto& b : sluice::backends()) {
    std::printf("backend %s: %zu devices", b.name.c_str(), b.device_count);
    if (!b.module.empty()) std::printf(" (module %s)", b.module.c_str());
    if (!b.unavailable_reason.empty()) std::printf(": %s", b.unavailable_reason.c_str());
    std::printf("\n");
  }
  for (const auto& d : sluice::devices()) {
    std::printf("%s: %s\n", d.device.to_string().c_str(), d.name.c_str());
  }
  sluice::Context ctx;
  std::vector<int> in(1000, 7), out(1000, 0);
  sluice::DeviceBuffer<int> buffer(ctx, in.size());
  sluice::copy(ctx, buffer, in);
  sluice::copy(ctx, out, buffer);
  ctx.synchronize();
  const bool ok = out == in;
  std::printf("downstream: round trip through %s %s\n", ctx.device().to_string().c_str(),
              ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
