#include "cascader/arch/ethos_u85/scale_stream.hpp"

#include <string>

#include "cascader/common/error.hpp"

namespace cascader::ethos_u85 {

namespace {

constexpr size_t kEntryBytes = 10;

// Byte widths of the bias and scale fields per format.
int bias_bytes(bool acc48) { return acc48 ? 6 : 4; }
int scale_bits(bool acc48) { return acc48 ? 15 : 31; }

}  // namespace

std::vector<emit::BiasScale> decode_scale_stream(const uint8_t* data, size_t size, size_t count, bool acc48) {
  if (size < count * kEntryBytes) {
    throw BinaryError("scale stream of " + std::to_string(size) + " bytes is too short for " + std::to_string(count) +
                      " channels (10 bytes each)");
  }
  const int nb = bias_bytes(acc48), sb = scale_bits(acc48);
  std::vector<emit::BiasScale> out(count);
  for (size_t c = 0; c < count; ++c) {
    const uint8_t* p = data + c * kEntryBytes;
    uint64_t bias = 0, scale = 0;
    for (int i = 0; i < nb; ++i) bias |= static_cast<uint64_t>(p[i]) << (8 * i);
    for (int i = nb; i < 8; ++i) scale |= static_cast<uint64_t>(p[i]) << (8 * (i - nb));
    if ((scale >> sb) != 0 || (p[8] & 0xC0) != 0 || p[9] != 0) {
      throw BinaryError("scale stream channel " + std::to_string(c) + ": reserved bits are set");
    }
    const int unused = 64 - 8 * nb;
    out[c].bias = static_cast<int64_t>(bias << unused) >> unused;  // sign-extend
    out[c].scale = static_cast<uint32_t>(scale);
    out[c].shift = p[8];
  }
  return out;
}

std::vector<uint8_t> encode_scale_stream(const std::vector<emit::BiasScale>& entries, bool acc48) {
  const int nb = bias_bytes(acc48), sb = scale_bits(acc48);
  std::vector<uint8_t> out(entries.size() * kEntryBytes, 0);
  for (size_t c = 0; c < entries.size(); ++c) {
    const emit::BiasScale& e = entries[c];
    const int64_t limit = int64_t{1} << (8 * nb - 1);
    if (e.bias < -limit || e.bias >= limit || (uint64_t{e.scale} >> sb) != 0 || e.shift < 0 || e.shift > 63) {
      throw InvalidArgument("channel " + std::to_string(c) + ": bias " + std::to_string(e.bias) + ", scale " +
                            std::to_string(e.scale) + " or shift " + std::to_string(e.shift) + " does not fit the " +
                            (acc48 ? "48" : "32") + "-bit accumulator's scale entry");
    }
    uint8_t* p = out.data() + c * kEntryBytes;
    const uint64_t b = static_cast<uint64_t>(e.bias);
    for (int i = 0; i < nb; ++i) p[i] = static_cast<uint8_t>(b >> (8 * i));
    for (int i = nb; i < 8; ++i) p[i] = static_cast<uint8_t>(e.scale >> (8 * (i - nb)));
    p[8] = static_cast<uint8_t>(e.shift);
  }
  return out;
}

}  // namespace cascader::ethos_u85
