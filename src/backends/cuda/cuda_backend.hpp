#pragma once
// The cuda backend: non-blocking streams, pooled events, stream-ordered pools, cuBLAS and
// cuSPARSE handles per context. It registers no devices where there is no driver or GPU.

#include <memory>

#include "sluice/backend.hpp"

namespace sluice::detail::cuda {

[[nodiscard]] std::shared_ptr<Backend> make_backend();

}  // namespace sluice::detail::cuda
