// A buffer's lifetime in schedule steps and its size: the unit every allocator works on.
#pragma once

#include <cstdint>
#include <vector>

namespace cascader {

// Live over the half-open step interval [start, end), occupying `size` bytes at an offset that
// is a multiple of `alignment` (16 B for buffers the NPU touches).
struct LiveRange {
  int64_t start = 0;
  int64_t end = 0;
  int64_t size = 0;
  int64_t alignment = 1;
};

// Two ranges compete for memory when their half-open lifetimes intersect and neither is empty.
inline bool overlaps_in_time(const LiveRange& a, const LiveRange& b) {
  return a.start < b.end && b.start < a.end && a.size > 0 && b.size > 0;
}

// Throws InvalidArgument unless 0 <= start <= end, size >= 0 and alignment >= 1 for every range.
void validate(const std::vector<LiveRange>& ranges);

// The maximum over time of the summed sizes of live buffers: a lower bound for any
// allocation, and the "peak live bytes" of an uncascaded schedule. O(n log n) sweep.
int64_t peak_live_bytes(const std::vector<LiveRange>& ranges);

}  // namespace cascader
