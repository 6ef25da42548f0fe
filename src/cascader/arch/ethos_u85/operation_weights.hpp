// An Ethos-U85 convolution's weights and per-channel scales, read from its streams as the
// registers place them: one compressed stream per weight decoder (or one fast-weight
// stream), decoded, then put back in OHWI order (weight_order.hpp); one scale stream in the
// accumulator format's layout (scale_stream.hpp).
// Complexity: O(stream bytes + weight values).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "cascader/arch/accelerator.hpp"
#include "cascader/emit/weights.hpp"
#include "cascader/sim/command_stream.hpp"

namespace cascader::ethos_u85 {

struct OperationWeights {
  std::vector<int16_t> ohwi;              // weight minus zero point; I = 1 for depthwise
  std::vector<emit::BiasScale> channels;  // one per OFM channel
};

// The bytes of a stream, checked against its region (the caller's memory); `what` names the
// stream in the caller's errors.
using StreamBytes = std::function<const uint8_t*(const sim::AddressRange& range, const char* what)>;

// Throws BinaryError for malformed streams, streams shorter than the operation needs, or a
// stream layout the decoder does not read (sparse weights).
OperationWeights load_operation_weights(const sim::NpuOperation& op, const AcceleratorConfig& accelerator,
                                        const StreamBytes& bytes);

}  // namespace cascader::ethos_u85
