#pragma once
// The Krylov solvers' options (sluice/la.hpp): the interval between convergence checks, and the
// check of a KspOptions (src/la/ksp_options.cpp, with the options' names).

#include <source_location>

#include "sluice/la.hpp"

namespace sluice::detail::la {

/// KspOptions::check_every, or where it is 0 the interval chosen for the solver and operator.
[[nodiscard]] int check_interval(const sluice::la::KspOptions& o, bool matrix_free);
/// Throws Error(invalid_argument) naming what is wrong with `o`.
void validate(const sluice::la::KspOptions& o, std::source_location loc);

}  // namespace sluice::detail::la
