#pragma once
// The host backend's kernel loader: runs a spec's host implementation over the launch's index
// range on the shared CPU pool.

#include "sluice/ext/kernel_loader.hpp"

namespace sluice::detail::host {

[[nodiscard]] KernelLoader& kernel_loader();

}  // namespace sluice::detail::host
