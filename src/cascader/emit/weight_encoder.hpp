// The Ethos-U weight-stream encoder: the inverse of emit::decode_weight_stream.
//
// A stream is a sequence of slices (at most 32768 coded values each), then an end marker
// (ZDIV = 7), byte alignment and 0xFF padding to a multiple of 16 bytes. Every slice carries
// its own parameters, chosen here by exact bit cost over all of them, not greedily:
//  - zero runs on or off, and their Golomb-Rice divisor (ZDIV 0..3);
//  - a palette of the most frequent values (none, or 2..32 entries) with a direct offset
//    for the values outside it;
//  - the weights' Golomb-Rice divisor (WDIV 0..5), truncated quotients (WTRUNC) when every
//    quotient is at most 2, or uncompressed fixed-width indices.
// The cost of a parameter set is computed from value and run histograms (O(512 + runs)), so
// the search is cheap; the slice is then written once with the winner. The winner's exact bits
// (its cost and the unused end of its last unary chunks) give the stream's size before any bit
// is written: the planner needs the sizes of many encodings, a binary the bytes of a few
// (plan_operation_weights, then PlannedWeights::write).
//
// A weight is a 9-bit signed value (the weight minus its zero point, -255..255) coded as
// 2|w| + (w < 0): the code's low bit is the sign.
//
// Complexity: O(values + slices x candidates x 512).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "cascader/emit/weights.hpp"

namespace cascader::emit {

// Compresses values in the NPU's order (weight_order.hpp). Throws InvalidArgument naming the
// position of a value outside -255..255.
std::vector<uint8_t> encode_weight_stream(const std::vector<int16_t>& values);

// Writes recorded slices (decode_weight_slices) back: the same settings and symbols give the
// same bytes, with the end marker's byte padded with ones and the stream with 0xFF to 16
// bytes, as Vela's Ethos-U85 encoder does. Throws InvalidArgument naming the slice whose
// fields or values the format cannot hold.
std::vector<uint8_t> encode_weight_slices(const std::vector<WeightSlice>& slices);

// Where one core's streams of one depth slice sit inside EncodedWeights::data.
struct StreamRanges {
  size_t scale_offset = 0, scale_length = 0;
  size_t weight_offset = 0, weight_length = 0;
};

// One (depth slice, core or weight decoder) stream of a PlannedWeights (its codes and their plans).
struct PlannedStream;

// An operation's encoded constants, laid out as the NPU fetches them: per OFM-depth slice, per
// core, the scale stream then the weight stream, each starting on a 16-byte boundary. Every
// stream's place and length is known once planned, its compression chosen; the weight streams'
// bits are written by write(). The planner needs the sizes of many encodings, a binary the
// bytes of the few it emits. Until dropped it holds the weights' codes (2 bytes a weight; a
// whole stream also its tiles' counts, half a byte a weight, which a depth slicing reads).
struct PlannedWeights {
  std::vector<std::vector<StreamRanges>> slices;  // [depth slice][core]
  size_t size = 0;                                // bytes of the whole data

  // The data: `size` bytes, each stream at its range, zeros between. O(weights); a
  // depth-sliced operation's streams written on every core.
  std::vector<uint8_t> write() const;

  std::shared_ptr<const std::vector<PlannedStream>> streams;  // [depth slice * cores + core]
  // The layout plan_operation_weights planned, when it planned the whole operation as one
  // stream (one depth slice, one core): a depth slicing of the same weights cuts its codes.
  std::optional<WeightLayout> whole_layout;
};

// One stream another weight order made (plan_weight_streams): its scale stream (empty for one
// that carries none) and its values in the order the decoder reads them (weight minus zero
// point, padding 0).
struct StreamToPlan {
  std::vector<uint8_t> scales;
  std::vector<int16_t> values;
};

// Plans the streams of `slices` ([depth slice][stream], as many streams in every slice; the
// Ethos-U85's, one per weight decoder): laid out as plan_operation_weights lays out a slice's
// cores, each stream's scales then its weights on 16-byte boundaries, in order. Throws
// InvalidArgument for slices of different stream counts or a value outside -255..255.
PlannedWeights plan_weight_streams(std::vector<std::vector<StreamToPlan>> slices);

// An operation's raw quantized weights as the model stores them, read in place.
struct RawWeights {
  enum class Type { Int8, UInt8, Int32 };
  const void* data = nullptr;
  size_t size = 0;  // values
  Type type = Type::Int32;
};

// Plans one operation's encoded weights (PlannedWeights: their layout and sizes; write() then
// gives the bytes). `ohwi` holds the raw quantized weights (I = 1 for depthwise), `zero_points`
// one per OFM channel, `channels` the bias and rescale per OFM channel. `layout` describes the
// whole operation (its block depth included); `cores` splits each slice's channels round-robin
// between the cores (the second core of an Ethos-U65-512 takes channels 1, 3, ...) with each
// core's share of the block depth; `depth_step` cuts the OFM depth into slices of that many
// channels (0: one slice), each an independent stream for weight double-buffering. Throws
// InvalidArgument on inconsistent sizes or values out of range. O(weights), as the writing.
// `whole`: the same weights planned for the same layout as one stream (its whole_layout set).
// A depth slicing on one core whose step is a multiple of the block depth then cuts each slice's
// codes from it (the weight order walks OFM blocks outermost, so a slice's are a range of the
// whole's, which it shares) and counts them from its tiles, or takes the whole's plan of the
// same codes: the same streams, in O(slice plans) instead of a reorder and two scans of every
// weight (MobileNetV2-224's depth-slice trials cost a third of its planning's weight encoding).
PlannedWeights plan_operation_weights(const RawWeights& ohwi, const std::vector<int32_t>& zero_points,
                                      const std::vector<BiasScale>& channels, const WeightLayout& layout,
                                      int cores = 1, int depth_step = 0, const PlannedWeights* whole = nullptr);

}  // namespace cascader::emit
