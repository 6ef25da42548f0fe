#include "cascader/arch/ethos_u85/weight_encoder.hpp"

#include <algorithm>
#include <string>

#include "cascader/arch/ethos_u85/scale_stream.hpp"
#include "cascader/common/error.hpp"
#include "cascader/common/parallel.hpp"

namespace cascader::ethos_u85 {

namespace {

constexpr size_t kAlignment = 16;
constexpr size_t kScaleChannelGranule = 16;

// Weight minus zero point, OHWI, as the weight order reads it. Channel by channel, and the
// range checked once at the end (a division per weight and a branch in the loop were a fifth
// of the encoder).
template <typename T>
std::vector<int16_t> centred(const T* raw, size_t size, const std::vector<int32_t>& zero_points, size_t volume) {
  std::vector<int16_t> out(size);
  bool out_of_range = false;
  for (size_t channel = 0, at = 0; at < size; ++channel, at += volume) {
    const int64_t zero_point = zero_points[channel];
    const size_t end = std::min(size, at + volume);
    for (size_t i = at; i < end; ++i) {
      const int64_t v = int64_t(raw[i]) - zero_point;
      out_of_range |= (v < -255) | (v > 255);
      out[i] = static_cast<int16_t>(v);
    }
  }
  if (out_of_range) {
    for (size_t i = 0; i < size; ++i) {  // the first value out of range, named
      const size_t channel = i / volume;
      const int64_t v = int64_t(raw[i]) - zero_points[channel];
      if (v < -255 || v > 255) {
        throw InvalidArgument("OFM channel " + std::to_string(channel) + ": weight minus zero point is " +
                              std::to_string(v) + ", outside -255..255");
      }
    }
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

emit::PlannedWeights plan_operation_weights(const emit::RawWeights& ohwi, const std::vector<int32_t>& zero_points,
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

  // Each depth slice is an operation of its own over its channels (the same order, n channels
  // deep): its scale stream and its decoders' streams in order, made on every core, then
  // planned (emit::plan_weight_streams). A stream's bits are written when a binary emits it:
  // the schedule tries encodings it drops (depth slicings that do not pay, the unsliced
  // streams of an operation that slices).
  const int depth_slices = (oc + step - 1) / step;
  std::vector<std::vector<emit::StreamToPlan>> slices(static_cast<size_t>(depth_slices));
  parallel_blocks(static_cast<size_t>(depth_slices), 1, [&](size_t, size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) {
      const int first = static_cast<int>(k) * step, n = std::min(step, oc - first);
      WeightOrder o = order;
      o.ofm_depth = n;
      const std::vector<int16_t> slice(values.begin() + std::ptrdiff_t(size_t(first) * volume),
                                       values.begin() + std::ptrdiff_t(size_t(first + n) * volume));
      std::vector<emit::BiasScale> scales(channels.begin() + first, channels.begin() + first + n);
      scales.resize((scales.size() + kScaleChannelGranule - 1) / kScaleChannelGranule * kScaleChannelGranule);
      for (std::vector<int16_t>& stream : order_u85_weights(slice, o)) {
        slices[k].push_back(emit::StreamToPlan{slices[k].empty() ? encode_scale_stream(scales, acc48)
                                                                  : std::vector<uint8_t>{},
                                               std::move(stream)});
      }
    }
  });
  return emit::plan_weight_streams(std::move(slices));
}

}  // namespace cascader::ethos_u85
