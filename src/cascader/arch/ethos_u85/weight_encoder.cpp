#include "cascader/arch/ethos_u85/weight_encoder.hpp"

#include <algorithm>
#include <string>

#include "cascader/arch/ethos_u85/scale_stream.hpp"
#include "cascader/common/error.hpp"

namespace cascader::ethos_u85 {

namespace {

constexpr size_t kAlignment = 16;
constexpr size_t kScaleChannelGranule = 16;

// Weight minus zero point, OHWI, as the weight order reads it.
template <typename T>
std::vector<int16_t> centred(const T* raw, size_t size, const std::vector<int32_t>& zero_points, size_t volume) {
  std::vector<int16_t> out(size);
  for (size_t i = 0; i < size; ++i) {
    const size_t channel = i / volume;
    const int64_t v = int64_t(raw[i]) - zero_points[channel];
    if (v < -255 || v > 255) {
      throw InvalidArgument("OFM channel " + std::to_string(channel) + ": weight minus zero point is " +
                            std::to_string(v) + ", outside -255..255");
    }
    out[i] = static_cast<int16_t>(v);
  }
  return out;
}

std::vector<int16_t> centred(const emit::RawWeights& w, const std::vector<int32_t>& zero_points, size_t volume) {
  switch (w.type) {
    case emit::RawWeights::Type::Int8: return centred(static_cast<const int8_t*>(w.data), w.size, zero_points, volume);
    case emit::RawWeights::Type::UInt8: return centred(static_cast<const uint8_t*>(w.data), w.size, zero_points, volume);
    case emit::RawWeights::Type::Int32: break;
  }
  return centred(static_cast<const int32_t*>(w.data), w.size, zero_points, volume);
}

}  // namespace

emit::EncodedWeights encode_operation_weights(const emit::RawWeights& ohwi, const std::vector<int32_t>& zero_points,
                                              const std::vector<emit::BiasScale>& channels, const WeightOrder& order,
                                              bool acc48, int depth_step) {
  const int oc = order.ofm_depth;
  const size_t volume = size_t(order.kernel_height) * size_t(order.kernel_width) * size_t(order.ifm_depth);
  if (oc < 1 || ohwi.size != volume * size_t(oc)) {
    throw InvalidArgument("weights hold " + std::to_string(ohwi.size) + " values; " + std::to_string(oc) +
                          " OFM channels of " + std::to_string(volume) + " need " + std::to_string(volume * size_t(oc)));
  }
  if (zero_points.size() != size_t(oc) || channels.size() != size_t(oc)) {
    throw InvalidArgument("need one zero point and one bias/scale per OFM channel (" + std::to_string(oc) + ")");
  }
  if (depth_step < 0) throw InvalidArgument("depth_step must not be negative");
  const std::vector<int16_t> values = centred(ohwi, zero_points, volume);
  const int step = depth_step > 0 ? depth_step : oc;

  emit::EncodedWeights out;
  auto append = [&](const std::vector<uint8_t>& blob) {
    out.data.resize((out.data.size() + kAlignment - 1) / kAlignment * kAlignment, 0);
    const size_t at = out.data.size();
    out.data.insert(out.data.end(), blob.begin(), blob.end());
    return at;
  };
  for (int first = 0; first < oc; first += step) {
    const int n = std::min(step, oc - first);
    // A slice is an operation of its own over its channels: the same order, n channels deep.
    WeightOrder o = order;
    o.ofm_depth = n;
    const std::vector<int16_t> slice(values.begin() + std::ptrdiff_t(size_t(first) * volume),
                                     values.begin() + std::ptrdiff_t(size_t(first + n) * volume));
    std::vector<emit::BiasScale> scales(channels.begin() + first, channels.begin() + first + n);
    scales.resize((scales.size() + kScaleChannelGranule - 1) / kScaleChannelGranule * kScaleChannelGranule);
    const std::vector<uint8_t> scale_stream = encode_scale_stream(scales, acc48);
    std::vector<emit::StreamRanges> ranges;
    const size_t scale_at = append(scale_stream);
    for (const std::vector<int16_t>& stream : order_u85_weights(slice, o)) {
      const std::vector<uint8_t> coded = emit::encode_weight_stream(stream);
      emit::StreamRanges r;
      r.weight_offset = append(coded);
      r.weight_length = coded.size();
      r.scale_offset = ranges.empty() ? scale_at : r.weight_offset;
      r.scale_length = ranges.empty() ? scale_stream.size() : 0;
      ranges.push_back(r);
    }
    out.slices.push_back(std::move(ranges));
  }
  return out;
}

}  // namespace cascader::ethos_u85
