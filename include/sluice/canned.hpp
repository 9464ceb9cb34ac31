#pragma once
/// @file
/// What the canned operations (sluice/blas.hpp, sluice/rng.hpp, sluice/fft.hpp) share.

#include <concepts>

namespace sluice {

/// float or double: the element types the canned operations take.
template <class T>
concept CannedReal = std::same_as<T, float> || std::same_as<T, double>;

}  // namespace sluice
