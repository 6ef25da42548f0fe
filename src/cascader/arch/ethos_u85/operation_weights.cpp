#include "cascader/arch/ethos_u85/operation_weights.hpp"

#include <string>

#include "cascader/arch/ethos_u85/fast_weights.hpp"
#include "cascader/arch/ethos_u85/scale_stream.hpp"
#include "cascader/arch/ethos_u85/weight_order.hpp"
#include "cascader/common/error.hpp"

namespace cascader::ethos_u85 {

OperationWeights load_operation_weights(const sim::NpuOperation& op, const AcceleratorConfig& accelerator,
                                        const StreamBytes& bytes) {
  const WeightOrder order = weight_order_of(op, accelerator);
  const std::vector<size_t> counts = stream_value_counts(order);
  if (counts.size() > op.u85.weight_streams.size()) {
    throw BinaryError("command stream word " + std::to_string(op.word_offset) + ": " + std::to_string(counts.size()) +
                      " weight streams needed, the registers hold 4");
  }
  std::vector<std::vector<int16_t>> streams;
  for (size_t s = 0; s < counts.size(); ++s) {
    const sim::AddressRange& r = op.u85.weight_streams[s];
    const uint8_t* data = bytes(r, "weight stream");
    streams.push_back(order.fast ? decode_fast_weights(data, r.length, counts[s]).values
                                 : emit::decode_weight_stream(data, r.length));
  }
  OperationWeights w;
  w.ohwi = unpack_u85_weights(streams, order);
  const uint8_t* scales = bytes(op.scales, "scale stream");
  w.channels = decode_scale_stream(scales, op.scales.length, static_cast<size_t>(op.ofm.depth), op.acc_format == 1);
  return w;
}

}  // namespace cascader::ethos_u85
