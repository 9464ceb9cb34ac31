#pragma once
// Shared by the cuda benchmark programs.

#include <benchmark/benchmark.h>

#include <string>

#include "sluice/sluice.hpp"

/// Whether sluice's cuda backend has a device; where not, skips the benchmark (reported as
/// such, never as a result) with the backend's reason.
inline bool have_gpu(benchmark::State& state) {
  for (const auto& b : sluice::backends()) {
    if (b.name == "cuda" && b.device_count > 0) return true;
    if (b.name == "cuda") state.SkipWithError(("no CUDA device: " + b.unavailable_reason).c_str());
  }
  return false;
}
