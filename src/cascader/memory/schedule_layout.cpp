#include "cascader/memory/schedule_layout.hpp"

#include <string>

#include "cascader/common/error.hpp"

namespace cascader {

ScheduleLayout layout_schedule(const BufferSchedule& schedule, const MemoryConfig& config) {
  ScheduleLayout out;
  out.ranges = build_live_ranges(schedule);
  const ScheduleLiveRanges& r = out.ranges;
  std::vector<ArenaBuffer> buffers(r.ranges.size());
  for (size_t k = 0; k < r.ranges.size(); ++k) {
    const ScheduledBuffer& root = schedule.buffers[size_t(r.range_buffer[k])];
    ArenaBuffer& a = buffers[k];
    a.range = r.ranges[k];
    a.persistent = root.persistent || root.kind == BufferKind::Lut;
    a.constant = root.constant;
    a.evictable = !(a.persistent || a.constant);
  }
  for (size_t b = 0; b < schedule.buffers.size(); ++b) {
    ArenaBuffer& a = buffers[size_t(r.buffer_range[b])];
    a.access_bytes += schedule.buffers[b].access_bytes;
    // In one shared memory `scratch` is the fast arena itself: nothing to pin.
    a.slow_only = a.slow_only || (schedule.buffers[b].cpu_visible && !config.shared);
  }
  MemoryConfig arenas = config;
  // One memory has nowhere to evict to: lay out unbounded, then hold it to the capacity.
  if (config.shared) arenas.fast_capacity = -1;
  out.arenas = layout_arenas(buffers, arenas, r.ties);
  if (config.shared && config.fast_capacity >= 0 && out.arenas.fast_size > config.fast_capacity) {
    throw BudgetError("Shared_Sram: the scratch arena needs " + std::to_string(out.arenas.fast_size) +
                      " B, over the SRAM capacity of " + std::to_string(config.fast_capacity) +
                      " B; raise the SRAM size to at least that or use Dedicated_Sram with eviction");
  }
  const size_t n = schedule.buffers.size();
  out.buffer_arena.resize(n);
  out.buffer_address.resize(n);
  out.buffer_start.resize(n);
  out.buffer_end.resize(n);
  out.buffer_bytes.resize(n);
  for (size_t b = 0; b < n; ++b) {
    const size_t k = size_t(r.buffer_range[b]);
    const int64_t offset = r.buffer_offset[b];
    out.buffer_arena[b] = out.arenas.arena[k];
    out.buffer_address[b] = out.arenas.offset[k] + offset;
    out.buffer_start[b] = r.ranges[k].start;
    out.buffer_end[b] = r.ranges[k].end;
    out.buffer_bytes[b] = size_t(r.range_buffer[k]) == b ? r.ranges[k].size - offset : schedule.buffers[b].size;
  }
  return out;
}

}  // namespace cascader
