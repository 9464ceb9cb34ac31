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

[[nodiscard]] GeneratedSource generate_source(const std::vector<NodePtr>& outputs,
                                              const Options& options, LazyDialect dialect);

}  // namespace sluice::lazy::detail
