#pragma once
// The generated source of a program's declared-shape instance in a given dialect, without
// building it (tests compile the CUDA dialect with NVRTC on machines without a GPU).

#include <string>
#include <vector>

#include "sluice/ext/lazy_kernels.hpp"
#include "sluice/lazy.hpp"

namespace sluice::lazy::detail {

struct GeneratedSource {
  std::string source;
  std::vector<std::string> kernels;  // names
};

/// The declared-shape instance's cuda source with every kernel shape chosen as a device named
/// `device_name` would choose it under `options.tune`, timing with the timer set by
/// set_tune_timer (tune.hpp; none: nothing is timed). Tests of the tuning logic without a GPU.
struct TunedSource {
  std::string source;
  std::vector<std::string> shapes;                   // per kernel code
  std::vector<std::vector<std::string>> candidates;  // per kernel code (empty: no alternative)
  std::vector<std::string> choices;                  // per kernel code
  std::size_t groups = 0, timed = 0, hits = 0, candidates_timed = 0;
};
[[nodiscard]] TunedSource tune_source(const std::vector<NodePtr>& outputs, const Options& options,
                                      const std::string& device_name);

[[nodiscard]] GeneratedSource generate_source(const std::vector<NodePtr>& outputs,
                                              const Options& options, LazyDialect dialect);

}  // namespace sluice::lazy::detail
