#include "cascader/sim/tanh_sigmoid.hpp"

namespace cascader::sim {

namespace {

// sigmoid(i / 24) in 0.16 fixed point, TFLite's table (sigmoid_table_uint16) that the hardware
// reproduces. 44 of its entries are one above 65536 * sigmoid(i / 24) rounded to nearest, so
// the table is listed, not computed; the last entry is clipped to 65535.
constexpr uint16_t kSigmoidTable[256] = {
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432, 42064, 42688,
    43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409,
    51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110,
    61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186,
    63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
    64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208,
    65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433, 65438, 65442, 65445, 65449,
    65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491,
    65493, 65495, 65497, 65498, 65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
    65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535,
};

// Interpolates the table at |x| with `bits` fractional bits per entry; returns the value in
// 0.(16 + bits) fixed point, or -1 when |x| lies beyond the table (the caller saturates).
int64_t interpolate(uint64_t magnitude, int bits) {
  const uint64_t entry = magnitude >> bits;
  if (entry >= 255) return -1;
  const int64_t lo = kSigmoidTable[entry], hi = kSigmoidTable[entry + 1];
  const int64_t fraction = static_cast<int64_t>(magnitude & ((uint64_t{1} << bits) - 1));
  return (lo << bits) + fraction * (hi - lo);
}

uint64_t magnitude(int64_t x) { return x < 0 ? uint64_t{0} - static_cast<uint64_t>(x) : static_cast<uint64_t>(x); }

}  // namespace

uint16_t sigmoid_table_entry(int i) { return kSigmoidTable[i]; }

int64_t tanh_q15(int64_t x) {
  // sigmoid(2|x|) in 0.24 fixed point; 2 sigmoid - 1 then drops the 2^23 offset, and the
  // half-unit constants (2^7, and 2^7 - 1 on the mirrored side) round the final >> 8.
  int64_t s = interpolate(magnitude(x), 8);
  if (s < 0) s = int64_t{0xFFFF} << 8;
  const int64_t r = x >= 0 ? s - (int64_t{1} << 23) + (int64_t{1} << 7) : -s + (int64_t{1} << 23) + (int64_t{1} << 7) - 1;
  return r >> 8;  // floor
}

int64_t sigmoid_q15(int64_t x) {
  // sigmoid(|x|) in 0.25 fixed point; for x < 0, sigmoid(x) = 1 - sigmoid(|x|).
  int64_t s = interpolate(magnitude(x), 9);
  if (s < 0) s = int64_t{0x7FFF} << 10;
  const int64_t r = x >= 0 ? s + (int64_t{1} << 9) : (int64_t{1} << 25) - s + (int64_t{1} << 9) - 1;
  return r >> 10;
}

}  // namespace cascader::sim
