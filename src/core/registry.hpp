#pragma once
// The process-wide list of backends. The built-in host backend is added on first use (static
// libraries need no static-initialization tricks); modules are loaded when first asked for
// (core/plugin_loader.hpp).

#include <memory>
#include <vector>

#include "sluice/backend.hpp"

namespace sluice::detail {

/// Every backend, after loading every module: those that failed stand in with their reason and no
/// devices.
[[nodiscard]] std::vector<std::shared_ptr<Backend>> all_backends();

}  // namespace sluice::detail
