// The Ethos-U85's ARGMAX pooling (POOL modes ARGMAX_X 6, ARGMAX_Y 7): per OFM element and
// channel, the position along the kernel's width (X) or height (Y) of the largest IFM value in
// the window, the first one on ties (TFLite's ARG_MAX). The accumulator holds the index above
// 16 fractional bits, the value's place; Vela's OFM_SCALE for it (multiplier 1, shift 16)
// leaves the index.
// Complexity: O(OH OW C x kernel).
#pragma once

#include <cstdint>
#include <vector>

#include "cascader/sim/command_stream.hpp"
#include "cascader/sim/executor.hpp"

namespace cascader::ethos_u85 {

// The accumulators of an ARGMAX pooling of `ifm` (zero points removed) to OH x OW x C.
// Throws BinaryError naming the operation for a window that is not one row (ARGMAX_X) or one
// column (ARGMAX_Y), or that lies partly outside the IFM.
std::vector<int64_t> argmax_pool(const sim::NpuOperation& op, const sim::Dense& ifm, int OH, int OW);

}  // namespace cascader::ethos_u85
