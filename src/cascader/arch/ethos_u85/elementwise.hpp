// The Ethos-U85 elementwise unit: each operand is first rescaled by its own scale register
// (IFM_SCALE, IFM2_SCALE: scale, shift, double round, round mode), then combined. The output
// stage (output_stage.hpp) rescales the result by OFM_SCALE. Modes the zoo's streams do not
// use (division, comparisons, logical operations, LRELU) are refused rather than guessed.
// Complexity: O(1) per element.
#pragma once

#include <cstdint>

#include "cascader/sim/command_stream.hpp"

namespace cascader::ethos_u85 {

// The combined value of zero-point-corrected operands a (IFM) and b (IFM2, or the scalar).
// Throws BinaryError naming the operation for a mode that is not simulated.
int64_t elementwise_value(const sim::NpuOperation& op, int64_t a, int64_t b);

// Throws BinaryError when the operation's mode is not simulated (checked once per operation).
void require_simulated_elementwise(const sim::NpuOperation& op);

}  // namespace cascader::ethos_u85
