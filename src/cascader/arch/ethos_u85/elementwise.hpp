// The Ethos-U85 elementwise unit: each operand is first rescaled by its own scale register
// (IFM_SCALE, IFM2_SCALE: scale, shift, double round, round mode), then combined. The output
// stage (output_stage.hpp) rescales the result by OFM_SCALE.
//  - Comparisons (CMP_EQ/NE/GE/GT) compare the rescaled operands and give the NPU's boolean:
//    -1 (all bits set) for true, 0 for false. Vela keeps booleans so inside a network and ANDs
//    them with 1 where TFLite's 0/1 leaves or enters it (a CMP_NE against 0 on the way in).
//  - Bitwise modes (AND, OR, XOR, NOT, AND_NOT = IFM & ~IFM2) act on the raw operands: Vela
//    emits them for logical operators on those booleans and for SELECT (a & c | b & ~c).
//  - DIV is integer division of the raw operands, truncated toward zero (TOSA's INTDIV, which
//    Vela maps to it); a zero divisor has no defined result and is refused.
//  - LRELU (Vela 5.2 emits it for int16 LEAKY_RELU with alpha > 0, any input and output
//    quantizations) selects a rescale of the single operand by its sign: IFM_SCALE (the
//    identity, s_in / s_out) for a >= 0, IFM2_SCALE (alpha s_in / s_out) below, each rounded by
//    its own round mode, as TFLite's QuantizeLeakyRelu picks one of two multipliers. There is
//    no IFM2 feature map; OFM_SCALE is the unit. The rescale by sign (not a MAX of the two) is
//    what makes Vela's alpha > 1 binaries exact.
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
