#include "cascader/emit/weights.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "cascader/common/error.hpp"
#include "cascader/emit/weight_order.hpp"

namespace cascader::emit {

namespace {

constexpr int kZDivDisable = 6;  // slice without zero runs
constexpr int kZDivEnd = 7;      // end of stream / padding
constexpr int kWDivUncompressed = 7;

// LSB-first bit reader that refuses to read past the end.
class BitReader {
 public:
  BitReader(const uint8_t* data, size_t size) : data_(data), bits_(size * 8) {}

  uint32_t get(int n) {
    if (n == 0) return 0;
    if (pos_ + static_cast<size_t>(n) > bits_) {
      throw BinaryError("weight stream truncated at bit " + std::to_string(pos_) + " (byte " +
                        std::to_string(pos_ / 8) + ")");
    }
    uint32_t v = 0;
    for (int i = 0; i < n; ++i, ++pos_) v |= static_cast<uint32_t>((data_[pos_ >> 3] >> (pos_ & 7)) & 1) << i;
    return v;
  }
  void align() { pos_ = (pos_ + 7) & ~size_t{7}; }
  bool at_end() const { return pos_ >= bits_; }
  size_t byte() const { return pos_ / 8; }

 private:
  const uint8_t* data_;
  size_t bits_;
  size_t pos_ = 0;
};

[[noreturn]] void bad(const BitReader& in, const std::string& what) {
  throw BinaryError("weight stream byte " + std::to_string(in.byte()) + ": " + what);
}

}  // namespace

int uncompressed_index_bits(int palsize, int palbits) {
  if (palsize == 0) return palbits;
  int bits = 0;
  while ((1 << bits) < palsize) ++bits;
  return bits;
}

namespace {

// Splits one chunk of unary code bits into quotients. A run of ones continues a quotient
// into the next chunk through `carry`.
void unary_zero_runs(uint32_t bits, int len, int& carry, std::vector<int>& out) {
  for (int i = 0; i < len; ++i) {
    if (bits & (1u << i)) {
      ++carry;
    } else {
      out.push_back(carry);
      carry = 0;
    }
  }
}

}  // namespace

std::vector<WeightSlice> decode_weight_slices(const uint8_t* data, size_t size) {
  BitReader in(data, size);
  std::vector<WeightSlice> slices;
  bool have_palette = false, new_section = false;
  int palsize = 0, palbits = 0;
  int prev_zdiv = kZDivDisable;

  while (true) {
    int zdiv = static_cast<int>(in.get(3));
    bool end = false;
    while (zdiv == kZDivEnd) {
      in.align();
      have_palette = false;  // a new section must set up its palette again
      new_section = true;
      if (in.at_end()) {
        end = true;
        break;
      }
      zdiv = static_cast<int>(in.get(3));
    }
    if (end) break;
    if (zdiv > 3 && zdiv != kZDivDisable) bad(in, "reserved ZDIV " + std::to_string(zdiv));
    WeightSlice slice;
    slice.new_section = new_section && !slices.empty();
    new_section = false;
    slice.zdiv = zdiv;
    const bool zero_runs = zdiv != kZDivDisable;
    const int nvalues = static_cast<int>(in.get(15)) + 1;
    slice.wdiv = static_cast<int>(in.get(3));
    slice.wtrunc = in.get(1);
    slice.new_palette = in.get(1);
    if (!slice.new_palette && !have_palette) bad(in, "slice without a palette/direct setup");
    if (!slice.new_palette && zero_runs != (prev_zdiv != kZDivDisable)) {
      bad(in, "zero-run mode changes without a new palette");
    }
    prev_zdiv = zdiv;
    if (slice.new_palette) {
      slice.direct_offset = static_cast<int>(in.get(5));
      palsize = static_cast<int>(in.get(5));
      if (palsize > 0) ++palsize;
      palbits = static_cast<int>(in.get(3)) + 2;
      slice.palbits = palbits;
      slice.palette.resize(static_cast<size_t>(palsize));
      for (auto& entry : slice.palette) entry = static_cast<int16_t>(in.get(palbits));
      have_palette = true;
    }
    const bool wtrunc = slice.wtrunc;
    const bool uncompressed = slice.wdiv == kWDivUncompressed;
    int wdiv = slice.wdiv;
    if (uncompressed) {
      wdiv = uncompressed_index_bits(palsize, palbits);  // only a remainder part, of the index width
    } else if (wdiv > 5) {
      bad(in, "reserved WDIV " + std::to_string(wdiv));
    }

    // Weight and zero-run codes are interleaved chunk by chunk: each chunk carries the unary
    // parts of this step and the remainders of the previous step.
    const int z_count = zero_runs ? nvalues + (slice.new_palette ? 1 : 0) : 0;
    std::vector<uint16_t>& w_value = slice.indices;
    std::vector<int32_t>& z_value = slice.runs;
    w_value.assign(static_cast<size_t>(nvalues), 0);
    z_value.assign(static_cast<size_t>(z_count), 0);
    int w_pos = 0, z_pos = 0, w_prev_pos = 0, z_prev_pos = 0, w_carry = 0, z_carry = 0;
    std::vector<int> w_q, z_q, w_prev_q, z_prev_q;
    bool w_prev = false, z_prev = false;
    const int z_unary_len = zdiv < 3 ? 12 : 8;
    do {
      const int balance = zero_runs ? w_pos - z_pos : 0;
      const bool w_enable = (balance < 8 || !zero_runs) && w_pos < nvalues;
      const bool z_enable = balance >= 0 && zero_runs && z_pos < z_count;
      uint32_t w_unary0 = 0;
      if (w_enable && !uncompressed) w_unary0 = in.get(12);
      z_q.clear();
      if (z_enable) {
        unary_zero_runs(in.get(z_unary_len), z_unary_len, z_carry, z_q);
        z_pos += static_cast<int>(z_q.size());
      }
      w_q.clear();
      if (w_enable) {
        const int max_symbols = uncompressed && wdiv > 5 ? 8 : 12;
        int ones = 0;
        for (int i = 0; i < max_symbols; ++i) ones += (w_unary0 >> i) & 1;
        uint32_t w_unary1 = in.get(ones);
        for (int i = 0; i < max_symbols; ++i) {
          int code = 0;
          if (w_unary0 & (1u << i)) {
            code = 1 + static_cast<int>(w_unary1 & 1);
            w_unary1 >>= 1;
          }
          w_carry += code;
          if (code < 2 || wtrunc) {
            w_q.push_back(w_carry);
            w_carry = 0;
          }
        }
        w_pos += static_cast<int>(w_q.size());
      }
      if (w_prev) {
        for (size_t i = 0; i < w_prev_q.size() && w_prev_pos < nvalues; ++i, ++w_prev_pos) {
          const int index = (w_prev_q[i] << wdiv) + static_cast<int>(in.get(wdiv));
          if (index >= 512) bad(in, "weight index " + std::to_string(index) + " exceeds 9 bits");
          w_value[static_cast<size_t>(w_prev_pos)] = static_cast<uint16_t>(index);
        }
      }
      if (z_prev) {
        for (size_t i = 0; i < z_prev_q.size() && z_prev_pos < z_count; ++i, ++z_prev_pos) {
          z_value[static_cast<size_t>(z_prev_pos)] = (z_prev_q[i] << zdiv) + static_cast<int>(in.get(zdiv));
        }
      }
      w_prev = w_enable;
      z_prev = z_enable;
      std::swap(w_prev_q, w_q);
      std::swap(z_prev_q, z_q);
    } while (w_prev || z_prev);
    slices.push_back(std::move(slice));
  }
  return slices;
}

std::vector<int16_t> expand_weight_slices(const std::vector<WeightSlice>& slices) {
  std::vector<int16_t> out;
  const std::vector<int16_t>* palette = nullptr;
  int direct_offset = 0;
  auto push_zeros = [&](int n) {
    if (n < 0 || out.size() + static_cast<size_t>(n) > (size_t{1} << 28)) {
      throw BinaryError("weight stream: zero run of " + std::to_string(n) + " out of range");
    }
    out.insert(out.end(), static_cast<size_t>(n), int16_t{0});
  };
  for (const WeightSlice& slice : slices) {
    if (slice.new_palette) {
      palette = &slice.palette;
      direct_offset = slice.direct_offset;
    }
    if (palette == nullptr) throw BinaryError("weight stream: slice without a palette/direct setup");
    const int palsize = static_cast<int>(palette->size());
    const bool zero_runs = !slice.runs.empty();
    size_t run = 0;
    if (slice.new_palette && zero_runs) push_zeros(slice.runs[run++]);
    for (const uint16_t index : slice.indices) {
      const int v = index < palsize ? (*palette)[index] : index - palsize + direct_offset;
      const int mag = v >> 1;
      out.push_back(static_cast<int16_t>((v & 1) ? -mag : mag));
      if (zero_runs) push_zeros(slice.runs[run++]);
    }
  }
  return out;
}

std::vector<int16_t> decode_weight_stream(const uint8_t* data, size_t size) {
  return expand_weight_slices(decode_weight_slices(data, size));
}

size_t padded_weight_count(const WeightLayout& layout) {
  check_weight_layout(layout);
  size_t n = 0;
  walk_weight_order(layout, [&](int, int, int, int, int count, int) { n += size_t(count); });
  return n;
}

std::vector<int16_t> unpack_weights(const std::vector<int16_t>& stream, const WeightLayout& l) {
  check_weight_layout(l);
  const int ifm_depth = l.depthwise ? 1 : l.ifm_depth;
  std::vector<int16_t> ohwi(static_cast<size_t>(l.ofm_depth) * l.kernel_height * l.kernel_width * ifm_depth, 0);
  size_t k = 0;
  bool short_stream = false;
  walk_weight_order(l, [&](int o, int y, int x, int i, int count, int valid) {
    if (short_stream || k + size_t(count) > stream.size()) {
      short_stream = true;
      return;
    }
    if (valid > 0) {  // else (o, y, x) may lie outside the kernel
      const size_t at = ((static_cast<size_t>(o) * l.kernel_height + y) * l.kernel_width + x) * ifm_depth + i;
      std::copy_n(stream.begin() + std::ptrdiff_t(k), valid, ohwi.begin() + std::ptrdiff_t(at));
    }
    k += size_t(count);
  });
  if (short_stream) {
    throw BinaryError("weight stream holds " + std::to_string(stream.size()) + " values, the operation needs " +
                      std::to_string(padded_weight_count(l)));
  }
  return ohwi;
}

std::vector<uint8_t> encode_scale_stream(const std::vector<BiasScale>& entries) {
  std::vector<uint8_t> out((entries.size() * 10 + 15) / 16 * 16, 0);
  for (size_t c = 0; c < entries.size(); ++c) {
    const BiasScale& e = entries[c];
    if (e.bias < -(int64_t{1} << 39) || e.bias >= (int64_t{1} << 39)) {
      throw InvalidArgument("channel " + std::to_string(c) + ": bias " + std::to_string(e.bias) +
                            " does not fit 40 signed bits");
    }
    if (e.shift < 0 || e.shift > 63) {
      throw InvalidArgument("channel " + std::to_string(c) + ": shift " + std::to_string(e.shift) + " is outside 0..63");
    }
    uint8_t* p = out.data() + c * 10;
    const uint64_t b = static_cast<uint64_t>(e.bias);
    for (int i = 0; i < 5; ++i) p[i] = static_cast<uint8_t>(b >> (8 * i));
    for (int i = 0; i < 4; ++i) p[5 + i] = static_cast<uint8_t>(e.scale >> (8 * i));
    p[9] = static_cast<uint8_t>(e.shift);
  }
  return out;
}

std::vector<BiasScale> decode_scale_stream(const uint8_t* data, size_t size, size_t count) {
  if (size < count * 10) {
    throw BinaryError("scale stream of " + std::to_string(size) + " bytes is too short for " +
                      std::to_string(count) + " channels (10 bytes each)");
  }
  std::vector<BiasScale> out(count);
  for (size_t c = 0; c < count; ++c) {
    const uint8_t* p = data + c * 10;
    uint64_t b = 0;
    for (int i = 0; i < 5; ++i) b |= static_cast<uint64_t>(p[i]) << (8 * i);
    out[c].bias = static_cast<int64_t>(b << 24) >> 24;  // sign-extend 40 bits
    out[c].scale = static_cast<uint32_t>(p[5]) | (static_cast<uint32_t>(p[6]) << 8) |
                   (static_cast<uint32_t>(p[7]) << 16) | (static_cast<uint32_t>(p[8]) << 24);
    out[c].shift = p[9] & 0x3F;
  }
  return out;
}

}  // namespace cascader::emit
