#include "cascader/emit/weight_encoder.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "cascader/common/error.hpp"

namespace cascader::emit {

namespace {

constexpr int kMaxSliceValues = 1 << 15;  // the 15-bit slice length field
constexpr int kZDivDisable = 6;
constexpr int kZDivEnd = 7;
constexpr int kWDivUncompressed = 7;
constexpr int kCodes = 512;  // 9-bit codes
constexpr int kMaxPalette = 32;
constexpr int kMaxDirectOffset = 31;
constexpr size_t kAlignment = 16;

// LSB-first bit writer: bits gather in a 64-bit accumulator and leave a byte at a time.
class BitWriter {
 public:
  void put(uint32_t value, int bits) {
    if (bits == 0) return;
    acc_ |= static_cast<uint64_t>(value & ((uint64_t{1} << bits) - 1)) << fill_;
    fill_ += bits;
    while (fill_ >= 8) {
      bytes_.push_back(static_cast<uint8_t>(acc_));
      acc_ >>= 8;
      fill_ -= 8;
    }
  }
  void reserve(size_t bytes) { bytes_.reserve(bytes); }
  void align() {
    if (fill_ > 0) bytes_.push_back(static_cast<uint8_t>(acc_));
    acc_ = 0;
    fill_ = 0;
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
  uint64_t acc_ = 0;
  int fill_ = 0;
};

int bit_length(int v) {
  int n = 0;
  while ((1 << n) <= v) ++n;
  return n;
}

int code_of(int w) { return w >= 0 ? 2 * w : -2 * w + 1; }

struct Plan {
  bool zero_runs = false;
  int zdiv = 0;
  bool uncompressed = false;
  int wdiv = 0;  // the index width when uncompressed
  bool wtrunc = false;
  std::vector<int> palette;
  int palbits = 2;
  int direct_offset = 0;
  int64_t cost = std::numeric_limits<int64_t>::max();
};

// Bits of a Golomb-Rice code: the quotient in the decoder's unary form (q + 1 bits, or q + 1
// capped at 2 bits when truncated) and the remainder.
// `used` holds (index, count) for the indices that occur.
int64_t weight_bits(const std::vector<std::pair<int, int64_t>>& used, int wdiv, bool trunc) {
  int64_t bits = 0;
  for (const auto& [i, count] : used) {
    const int q = i >> wdiv;
    bits += count * ((trunc ? std::min(q + 1, 2) : q + 1) + wdiv);
  }
  return bits;
}

// The cheapest plan for one slice. `codes` are the slice's values as 9-bit codes.
Plan choose_plan(const std::vector<int>& codes) {
  std::array<int64_t, kCodes> all{}, nonzero{};
  // Zero runs: the zeros before the first nonzero value and after each one. A run of r costs
  // (r >> zdiv) + 1 + zdiv bits: the quotients are summed per divisor in the same pass.
  std::array<int64_t, 4> run_quotients{};
  int64_t run_count = 0, run = 0;
  auto end_run = [&](int64_t r) {
    for (int z = 0; z < 4; ++z) run_quotients[static_cast<size_t>(z)] += r >> z;
    ++run_count;
  };
  for (int c : codes) {
    ++all[static_cast<size_t>(c)];
    if (c == 0) {
      ++run;
    } else {
      end_run(run);
      run = 0;
    }
  }
  end_run(run);
  nonzero = all;
  nonzero[0] = 0;
  Plan best;
  const int64_t nonzero_count = static_cast<int64_t>(codes.size()) - all[0];
  if (nonzero_count == 0) {
    // A slice codes at least one value: an all-zero slice codes its last zero, the rest is a run.
    run_quotients = {};
    run_count = 0;
    end_run(static_cast<int64_t>(codes.size()) - 1);
    end_run(0);
    nonzero[0] = 1;
  }
  // The zero-run divisor only changes the runs' own bits: pick it first, then search the
  // weight parameters once with zero runs and once without (-1).
  int best_zdiv = 0;
  int64_t best_run_bits = std::numeric_limits<int64_t>::max();
  for (int zdiv = 0; zdiv <= 3; ++zdiv) {
    const int64_t bits = run_quotients[static_cast<size_t>(zdiv)] + run_count * (1 + zdiv);
    if (bits < best_run_bits) {
      best_run_bits = bits;
      best_zdiv = zdiv;
    }
  }
  for (int zr : {-1, best_zdiv}) {  // -1: no zero runs
    const std::array<int64_t, kCodes>& hist = zr >= 0 ? nonzero : all;
    const int64_t run_bits = zr >= 0 ? best_run_bits : 0;
    // Palettes: the k most frequent codes, ties to the smaller code.
    std::vector<int> order;
    for (int c = 0; c < kCodes; ++c) {
      if (hist[c]) order.push_back(c);
    }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return hist[a] > hist[b]; });
    const int distinct = static_cast<int>(order.size());
    std::vector<int> sizes{0};
    for (int k : {2, 3, 4, 6, 8, 12, 16, 24, 32, distinct}) {
      if (k >= 2 && k <= std::min(distinct, kMaxPalette) && std::find(sizes.begin(), sizes.end(), k) == sizes.end()) {
        sizes.push_back(k);
      }
    }
    for (int k : sizes) {
      std::vector<int> palette(order.begin(), order.begin() + k);
      std::array<int, kCodes> index{};
      std::array<bool, kCodes> in_palette{};
      for (int i = 0; i < k; ++i) {
        index[palette[static_cast<size_t>(i)]] = i;
        in_palette[palette[static_cast<size_t>(i)]] = true;
      }
      int lowest = kCodes, highest = -1;
      for (int c = 0; c < kCodes; ++c) {
        if (hist[c] && !in_palette[c]) {
          lowest = std::min(lowest, c);
          highest = std::max(highest, c);
        }
      }
      const int direct_offset = highest < 0 ? 0 : std::min(lowest, kMaxDirectOffset);
      bool fits = true;
      std::array<int64_t, kCodes> index_hist{};
      for (int c = 0; c < kCodes; ++c) {
        if (!hist[c]) continue;
        const int i = in_palette[c] ? index[c] : c - direct_offset + k;
        if (i >= kCodes) fits = false;
        else index_hist[i] += hist[c];
      }
      if (!fits) continue;
      int palbits = 2;
      for (int c : palette) palbits = std::max(palbits, bit_length(c));
      const int64_t header = 23 + 13 + static_cast<int64_t>(k) * palbits;
      auto consider = [&](bool uncompressed, int wdiv, bool trunc, int plan_palbits, int64_t wbits) {
        const int64_t cost = header - static_cast<int64_t>(k) * palbits + static_cast<int64_t>(k) * plan_palbits +
                             wbits + run_bits;
        if (cost < best.cost) {
          best = Plan{zr >= 0, std::max(zr, 0), uncompressed, wdiv, trunc, palette, plan_palbits, direct_offset, cost};
        }
      };
      int max_index = 0;
      std::vector<std::pair<int, int64_t>> used;
      for (int i = 0; i < kCodes; ++i) {
        if (!index_hist[i]) continue;
        max_index = i;
        used.emplace_back(i, index_hist[i]);
      }
      for (int wdiv = 0; wdiv <= 5; ++wdiv) {
        consider(false, wdiv, false, palbits, weight_bits(used, wdiv, false));
        if ((max_index >> wdiv) <= 2) consider(false, wdiv, true, palbits, weight_bits(used, wdiv, true));
      }
      // Uncompressed: fixed-width indices. With a palette every value must be in it (the
      // width is the palette's index width); without, the width is the palette-bits field.
      const int64_t n = std::accumulate(index_hist.begin(), index_hist.end(), int64_t{0});
      if (k > 0 && k == distinct) {
        const int width = std::max(bit_length(k - 1), 1);
        consider(true, width, false, palbits, n * width);
      } else if (k == 0) {
        const int width = std::max(bit_length(max_index), 2);
        if (width <= 9) consider(true, width, false, width, n * width);
      }
    }
  }
  return best;
}

void write_slice(BitWriter& out, const Plan& p, const std::vector<int>& codes) {
  // The coded values (indices) and the zero runs between them.
  std::array<int, kCodes> index{};
  std::array<bool, kCodes> in_palette{};
  const int palsize = static_cast<int>(p.palette.size());
  for (int i = 0; i < palsize; ++i) {
    index[p.palette[static_cast<size_t>(i)]] = i;
    in_palette[p.palette[static_cast<size_t>(i)]] = true;
  }
  std::vector<int> values, runs;
  values.reserve(codes.size());
  if (p.zero_runs) {
    runs.reserve(codes.size() + 1);
    runs.push_back(0);
  }
  const bool all_zero = std::all_of(codes.begin(), codes.end(), [](int c) { return c == 0; });
  for (size_t k = 0; k < codes.size(); ++k) {
    const int c = codes[k];
    if (p.zero_runs && c == 0 && !(all_zero && k + 1 == codes.size())) {
      ++runs.back();
      continue;
    }
    values.push_back(in_palette[c] ? index[c] : c - p.direct_offset + palsize);
    if (p.zero_runs) runs.push_back(0);
  }
  const int nvalues = static_cast<int>(values.size());
  const int z_count = static_cast<int>(runs.size());

  out.put(static_cast<uint32_t>(p.zero_runs ? p.zdiv : kZDivDisable), 3);
  out.put(static_cast<uint32_t>(nvalues - 1), 15);
  out.put(static_cast<uint32_t>(p.uncompressed ? kWDivUncompressed : p.wdiv), 3);
  out.put(p.wtrunc ? 1 : 0, 1);
  out.put(1, 1);  // every slice sets up its own palette and direct offset
  out.put(static_cast<uint32_t>(p.direct_offset), 5);
  out.put(static_cast<uint32_t>(palsize ? palsize - 1 : 0), 5);
  out.put(static_cast<uint32_t>(p.palbits - 2), 3);
  for (int c : p.palette) out.put(static_cast<uint32_t>(c), p.palbits);

  const int wdiv = p.wdiv;  // the index width when uncompressed
  // The quotients as the decoder's symbols: 0 ends a quotient, 1 adds one and ends it, 2 adds
  // two and continues (ends it when truncated).
  std::vector<uint8_t> w_symbols;
  if (!p.uncompressed) {
    w_symbols.reserve(values.size() * 2);
    for (int v : values) {
      const int q = v >> wdiv;
      if (p.wtrunc) {
        w_symbols.push_back(static_cast<uint8_t>(q));
      } else {
        for (int k = q / 2; k > 0; --k) w_symbols.push_back(2);
        w_symbols.push_back(static_cast<uint8_t>(q & 1));
      }
    }
  }
  std::vector<uint8_t> z_bits;  // unary: ones, then a zero ends the quotient
  z_bits.reserve(runs.size() * 2);
  for (int r : runs) {
    for (int k = r >> p.zdiv; k > 0; --k) z_bits.push_back(1);
    z_bits.push_back(0);
  }
  const int z_unary_len = p.zdiv < 3 ? 12 : 8;
  const int max_symbols = p.uncompressed && wdiv > 5 ? 8 : 12;

  // The decoder's chunk loop, mirrored: each step carries this step's unary parts and the
  // previous step's remainders.
  int w_pos = 0, z_pos = 0;
  size_t w_sym = 0, z_sym = 0;
  std::vector<int> w_prev, w_cur, z_prev, z_cur;
  bool w_prev_on = false, z_prev_on = false;
  do {
    const int balance = p.zero_runs ? w_pos - z_pos : 0;
    const bool w_enable = (balance < 8 || !p.zero_runs) && w_pos < nvalues;
    const bool z_enable = balance >= 0 && p.zero_runs && z_pos < z_count;
    w_cur.clear();
    z_cur.clear();
    auto w_symbol = [&](size_t k) -> int { return w_sym + k < w_symbols.size() ? w_symbols[w_sym + k] : 0; };
    if (w_enable && !p.uncompressed) {
      uint32_t unary0 = 0;
      for (int k = 0; k < 12; ++k) unary0 |= static_cast<uint32_t>(w_symbol(static_cast<size_t>(k)) != 0) << k;
      out.put(unary0, 12);
    }
    if (z_enable) {
      uint32_t unary = 0;
      for (int k = 0; k < z_unary_len; ++k, ++z_sym) {
        const int bit = z_sym < z_bits.size() ? z_bits[z_sym] : 0;
        unary |= static_cast<uint32_t>(bit) << k;
        if (!bit) z_cur.push_back(z_pos++);
      }
      out.put(unary, z_unary_len);
    }
    if (w_enable) {
      if (p.uncompressed) {
        for (int k = 0; k < max_symbols; ++k) w_cur.push_back(w_pos++);
      } else {
        uint32_t unary1 = 0;
        int ones = 0;
        for (int k = 0; k < 12; ++k) {
          const int s = w_symbol(static_cast<size_t>(k));
          if (s) unary1 |= static_cast<uint32_t>(s == 2) << ones++;
          if (s < 2 || p.wtrunc) w_cur.push_back(w_pos++);
        }
        out.put(unary1, ones);
        w_sym += 12;
      }
    }
    if (w_prev_on) {
      for (int v : w_prev) {
        if (v < nvalues) out.put(static_cast<uint32_t>(values[static_cast<size_t>(v)] & ((1 << wdiv) - 1)), wdiv);
      }
    }
    if (z_prev_on) {
      for (int r : z_prev) {
        if (r < z_count) out.put(static_cast<uint32_t>(runs[static_cast<size_t>(r)] & ((1 << p.zdiv) - 1)), p.zdiv);
      }
    }
    w_prev_on = w_enable;
    z_prev_on = z_enable;
    std::swap(w_prev, w_cur);
    std::swap(z_prev, z_cur);
  } while (w_prev_on || z_prev_on);
}

}  // namespace

