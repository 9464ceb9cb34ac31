#pragma once
// Moving test data between host vectors and device buffers for the canned-operation tests.

#include <random>
#include <span>
#include <vector>

#include "sluice/sluice.hpp"

namespace sluice::test {

template <class T>
DeviceBuffer<T> to_device(const Context& ctx, const std::vector<T>& h) {
  DeviceBuffer<T> d(ctx, h.size());
  if (!h.empty()) copy(ctx, d, std::span<const T>(h));
  return d;
}

template <class T>
std::vector<T> to_host(const Context& ctx, const DeviceBuffer<T>& d) {
  std::vector<T> h(d.size());
  if (!h.empty()) copy(ctx, std::span<T>(h), d);
  ctx.synchronize();
  return h;
}

template <class T>
std::vector<T> random_values(std::size_t n, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(gen));
  return v;
}

}  // namespace sluice::test
