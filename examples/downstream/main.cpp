// Uses an installed sluice through find_package(sluice) and sluice::sluice.

#include <sluice/sluice.hpp>

#include <cstdio>
#include <vector>

int main() {
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
