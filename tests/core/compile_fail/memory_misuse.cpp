// Must NOT compile: each SLUICE_CASE hands an asynchronous copy, memset or fill a temporary host
// container, freed when the call returns but read or written when the work runs.
// tests/CMakeLists.txt compiles it once per case and expects the readable message.

#include <array>
#include <span>
#include <vector>

#include "sluice/memory.hpp"

void misuse(const sluice::Context& ctx, sluice::DeviceBuffer<float>& d) {
#if SLUICE_CASE == 1
  sluice::copy(ctx, d, std::vector<float>(d.size(), 1.0f));
#elif SLUICE_CASE == 2
  sluice::copy(ctx, std::vector<float>(d.size()), d);
#elif SLUICE_CASE == 3
  sluice::memset(ctx, std::vector<float>(d.size()), 0);
#elif SLUICE_CASE == 4
  sluice::fill(ctx, std::array<float, 4>{}, 1.0f);
#elif SLUICE_CASE == 5
  sluice::copy(d, std::vector<float>(d.size(), 1.0f));  // on the current context
#else
  // The control compiles: lvalue containers, views and sluice buffers (temporaries included).
  std::vector<float> h(d.size(), 1.0f);
  sluice::copy(ctx, d, h);
  sluice::copy(ctx, d, std::span<const float>(h));
  sluice::copy(ctx, sluice::DeviceBuffer<float>(ctx, d.size()), d);
  sluice::memset(ctx, d.span(), 0);
  sluice::fill(ctx, h, 2.0f);
#endif
}
