// The Ethos-U85's matrix multiply: NPU_OP_CONV with its parameter bit 0 set takes its weights
// from the IFM2 feature map instead of a weight stream (Vela's MatMul, for BATCH_MATMUL and
// FULLY_CONNECTED with non-constant weights). Each OFM row h is its own product: OFM (h, i, j)
// = sum over k of IFM (h, i, k) x IFM2 (h, j, k), both less their zero points; IFM2 is the
// right-hand matrix transposed (Vela inserts that transpose), so it is OH x OC x IFM depth. No
// bias; the global OFM_SCALE rescales.
// Complexity: O(OH OW OC K).
#pragma once

#include <cstdint>
#include <vector>

#include "cascader/sim/command_stream.hpp"
#include "cascader/sim/executor.hpp"

namespace cascader::ethos_u85 {

// The accumulators of a matrix multiply of `ifm` (OH x OW x K) by `ifm2` (OH x OC x K).
// Throws BinaryError naming the operation for a kernel other than 1x1 or per-channel scaling.
std::vector<int64_t> matmul(const sim::NpuOperation& op, const sim::Dense& ifm, const sim::Dense& ifm2);

}  // namespace cascader::ethos_u85
