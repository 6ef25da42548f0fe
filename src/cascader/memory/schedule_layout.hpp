// A schedule laid out: its live ranges (buffer_schedule.hpp) spread over the arenas
// (arena_layout.hpp).
//
// Each live range becomes one arena buffer carrying its root buffer's flags (persistent and
// LUT buffers outlive an inference, constants go to flash, neither is evictable) and the summed
// access bytes of every buffer sharing it; a range holding a CPU-visible buffer is pinned to
// the slow arena (`scratch`, which TFLM plans), except when the two arenas are one memory.
// O(buffers + steps' operands) plus the arena layout.
#pragma once

#include "cascader/memory/arena_layout.hpp"
#include "cascader/memory/buffer_schedule.hpp"

namespace cascader {

struct ScheduleLayout {
  ScheduleLiveRanges ranges;
  ArenaLayout arenas;  // indexed by range
  // Per buffer of the schedule: its arena, its address there, the steps [start, end) its range
  // is live and the bytes it holds (a root from its own address up: twice the slot for double-
  // buffered weights, less its shifted in-place aliases' bytes below it; an alias its own size).
  std::vector<Arena> buffer_arena;
  std::vector<int64_t> buffer_address, buffer_start, buffer_end, buffer_bytes;
};

// Throws what build_live_ranges and layout_arenas throw, and BudgetError when a shared arena
// (config.shared) exceeds config.fast_capacity.
ScheduleLayout layout_schedule(const BufferSchedule& schedule, const MemoryConfig& config);

}  // namespace cascader
