// The Ethos-U85 weight and scale encoder: an operation's constants in the streams its weight
// decoders read. The inverse of operation_weights.hpp, over the same tables: the weight order
// of weight_order.hpp (one stream per decoder in use), each stream compressed by the Ethos-U
// weight codec (emit/weight_encoder.hpp, which the U85 reads as the U55 does), and one scale
// stream in the accumulator format's layout (scale_stream.hpp), padded with zero entries to a
// multiple of 16 channels.
//
// Layout of the data (emit::PlannedWeights, whose write() gives the bytes), per OFM-depth
// slice: the scale stream, then each decoder's weight stream, each on a 16-byte boundary. A
// slice's StreamRanges are one per weight stream; the first carries the scale stream (the
// others' scale_length is 0).
// Complexity: O(weight values + slices x codec search).
#pragma once

#include <cstdint>
#include <vector>

#include "cascader/arch/ethos_u85/weight_order.hpp"
#include "cascader/emit/weight_encoder.hpp"

namespace cascader::ethos_u85 {

// `ohwi`: the raw quantized weights (I = 1 for depthwise), `zero_points` and `channels` one per
// OFM channel; `order` the whole operation's (its ofm_depth the OFM depth); `acc48` the
// accumulator format; `depth_step` cuts the OFM depth into independent slices of that many
// channels (0: one). Throws InvalidArgument for inconsistent sizes, a weight minus its zero
// point outside -255..255, or a bias/scale the scale entry cannot hold.
emit::PlannedWeights plan_operation_weights(const emit::RawWeights& ohwi, const std::vector<int32_t>& zero_points,
                                             const std::vector<emit::BiasScale>& channels, const WeightOrder& order,
                                             bool acc48, int depth_step = 0);

}  // namespace cascader::ethos_u85
