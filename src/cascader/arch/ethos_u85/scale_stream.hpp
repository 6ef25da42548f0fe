// The Ethos-U85 scale stream: 10 bytes per OFM channel, one stream per operation whatever the
// number of weight decoders, padded with zero entries to a multiple of 16 channels (or of the
// micro-block depth). Its layout follows the accumulator format (ACC_FORMAT):
//  - 32-bit accumulators: bias int32 (bytes 0-3), scale uint31 (4-7), shift 6 bits (8);
//  - 48-bit accumulators: bias int48 (bytes 0-5), scale uint15 (6-7), shift 6 bits (8);
// byte 9 is zero. (The U55/U65's entry is a 40-bit bias, a 32-bit scale and a shift.)
// Complexity: O(channels).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cascader/emit/weights.hpp"

namespace cascader::ethos_u85 {

// Reads `count` entries. Throws BinaryError when the stream is too short or an entry's
// reserved bits are set.
std::vector<emit::BiasScale> decode_scale_stream(const uint8_t* data, size_t size, size_t count, bool acc48);

// Writes the entries. Throws InvalidArgument naming the channel whose bias, scale or shift
// does not fit the format's fields.
std::vector<uint8_t> encode_scale_stream(const std::vector<emit::BiasScale>& entries, bool acc48);

}  // namespace cascader::ethos_u85
