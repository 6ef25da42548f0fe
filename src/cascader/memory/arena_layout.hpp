// Arena layout across memories: which arena each buffer lives in, and at which address.
//
// Arenas (the names TFLM and the Ethos-U driver use):
//   - fast scratch: on-chip SRAM (`scratch_fast`, or `scratch` itself in Shared_Sram mode);
//   - slow scratch: DRAM or other off-chip memory (`scratch`), for evicted feature maps and for
//     the tensors the CPU sees too (an NPU subgraph's IFMs and OFMs live in TFLM's arena, which
//     is `scratch`);
//   - persistent:   buffers that outlive one inference (LUTs, state), laid out linearly;
//   - flash:        constants and encoded weights, laid out linearly.
// Fast/slow placement: while the fast arena does not fit its capacity, evict to slow memory the
// evictable buffer, among those live when the arena overflows, whose eviction costs the fewest
// extra cycles per byte freed (access bytes x (slow - fast) cycles per byte, from the cycle
// model). O(e x allocation) for e evictions. Ties (staircase.hpp) hold between buffers of the
// same arena; a tie whose buffers end up in different arenas is dropped.
#pragma once

#include <cstdint>
#include <vector>

#include "cascader/memory/allocation.hpp"
#include "cascader/memory/live_range.hpp"
#include "cascader/memory/staircase.hpp"

namespace cascader {

enum class Arena { Fast, Slow, Persistent, Flash };

struct ArenaBuffer {
  LiveRange range;
  bool persistent = false;   // outlives an inference
  bool constant = false;     // read-only data: flash
  bool evictable = true;     // may move to slow memory (false: must stay on chip)
  bool slow_only = false;    // must live in the slow arena (a tensor TFLM places: scratch)
  double access_bytes = 0;   // bytes the NPU moves to/from this buffer per inference
};

struct MemoryConfig {
  int64_t fast_capacity = -1;  // -1: unbounded
  int64_t slow_capacity = -1;
  double fast_cycles_per_byte = 0.0;
  double slow_cycles_per_byte = 0.0;
  bool exact = true;           // exact allocator for the final layout (greedy: best fit)
  // Per exact allocation. The node limit ends a search, so that a layout depends on its input
  // only; the time limit is a safety net a search should never reach (one ended by the clock
  // gives a layout that depends on the machine's speed and load).
  int64_t node_limit = 200'000;
  double time_limit_s = 5.0;
  // Shared_Sram / Sram_Only: the fast and slow arenas are one memory. Read by layout_schedule
  // (schedule_layout.hpp): nothing is pinned to the slow arena or evicted, and the fast
  // capacity is a hard limit on the one arena.
  bool shared = false;
};

struct ArenaLayout {
  std::vector<Arena> arena;     // per buffer
  std::vector<int64_t> offset;  // per buffer, within its arena
  int64_t fast_size = 0, slow_size = 0, persistent_size = 0, flash_size = 0;
  int64_t fast_lower_bound = 0, slow_lower_bound = 0;
  double eviction_cycles = 0;   // extra access cycles paid for buffers moved to slow memory
};

// Throws InvalidArgument for a buffer both slow_only and persistent or constant, or a bad tie. Throws
// BudgetError when even after evicting every evictable buffer the fast arena does not fit
// (naming the size it needs), or the slow arena exceeds its capacity.
ArenaLayout layout_arenas(const std::vector<ArenaBuffer>& buffers, const MemoryConfig& config,
                          const std::vector<Tie>& ties = {});

}  // namespace cascader
