// Greedy offset allocators: the fast baseline, the exact solver's warm start, and TFLM's planner.
//
// Buffers are taken largest first (ties: longer lifetime first, then input order); each goes into
// a gap between the already placed buffers that overlap it in time:
//   - BestFit:  the smallest gap that holds it (the top of the arena counts as unbounded);
//   - FirstFit: the lowest gap that holds it, as TFLM's GreedyMemoryPlanner does.
// O(n^2 log n) for n buffers.
#pragma once

#include <vector>

#include "cascader/memory/allocation.hpp"
#include "cascader/memory/live_range.hpp"

namespace cascader {

enum class GreedyFit { BestFit, FirstFit };

Allocation greedy_allocate(const std::vector<LiveRange>& ranges, GreedyFit fit = GreedyFit::BestFit);

}  // namespace cascader
