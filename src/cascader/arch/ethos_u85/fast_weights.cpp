#include "cascader/arch/ethos_u85/fast_weights.hpp"

#include <algorithm>
#include <string>

#include "cascader/common/error.hpp"

namespace cascader::ethos_u85 {

namespace {

constexpr size_t kHeaderBits = 256;
constexpr size_t kAlignBytes = 32;
constexpr int kZeroAdjustBit = 104, kPaletteBit = 112;

uint32_t get(const uint8_t* data, size_t bit, int n) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i, ++bit) v |= static_cast<uint32_t>((data[bit >> 3] >> (bit & 7)) & 1) << i;
  return v;
}

void put(std::vector<uint8_t>& out, size_t bit, int n, uint32_t v) {
  for (int i = 0; i < n; ++i, ++bit) out[bit >> 3] |= static_cast<uint8_t>(((v >> i) & 1) << (bit & 7));
}

int unfold(uint32_t code) { return (code & 1) ? -static_cast<int>(code >> 1) : static_cast<int>(code >> 1); }
uint32_t fold(int v) { return v >= 0 ? static_cast<uint32_t>(2 * v) : static_cast<uint32_t>(-2 * v + 1); }

int bits_per_value(const FastWeights& w) { return w.raw ? 8 : w.small_palette ? 2 : 4; }

}  // namespace

FastWeights decode_fast_weights(const uint8_t* data, size_t size, size_t count) {
  if (size * 8 < kHeaderBits) throw BinaryError("fast-weight stream of " + std::to_string(size) + " bytes has no header");
  FastWeights w;
  w.raw = get(data, 0, 1);
  w.small_palette = get(data, 1, 1);
  for (size_t bit = 2; bit < kZeroAdjustBit; ++bit) {
    if (get(data, bit, 1)) throw BinaryError("fast-weight header: reserved bit " + std::to_string(bit) + " is set");
  }
  w.zero_adjust = static_cast<int8_t>(get(data, kZeroAdjustBit, 8));
  for (size_t i = 0; i < w.palette.size(); ++i) w.palette[i] = static_cast<int16_t>(unfold(get(data, kPaletteBit + 9 * i, 9)));
  const int bits = bits_per_value(w);
  if ((size * 8 - kHeaderBits) / static_cast<size_t>(bits) < count) {
    throw BinaryError("fast-weight stream of " + std::to_string(size) + " bytes is too short for " +
                      std::to_string(count) + " values of " + std::to_string(bits) + " bits");
  }
  w.values.resize(count);
  for (size_t k = 0; k < count; ++k) {
    const uint32_t v = get(data, kHeaderBits + k * static_cast<size_t>(bits), bits);
    w.values[k] = static_cast<int16_t>(w.raw ? static_cast<int8_t>(v) - w.zero_adjust : w.palette[v]);
  }
  return w;
}

std::vector<uint8_t> encode_fast_weights(const FastWeights& w) {
  if (w.zero_adjust < -128 || w.zero_adjust > 127) throw InvalidArgument("fast-weight zero adjustment beyond 8 bits");
  const int bits = bits_per_value(w);
  const size_t end = kHeaderBits + w.values.size() * static_cast<size_t>(bits);
  std::vector<uint8_t> out((end + 8 * kAlignBytes - 1) / (8 * kAlignBytes) * kAlignBytes, 0);
  put(out, 0, 1, w.raw);
  put(out, 1, 1, w.small_palette);
  put(out, kZeroAdjustBit, 8, static_cast<uint32_t>(w.zero_adjust) & 0xFF);
  for (size_t i = 0; i < w.palette.size(); ++i) {
    if (w.palette[i] < -255 || w.palette[i] > 255) throw InvalidArgument("fast-weight palette entry beyond 9 bits");
    put(out, kPaletteBit + 9 * i, 9, fold(w.palette[i]));
  }
  const size_t entries = w.small_palette ? 4 : w.palette.size();
  for (size_t k = 0; k < w.values.size(); ++k) {
    const int v = w.values[k];
    uint32_t code;
    if (w.raw) {
      const int adjusted = v + w.zero_adjust;
      if (adjusted < -128 || adjusted > 127) {
        throw InvalidArgument("fast-weight value " + std::to_string(v) + " at " + std::to_string(k) +
                              " does not fit 8 bits after the zero adjustment");
      }
      code = static_cast<uint32_t>(adjusted) & 0xFF;
    } else {
      const auto at = std::find(w.palette.begin(), w.palette.begin() + static_cast<std::ptrdiff_t>(entries), v);
      if (at == w.palette.begin() + static_cast<std::ptrdiff_t>(entries)) {
        throw InvalidArgument("fast-weight value " + std::to_string(v) + " at " + std::to_string(k) +
                              " is not in the palette");
      }
      code = static_cast<uint32_t>(at - w.palette.begin());
    }
    put(out, kHeaderBits + k * static_cast<size_t>(bits), bits, code);
  }
  return out;
}

}  // namespace cascader::ethos_u85
