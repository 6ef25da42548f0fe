// The Ethos-U85's 16-bit activation tables, which fill the 2 KiB LUT RAM with 512 words of
// (slope << 16 | base), both 16-bit signed, interpolated between entries:
//  - LUT_S16_S16 (function 8): the clamped 16-bit value v picks word (v + 32768) >> 7 and
//    gives base + slope x (low 7 bits) / 128, rounded half up (Vela fills it with
//    GenerateInterpolatingLUT16, the U55's format);
//  - LUT_TANH (10) and LUT_SIGMOID (11): Vela fills word 256 + i with TFLite's table of
//    sigmoid(|i| / 24) less one half in 0.16 fixed point (mirrored for negative i), so the
//    table is tanh(i / 48) in 0.15. The input is the rescaled value itself, beyond 16 bits:
//    TANH takes word 256 + (v >> 8) with 8 fractional bits, SIGMOID word 256 + (v >> 9) with
//    9 (v saturated to the table's range); the interpolation is rounded half away from zero,
//    and SIGMOID halves it and adds one half (0.15), which is TFLite's int16 TANH and LOGISTIC
//    but for one input: SIGMOID at exactly -255 x 2^9 gives 0 where TFLite saturates to 1.
// Complexity: O(1) per element.
#pragma once

#include <cstdint>
#include <vector>

namespace cascader::ethos_u85 {

constexpr int kLutS16S16 = 8, kLutS16S32 = 9, kLutTanh = 10, kLutSigmoid = 11;

// The table's result for input `v` under `function` (kLutS16S16: v in [-32768, 32767];
// kLutTanh, kLutSigmoid: any v); `table` is the 2 KiB LUT RAM.
int64_t lookup16(const uint8_t* table, int64_t v, int function);

// The 2 KiB table LUT_TANH or LUT_SIGMOID reads (`function` kLutTanh or kLutSigmoid): word
// 256 + i is sigmoid(|i| / 24) less one half (0.16, TFLite's table), negated for i < 0, with
// the slope to the next word (0 past the last entry, but for SIGMOID's lowest word, whose slope
// 1 gives TFLite's saturated result). Throws InvalidArgument for another function.
std::vector<uint8_t> tanh_sigmoid_table(int function);

}  // namespace cascader::ethos_u85
