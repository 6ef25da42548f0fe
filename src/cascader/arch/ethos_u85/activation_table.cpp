#include "cascader/arch/ethos_u85/activation_table.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "cascader/common/error.hpp"
#include "cascader/sim/tanh_sigmoid.hpp"

namespace cascader::ethos_u85 {

namespace {

// Word `index` (0-511) of the table, interpolated by `fraction` in `bits` fractional bits:
// base and slope scaled by 2^bits.
int64_t interpolate(const uint8_t* table, int64_t index, int64_t fraction, int bits) {
  uint32_t word = 0;
  std::memcpy(&word, table + 4 * index, 4);
  const int64_t base = static_cast<int16_t>(word & 0xFFFF), slope = static_cast<int16_t>(word >> 16);
  return base * (int64_t{1} << bits) + slope * fraction;
}

// x / 2^bits rounded half away from zero.
int64_t round_away(int64_t x, int bits) {
  const int64_t half = int64_t{1} << (bits - 1);
  return x >= 0 ? (x + half) >> bits : -((-x + half) >> bits);
}

}  // namespace

int64_t lookup16(const uint8_t* table, int64_t v, int function) {
  if (function == kLutS16S16) {
    const int64_t u = v + 32768;
    return (interpolate(table, u >> 7, u & 0x7F, 7) + 64) >> 7;
  }
  const int bits = function == kLutTanh ? 8 : 9;
  const int64_t limit = int64_t{256} << bits;
  // The registers leave the saturation of inputs beyond the table open; clamping to the
  // symmetric range +-(limit - 1) is what reproduces TFLite's saturated results (SIGMOID's
  // last negative word has slope 1 for it).
  const int64_t x = std::clamp(v, 1 - limit, limit - 1);
  const int64_t value = interpolate(table, 256 + (x >> bits), x & (limit / 256 - 1), bits);
  if (function == kLutTanh) return round_away(value, bits);
  return round_away(value, bits + 1) + (1 << 14);
}

std::vector<uint8_t> tanh_sigmoid_table(int function) {
  if (function != kLutTanh && function != kLutSigmoid) {
    throw InvalidArgument("no built-in table for activation function " + std::to_string(function));
  }
  std::vector<uint8_t> out(2048);
  for (int i = -256; i < 256; ++i) {
    // The entry at |i| and the one toward +inf: for i >= 0 the next, for i < 0 the previous
    // (mirrored); the table ends at 255.
    const int at = std::min(i < 0 ? -i : i, 255);
    int next = i < 0 ? at - 1 : std::min(at + 1, 255);
    if (i == -256 && function == kLutTanh) next = at;
    const int sign = i < 0 ? -1 : 1;
    const int base = sign * (int(sim::sigmoid_table_entry(at)) - 0x8000);
    const int slope = std::max(0, sign * (int(sim::sigmoid_table_entry(next)) - 0x8000) - base);
    const uint32_t word = uint32_t(slope) << 16 | (uint32_t(base) & 0xFFFF);
    std::memcpy(out.data() + 4 * (256 + i), &word, 4);
  }
  return out;
}

}  // namespace cascader::ethos_u85
