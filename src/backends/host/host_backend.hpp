#pragma once
// The host backend: every context is a FIFO worker thread; device memory is host memory.

#include <memory>

#include "sluice/backend.hpp"

namespace sluice::detail::host {

[[nodiscard]] std::shared_ptr<Backend> make_backend();

}  // namespace sluice::detail::host
