// The output unit's built-in TANH and SIGMOID activations (ACTIVATION function 3 and 4), which
// Vela emits for int16 TANH / LOGISTIC on Ethos-U55 and U65 (int8 ones become 256-entry LUTs).
//
// The operation before them (a 1x1 average pool) scales its accumulator with OFM_SCALE so that
// x = real input * 3 * 4096: Vela chooses that scale as TFLite's int16 kernels choose their
// input multiplier and shift. The function then interpolates a 256-entry table of
// sigmoid(i / 24) in 0.16 fixed point at |x| and mirrors it for x < 0: TANH steps through the
// table every 2^8 units of x (tanh(x) = 2 sigmoid(2x) - 1), SIGMOID every 2^9; beyond the table
// both saturate. The result is Q0.15 (OFM scale 2^-15), bit for bit what TFLite's reference
// int16 TANH / LOGISTIC kernels compute.
// Complexity: O(1) per element.
#pragma once

#include <cstdint>

namespace cascader::sim {

// tanh of x / (3 * 4096), times 2^15, rounded as the hardware rounds it.
int64_t tanh_q15(int64_t x);

// sigmoid of x / (3 * 4096), times 2^15, rounded as the hardware rounds it.
int64_t sigmoid_q15(int64_t x);

// Entry `i` (0..255) of the table: sigmoid(i / 24) in 0.16 fixed point (TFLite's
// sigmoid_table_uint16), which the Ethos-U85's tables of the same functions are made from.
uint16_t sigmoid_table_entry(int i);

}  // namespace cascader::sim
