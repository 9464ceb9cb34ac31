#pragma once
// The precompiled header of the test programs (SLUICE_TEST_PCH, tests/CMakeLists.txt): gtest,
// sluice's public API and the standard headers most test files include. Parsing these took about
// half of a test file's compile; a build-time device only, so each test file still includes what
// it uses.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sluice/sluice.hpp"
