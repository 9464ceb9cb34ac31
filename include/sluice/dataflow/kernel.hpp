#pragma once
/// @file
/// What a dataflow kernel sees (reference 004, "Kernel-level communication"; SYCL 2020 §4.9,
/// §4.15.3, §4.17): work-items and their groups, barriers, group algorithms and sub-group
/// shuffles, `atomic_ref`, the function objects and reducers of reductions.

#include "sluice/dataflow/atomic.hpp"
#include "sluice/dataflow/functional.hpp"
#include "sluice/dataflow/group.hpp"
#include "sluice/dataflow/group_algorithms.hpp"
#include "sluice/dataflow/range.hpp"
#include "sluice/dataflow/reduction.hpp"
