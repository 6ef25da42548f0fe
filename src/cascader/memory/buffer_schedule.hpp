// The live-range builder's input, as the scheduler produces it, and the builder.
//
// A schedule is an ordered list of steps (stripe-level NPU ops and DMAs). Each step names the
// buffers it reads and writes. A buffer's range runs from its first to its last touching step,
// with these adjustments by kind:
//   - Weights / DoubleWeights: the DMA prefetch overlaps the previous op, so the range starts one
//     step early; DoubleWeights holds two stripes' weights (size is one stripe's).
//   - Lut and any `persistent` buffer: live across the whole schedule (they outlive an inference).
// Aliases declare buffers that share another's memory instead of getting their own:
//   - InPlace: an elementwise OFM over its IFM, or a TinyEngine-style in-place depthwise output
//     (declared with a one-channel Scratch buffer beside it). Legal here only when the IFM is not
//     touched after the step that first writes the alias; that the NPU's access order never reads
//     an overwritten byte within the step is the scheduler's claim, to be proven in the simulator.
//   - Slice:   a producer writing straight into its slice of a concatenation's output.
//   - Reshape: reshape / squeeze, same bytes at offset 0.
// Aliases chain (a reshape of a slice...); the root buffer's range covers every alias's steps.
// O(sum of step operands + buffers x alias chain length).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cascader/memory/live_range.hpp"

namespace cascader {

enum class BufferKind { FeatureMap, StripeBuffer, Weights, DoubleWeights, Copy, Lut, Scratch };

const char* to_string(BufferKind kind);

struct ScheduledBuffer {
  std::string name;
  BufferKind kind = BufferKind::FeatureMap;
  int64_t size = 0;
  int64_t alignment = 16;   // the NPU needs 16 B aligned addresses
  bool persistent = false;  // outlives one inference (state); the LUT always does
};

struct Step {
  std::vector<int> reads;
  std::vector<int> writes;
};

enum class AliasKind { InPlace, Slice, Reshape };

struct Alias {
  int buffer = 0;      // the buffer that gets no memory of its own
  int target = 0;      // the buffer whose memory it uses
  int64_t offset = 0;  // bytes into the target
  AliasKind kind = AliasKind::InPlace;
};

struct BufferSchedule {
  std::vector<ScheduledBuffer> buffers;
  std::vector<Step> steps;
  std::vector<Alias> aliases;
};

struct ScheduleLiveRanges {
  std::vector<LiveRange> ranges;    // one per root buffer (a buffer that is nobody's alias)
  std::vector<int> range_buffer;    // per range: its root buffer
  std::vector<int> buffer_range;    // per buffer: the range that holds it
  std::vector<int64_t> buffer_offset;  // per buffer: bytes into that range
};

// Throws InvalidArgument for out-of-range indices, untouched buffers, alias cycles, aliases that
// do not fit their target, and in-place aliases whose target is still needed.
ScheduleLiveRanges build_live_ranges(const BufferSchedule& schedule);

}  // namespace cascader
