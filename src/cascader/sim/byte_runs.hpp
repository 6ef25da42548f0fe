// The bytes a box of a feature map occupies, as maximal contiguous address runs: what an
// operation reads or writes through its tiles, strides and layout (NHWC or NHCWB16). Shared by
// the in-place hazard check and the derivation of a command stream's buffers.
// Complexity: O(elements of the box) (runs are merged while walking in address order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cascader/arch/block_traversal.hpp"
#include "cascader/sim/command_stream.hpp"

namespace cascader::sim {

struct ByteRun {
  int64_t begin = 0, end = 0;  // half-open, region-relative
};

// A hostile stream can declare a huge map: the runs of one call are bounded.
constexpr size_t kMaxByteRuns = size_t{1} << 23;

// Appends the runs of `box` in `fm` to `out`, merging an element into the previous run when
// contiguous and that run is at index >= `first` (so callers can keep per-job lists apart).
// Throws BinaryError past kMaxByteRuns runs.
void append_byte_runs(const FeatureMap& fm, const FeatureBox& box, std::vector<ByteRun>& out, size_t first);

}  // namespace cascader::sim
