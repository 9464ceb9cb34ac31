#pragma once
// The backends linked into libsluice itself; the registry adds them on first use. Every other
// backend is a module (core/plugin_loader.hpp).

#include <memory>

#include "sluice/backend.hpp"

namespace sluice::detail {

/// The host backend (src/backends/host/): every context is a FIFO worker thread; device memory
/// is host memory.
[[nodiscard]] std::shared_ptr<Backend> make_host_backend();

}  // namespace sluice::detail
