// The Ethos-U55/U65 weight stream: compressed weights and the bias/scale stream.
//
// Weights are 9-bit signed values (the weight minus its zero point), reordered into the
// order the NPU's weight decoder consumes them (OFM blocks, IFM blocks, sub-kernels of at
// most 8x8, micro-blocks) and compressed with Golomb-Rice codes, optional zero runs and an
// optional palette. The scale stream holds 10 bytes per OFM channel: a 40-bit bias, a 32-bit
// multiplier and a 6-bit shift.
//
// This file holds the stream layout both directions share: the reorder's inverse (unpack) and
// the scale stream. The compression itself is decoded here and encoded in weight_encoder.
// decode_weight_stream is O(stream bits); unpack_weights is O(padded weight count).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cascader::emit {

// Decompresses a weight stream into its sequence of 9-bit values (NPU order, padding
// included). Throws BinaryError on malformed or truncated streams.
std::vector<int16_t> decode_weight_stream(const uint8_t* data, size_t size);

// One slice of a weight stream as it was coded: its header fields and its coded symbols. An
// encoder chooses these freely (slice lengths, divisors, palette, whether to keep the previous
// slice's palette); recording them on decode lets encode_weight_slices write the same bytes.
struct WeightSlice {
  bool new_section = false;  // an end marker and byte alignment precede the slice
  int zdiv = 6;              // zero-run divisor 0..3; 6: no zero runs
  int wdiv = 0;              // weight divisor 0..5; 7: uncompressed fixed-width indices
  bool wtrunc = false;
  bool new_palette = true;   // else the previous slice's palette and direct offset hold
  int direct_offset = 0, palbits = 2;
  std::vector<int16_t> palette;  // 9-bit codes (2|w| + sign)
  std::vector<uint16_t> indices;  // coded values: palette indices, then direct codes
  std::vector<int32_t> runs;      // zero runs: before the first value (new palette only), after each
};

// The slices of a weight stream, in order; the 0xFF padding after the last end marker is
// not recorded (encode_weight_slices pads to 16 bytes). Throws as decode_weight_stream.
std::vector<WeightSlice> decode_weight_slices(const uint8_t* data, size_t size);

// The index width of an uncompressed slice (WDIV 7): that of the palette's indices, or the
// palette-bits field when there is no palette.
int uncompressed_index_bits(int palsize, int palbits);

// The values the slices stand for (decode_weight_stream's result).
std::vector<int16_t> expand_weight_slices(const std::vector<WeightSlice>& slices);

// How a weight volume was laid out in the stream.
struct WeightLayout {
  int ofm_depth = 1;
  int kernel_height = 1, kernel_width = 1;  // undilated
  int ifm_depth = 1;                        // 1 for depthwise
  int ofm_block_depth = 1;
  bool depthwise = false;
  bool part_kernel_first = false;
  int ifm_bits = 8;
  int dilation_x = 1, dilation_y = 1;
  int ifm_ublock_depth = 8, ofm_ublock_depth = 8;
};

// Number of values (padding included) the NPU reads for this layout.
size_t padded_weight_count(const WeightLayout& layout);

// Inverse of the NPU reorder (weight_order.hpp; the encoder reorders as it codes the values):
// stream values -> dense OHWI (I = 1 for depthwise).
// Throws BinaryError when the stream holds fewer values than the layout needs.
std::vector<int16_t> unpack_weights(const std::vector<int16_t>& stream, const WeightLayout& layout);

struct BiasScale {
  int64_t bias = 0;  // 40-bit signed
  uint32_t scale = 0;
  int shift = 0;     // 6 bits
};

// Reads `count` 10-byte bias/scale entries. Throws BinaryError if `size` is too small.
std::vector<BiasScale> decode_scale_stream(const uint8_t* data, size_t size, size_t count);

// Writes 10 bytes per entry, padded with zeros to a multiple of 16 bytes (the alignment the
// NPU's scale fetch expects). Throws InvalidArgument naming the channel when a bias does not
// fit 40 signed bits or a shift 6 bits.
std::vector<uint8_t> encode_scale_stream(const std::vector<BiasScale>& entries);

}  // namespace cascader::emit
