#pragma once
// The process-wide list of backends. Built-in backends are added on first use, so static
// libraries need no static-initialization tricks.

#include <memory>
#include <vector>

#include "sluice/backend.hpp"

namespace sluice::detail {

[[nodiscard]] std::vector<std::shared_ptr<Backend>> all_backends();

}  // namespace sluice::detail