std::vector<uint8_t> encode_weight_stream(const std::vector<int16_t>& values) {
  std::vector<int> codes(std::max<size_t>(values.size(), 1), 0);  // an empty stream still needs one slice
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < -255 || values[i] > 255) {
      throw InvalidArgument("weight value " + std::to_string(values[i]) + " at stream position " + std::to_string(i) +
                            " is outside -255..255 (9 bits after the zero point)");
    }
    codes[i] = code_of(values[i]);
  }
  // Where the slices end changes their statistics: full slices then a remainder, or equal
  // slices. Both are costed from their plans and the cheaper one is written.
  const size_t n = codes.size();
  const size_t count = (n + kMaxSliceValues - 1) / kMaxSliceValues;
  std::vector<size_t> full, equal;
  for (size_t k = 1; k <= count; ++k) {
    full.push_back(std::min(n, k * kMaxSliceValues));
    equal.push_back(n * k / count);
  }
  auto slices = [&](const std::vector<size_t>& ends) {
    std::vector<std::pair<std::vector<int>, Plan>> out;
    size_t begin = 0;
    for (size_t e : ends) {
      std::vector<int> part(codes.begin() + static_cast<std::ptrdiff_t>(begin), codes.begin() + static_cast<std::ptrdiff_t>(e));
      Plan plan = choose_plan(part);
      out.emplace_back(std::move(part), std::move(plan));
      begin = e;
    }
    return out;
  };
  auto total = [](const std::vector<std::pair<std::vector<int>, Plan>>& parts) {
    int64_t bits = 0;
    for (const auto& part : parts) bits += part.second.cost;
    return bits;
  };
  auto chosen = slices(full);
  if (count > 1) {
    auto alternative = slices(equal);
    if (total(alternative) < total(chosen)) chosen = std::move(alternative);
  }
  BitWriter out;
  out.reserve(n * 9 / 8 + 64 * chosen.size());  // at most 9 bits a value, and the slice headers
  for (const auto& [part, plan] : chosen) write_slice(out, plan, part);
  out.put(kZDivEnd, 3);
  out.align();
  std::vector<uint8_t>& bytes = out.bytes();
  bytes.resize((bytes.size() + kAlignment - 1) / kAlignment * kAlignment, 0xFF);  // more end markers
  return bytes;
}

