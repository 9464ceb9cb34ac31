#pragma once
/// @file
/// Everything public in sluice.

#include "sluice/context.hpp"
#include "sluice/error.hpp"
#include "sluice/event.hpp"
#include "sluice/kernel.hpp"
#include "sluice/memory.hpp"
#include "sluice/platform.hpp"
