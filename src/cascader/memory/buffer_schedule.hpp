// The live-range builder's input, as the scheduler produces it, and the builder.
//
// A schedule is an ordered list of steps (stripe-level NPU ops and DMAs). Each step names the
// buffers it reads and writes. A buffer's range runs from its first to its last touching step,
// with these adjustments by kind:
//   - Weights / DoubleWeights: the DMA prefetch overlaps the previous op, so the range starts one
//     step early; DoubleWeights holds two stripes' weights (size is one stripe's).
//   - Lut and any `persistent` buffer: live across the whole schedule (they outlive an inference).
// Aliases declare buffers that share another's memory instead of getting their own:
//   - InPlace: an OFM written over its own IFM, starting `shift` bytes below it (the root range
//     grows to cover both). Legal here only when the IFM is not touched after the step that
//     first writes the alias. Within the step, the NPU's block order must never read a byte an
//     earlier block wrote; that depends on the operation, and sim::min_in_place_shift gives the
//     smallest safe shift: 0 for a same-shape elementwise op, one IFM row for a 3x3 same-padded
//     depthwise (TinyEngine's offset-0 in-place depthwise is NOT safe on the NPU). Proven in
//     tests/test_in_place.py: test_brute_force_agrees_with_the_hazard_check (block-by-block
//     execution on a shared buffer differs from the separate-buffer result exactly when a
//     hazard is reported), test_vela_depthwise_in_place / test_vela_add_in_place (the simulator
//     raises on Vela's command streams patched to unsafe shifts and is bit-exact against the
//     reference at min_in_place_shift). The block order itself is taken from Vela / Regor's
//     model of the hardware (arch/block_traversal.hpp), not measured on silicon or the FVP.
//     The scheduler owns choosing a safe shift; this builder only lays the bytes out.
//   - Staircase: an output written over an input it consumes, starting `shift` bytes below it
//     (staircase.hpp): not one range but a tie between the two, each keeping its own lifetime.
//     The scheduler owns the shift (staircase_shift); this builder only records the tie.
//   - Slice:   a producer writing straight into its slice of a concatenation's output.
//   - Reshape: reshape / squeeze, same bytes at offset 0.
// Aliases chain (a reshape of a slice...); the root buffer's range covers every alias's steps.
// O(sum of step operands + buffers x alias chain length).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cascader/memory/live_range.hpp"
#include "cascader/memory/staircase.hpp"

namespace cascader {

enum class BufferKind { FeatureMap, StripeBuffer, Weights, DoubleWeights, Copy, Lut, Scratch };

const char* to_string(BufferKind kind);

struct ScheduledBuffer {
  std::string name;
  BufferKind kind = BufferKind::FeatureMap;
  int64_t size = 0;
  int64_t alignment = 16;   // the NPU needs 16 B aligned addresses
  bool persistent = false;  // outlives one inference (state); the LUT always does
  // What the arena layout (schedule_layout.hpp) needs beyond the live range:
  double access_bytes = 0;  // bytes the NPU moves per inference (the price of evicting it)
  bool constant = false;    // read-only data (encoded weights, constants): flash
  bool cpu_visible = false; // an NPU subgraph's IFM or OFM: TFLM places it, in `scratch`
};

struct Step {
  std::vector<int> reads;
  std::vector<int> writes;
};

enum class AliasKind { InPlace, Slice, Reshape, Staircase };

struct Alias {
  int buffer = 0;      // the buffer that gets no memory of its own
  int target = 0;      // the buffer whose memory it uses
  int64_t offset = 0;  // Slice / Reshape: bytes into the target (InPlace: 0)
  AliasKind kind = AliasKind::InPlace;
  int64_t shift = 0;   // InPlace, Staircase: the buffer starts this many bytes below the target (aligned)
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
  std::vector<int64_t> buffer_offset;  // per buffer: bytes into that range (the root's is the
                                       // largest in-place shift below it, else 0)
  std::vector<Tie> ties;            // staircases, between ranges
};

// Throws InvalidArgument for out-of-range indices, untouched buffers, alias cycles, aliases that
// do not fit their target, misaligned or negative shifts, in-place aliases whose target is
// still needed, and a range in two staircases.
ScheduleLiveRanges build_live_ranges(const BufferSchedule& schedule);

}  // namespace cascader
