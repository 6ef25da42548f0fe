// Staircase buffers: an output written over the input it consumes, row band by row band.
//
// A cascade reads its input from the top down and writes its output from the top down. The
// input's rows behind the read front are free once no later operation reads them, so the
// output can start `shift` bytes below the input and share its bytes while the cascade runs:
// the pair then takes max(out, shift + in) bytes instead of out + in. (A 96x96x3 image
// cascaded into 24x24x16 takes the image's 27,648 B plus a few hundred, not 36,864 B.) Unlike
// the in-place alias, input and output keep their own lifetimes: after the cascade only the
// output's bytes are held, before it only the input's.
//
// Safety rule: every byte written into the output at step t lands below every input byte that
// step t - 1 or any later step reads. Step t - 1 counts because consecutive NPU operations may
// overlap when the block dependency lets the next start early (ours emit BLOCKDEP 0, so today
// that is a margin of one operation, kept so the rule stays right if they do not). The
// simulator runs operations in order, so bit-exactness checks the rule for t and later, not
// for t - 1. `staircase_shift` gives the smallest aligned shift for which the rule holds; any
// larger one is safe too, and so is any placement of the two apart.
//
// The allocators see the pair as a Tie: two ranges that may share bytes when placed exactly
// `offset` apart. The greedy allocator places a tie as one unit at that offset; the exact
// allocator places the two apart like any other ranges (valid, not as tight);
// `peak_live_bytes` with ties is the lower bound of either.
#pragma once

#include <cstdint>
#include <vector>

#include "cascader/memory/live_range.hpp"

namespace cascader {

// Bytes [begin, end) of a buffer that the operation at schedule step `step` reads or writes.
struct ByteAccess {
  int64_t step = 0;
  int64_t begin = 0, end = 0;
};

// The smallest multiple of `alignment` (>= 0) that the output may start below the input by
// (see the safety rule). `writes`: the output's bytes as written; `reads`: the input's as read.
int64_t staircase_shift(const std::vector<ByteAccess>& writes, const std::vector<ByteAccess>& reads,
                        int64_t alignment = 16);

// Range `upper` may share bytes with range `lower` when placed exactly `offset` bytes above it.
// Ties chain (cascades in a row: each one's output written over its input, which the one
// before wrote over its own input): a range is the lower of one tie and the upper of one at most.
struct Tie {
  int lower = 0;
  int upper = 0;
  int64_t offset = 0;
};

// Throws InvalidArgument for indices out of range, a range tied to itself, the lower or the
// upper of two ties, ties in a cycle, a negative offset or one that is not a multiple of both
// ranges' alignments.
void validate(const std::vector<Tie>& ties, const std::vector<LiveRange>& ranges);

// The chains of tied ranges, each as (range, bytes above the chain's base) from its lowest
// range up. A tie that would put two ranges of its chain that share time, and no tie, over
// each other's bytes is left out (the chain is cut there). The ties must have passed validate().
std::vector<std::vector<std::pair<int, int64_t>>> tie_chains(const std::vector<LiveRange>& ranges,
                                                            const std::vector<Tie>& ties);

// Bytes the two ranges of `tie` share while both live, placed at the tie's offset.
int64_t shared_bytes(const Tie& tie, const std::vector<LiveRange>& ranges);

// peak_live_bytes where each tie's shared bytes count once while both its ranges live: a lower
// bound for any allocation that places a tie at its offset or apart.
int64_t peak_live_bytes(const std::vector<LiveRange>& ranges, const std::vector<Tie>& ties);

}  // namespace cascader
