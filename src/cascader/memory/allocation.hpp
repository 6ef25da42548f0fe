// The answer of an offset allocator, and the checks every allocator's answer must pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cascader/memory/live_range.hpp"
#include "cascader/memory/staircase.hpp"

namespace cascader {

struct Allocation {
  std::vector<int64_t> offsets;  // one per live range, in input order
  int64_t height = 0;            // max over ranges of offset + size: the arena size needed
  int64_t lower_bound = 0;       // proven: no allocation is lower (peak live bytes, or better)
  bool optimal = false;          // height == lower_bound, proven
  int64_t nodes = 0;             // search nodes explored (0 for the greedy allocators)
  double seconds = 0.0;          // wall time spent
  std::string solver;            // "greedy-best-fit", "greedy-first-fit" or "exact"

  int64_t gap() const { return height - lower_bound; }
};

// max over ranges of offset + size. O(n).
int64_t allocation_height(const std::vector<LiveRange>& ranges, const std::vector<int64_t>& offsets);

// Throws InvalidArgument naming the first pair of ranges that overlap in time and address, or a
// misaligned or negative offset. A tie's two ranges may overlap when placed exactly at the
// tie's offset (staircase.hpp). O(n log n + k) with k the number of time-overlapping pairs.
void check_allocation(const std::vector<LiveRange>& ranges, const std::vector<int64_t>& offsets,
                      const std::vector<Tie>& ties = {});

}  // namespace cascader