EncodedWeights encode_operation_weights(const std::vector<int32_t>& ohwi, const std::vector<int32_t>& zero_points,
                                        const std::vector<BiasScale>& channels, const WeightLayout& layout, int cores,
                                        int depth_step) {
  const int oc = layout.ofm_depth;
  const size_t volume =
      static_cast<size_t>(layout.kernel_height) * layout.kernel_width * (layout.depthwise ? 1 : layout.ifm_depth);
  if (oc < 1 || ohwi.size() != volume * static_cast<size_t>(oc)) {
    throw InvalidArgument("weights hold " + std::to_string(ohwi.size()) + " values; " + std::to_string(oc) +
                          " OFM channels of " + std::to_string(volume) + " need " + std::to_string(volume * oc));
  }
  if (zero_points.size() != static_cast<size_t>(oc) || channels.size() != static_cast<size_t>(oc)) {
    throw InvalidArgument("need one zero point and one bias/scale per OFM channel (" + std::to_string(oc) + ")");
  }
  if (cores < 1 || cores > 2) throw InvalidArgument("cores must be 1 or 2, got " + std::to_string(cores));
  if (depth_step < 0) throw InvalidArgument("depth_step must not be negative");
  const int step = depth_step > 0 ? depth_step : oc;
  EncodedWeights out;
  auto append = [&](const std::vector<uint8_t>& blob) {
    out.data.resize((out.data.size() + kAlignment - 1) / kAlignment * kAlignment, 0);
    const size_t at = out.data.size();
    out.data.insert(out.data.end(), blob.begin(), blob.end());
    return at;
  };
  for (int first = 0; first < oc; first += step) {
    const int n = std::min(step, oc - first);
    std::vector<StreamRanges> streams;
    for (int core = 0; core < cores; ++core) {
      std::vector<int16_t> part;
      part.reserve(volume * static_cast<size_t>((n + cores - 1) / cores));
      std::vector<BiasScale> scales;
      for (int c = first + core; c < first + n; c += cores) {
        for (size_t k = 0; k < volume; ++k) {
          const int64_t w = int64_t(ohwi[static_cast<size_t>(c) * volume + k]) - zero_points[static_cast<size_t>(c)];
          if (w < -255 || w > 255) {
            throw InvalidArgument("OFM channel " + std::to_string(c) + ": weight minus zero point is " +
                                  std::to_string(w) + ", outside -255..255");
          }
          part.push_back(static_cast<int16_t>(w));
        }
        scales.push_back(channels[static_cast<size_t>(c)]);
      }
      StreamRanges r;
      if (!scales.empty()) {
        WeightLayout l = layout;
        l.ofm_depth = static_cast<int>(scales.size());
        l.ofm_block_depth = (layout.ofm_block_depth + cores - 1 - core) / cores;
        const std::vector<uint8_t> s = encode_scale_stream(scales);
        r.scale_offset = append(s);
        r.scale_length = s.size();
        const std::vector<uint8_t> w = encode_weight_stream(pack_weights(part, l));
        r.weight_offset = append(w);
        r.weight_length = w.size();
      }
      streams.push_back(r);
    }
    out.slices.push_back(std::move(streams));
  }
  return out;
}

}  // namespace cascader::emit
