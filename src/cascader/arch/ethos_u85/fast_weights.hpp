// The Ethos-U85 fast-weight stream (WEIGHT_FORMAT bit 0): a format the weight decoder reads
// at a fixed rate, with no slices or variable-length codes.
//
// A 256-bit header (LSB first): bit 0 raw mode, bit 1 small palette, bits 104-111 a signed
// zero adjustment, bits 112-255 a 16-entry palette of 9-bit codes (2|w| + sign). The values
// follow from bit 256: 2-bit indices into the first four palette entries (small palette),
// 4-bit indices into all sixteen, or, in raw mode, bytes holding each value plus the zero
// adjustment as a signed 8-bit number. The stream is zero-padded to a multiple of 32 bytes.
// The header does not say how many values follow: the weight order does.
// Complexity: O(values) either way.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cascader::ethos_u85 {

struct FastWeights {
  bool raw = false;
  bool small_palette = false;
  int zero_adjust = 0;              // -128..127, raw mode
  std::array<int16_t, 16> palette{};  // weight values (decoded from their 9-bit codes)
  std::vector<int16_t> values;      // weight values, in stream order
};

// Reads `count` values. Throws BinaryError when the stream is too short for them or its
// reserved header bits are set.
FastWeights decode_fast_weights(const uint8_t* data, size_t size, size_t count);

// Writes the header and values (the palette as given: an encoder may leave unused entries
// holding anything). Throws InvalidArgument for a value the mode cannot code.
std::vector<uint8_t> encode_fast_weights(const FastWeights& weights);

}  // namespace cascader::ethos_u85
