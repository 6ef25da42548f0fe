#include "cascader/emit/weight_encoder.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "cascader/common/error.hpp"
#include "cascader/common/parallel.hpp"
#include "cascader/emit/weight_order.hpp"

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
// The decoder reads the unary parts in chunks: 12 weight symbols, and 12 zero-run bits (8 with
// ZDIV 3); the last chunk of each is written whole.
constexpr int kWeightChunk = 12;
int run_chunk(int zdiv) { return zdiv < 3 ? 12 : 8; }

// LSB-first bit writer: bits gather in a 64-bit accumulator and leave 32 at a time, so a put
// costs a shift and an or; the stream is written byte by byte only at the final alignment.
class BitWriter {
 public:
  void put(uint32_t value, int bits) {  // bits <= 32
    acc_ |= static_cast<uint64_t>(value & static_cast<uint32_t>((uint64_t{1} << bits) - 1)) << fill_;
    fill_ += bits;
    if (fill_ >= 32) {
      if (size_ + 4 > bytes_.size()) bytes_.resize(std::max<size_t>(2 * bytes_.size(), 64));
      for (int i = 0; i < 4; ++i) bytes_[size_++] = static_cast<uint8_t>(acc_ >> (8 * i));
      acc_ >>= 32;
      fill_ -= 32;
    }
  }
  void reserve(size_t bytes) { bytes_.resize(std::max(bytes_.size(), bytes)); }
  // Ends the byte; its unused bits are zeros, or ones where `ones` (as Vela's U85 encoder pads
  // after an end marker).
  void align(bool ones = false) {
    if (ones && (fill_ & 7)) {
      const int pad = 8 - (fill_ & 7);
      acc_ |= ((uint64_t{1} << pad) - 1) << fill_;
      fill_ += pad;
    }
    if (size_ + 4 > bytes_.size()) bytes_.resize(size_ + 4);
    for (; fill_ > 0; fill_ -= 8, acc_ >>= 8) bytes_[size_++] = static_cast<uint8_t>(acc_);
    acc_ = 0;
    fill_ = 0;
  }
  // The written bytes; call align() first.
  std::vector<uint8_t>& bytes() {
    bytes_.resize(size_);
    return bytes_;
  }

 private:
  std::vector<uint8_t> bytes_;
  size_t size_ = 0;
  uint64_t acc_ = 0;
  int fill_ = 0;
};

// A slice's coded values: a view into the stream's codes.
struct Codes {
  const uint16_t* data;
  size_t count;
  size_t size() const { return count; }
  const uint16_t* begin() const { return data; }
  const uint16_t* end() const { return data + count; }
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
  int64_t cost = std::numeric_limits<int64_t>::max();  // the bits the choice compares
  // The bits the slice writes: `cost` and the unused symbols of the last unary chunk of the
  // weights and of the zero runs (write_slice_codes writes whole chunks). The stream's size
  // follows from these without writing it.
  int64_t bits = 0;
};

// The symbols (or bits) a chunk of `chunk` holds that `symbols` leave unused in the last one.
int64_t chunk_padding(int64_t symbols, int chunk) { return (chunk - symbols % chunk) % chunk; }

// The zero runs of consecutive codes, as choose_plan costs them: the zeros before the first
// nonzero code and after the last (both the whole length when every code is zero), and per
// zero-run divisor the summed quotients (r >> zdiv) of the maximal runs between. Those of two
// adjacent ranges combine (then), so a range's follow from fixed tiles' (CodeTiles).
struct ZeroRuns {
  int64_t length = 0, lead = 0, trail = 0;
  std::array<int64_t, 4> inner{};

  bool all_zero() const { return lead == length; }
  // The runs of this range followed by `next`.
  ZeroRuns then(const ZeroRuns& next) const {
    if (length == 0) return next;
    if (next.length == 0) return *this;
    ZeroRuns out;
    out.length = length + next.length;
    if (all_zero()) {
      out.lead = length + next.lead;
      out.trail = next.all_zero() ? out.length : next.trail;
      out.inner = next.inner;
    } else if (next.all_zero()) {
      out.lead = lead;
      out.trail = trail + next.length;
      out.inner = inner;
    } else {
      out.lead = lead;
      out.trail = next.trail;
      for (size_t z = 0; z < 4; ++z) out.inner[z] = inner[z] + next.inner[z] + ((trail + next.lead) >> z);
    }
    return out;
  }
  // Per divisor, the quotients of every maximal run of the range.
  std::array<int64_t, 4> quotients() const {
    std::array<int64_t, 4> q{};
    for (size_t z = 0; z < 4; ++z) q[z] = all_zero() ? length >> z : inner[z] + (lead >> z) + (trail >> z);
    return q;
  }
};

ZeroRuns zero_runs_of(const uint16_t* codes, size_t size) {
  ZeroRuns out;
  out.length = static_cast<int64_t>(size);
  size_t k = 0;
  while (k < size && codes[k] == 0) ++k;
  out.lead = static_cast<int64_t>(k);
  if (k == size) {
    out.trail = out.length;
    return out;
  }
  size_t end = size;
  while (codes[end - 1] == 0) --end;  // codes[k] is nonzero
  out.trail = static_cast<int64_t>(size - end);
  // Most runs between are empty and add no quotient, so the scan jumps from zero to zero, four
  // codes at a time between them (a branch per code was a tenth of the encoder: zeros are a few
  // percent of the codes and fall anywhere).
  while (k < end) {
    for (uint64_t four; k + 4 <= end; k += 4) {
      std::memcpy(&four, codes + k, sizeof four);
      // Any 16-bit lane zero (codes stay below 2^9, so no lane has its top bit set).
      if ((four - 0x0001000100010001ULL) & ~four & 0x8000800080008000ULL) break;
    }
    while (k < end && codes[k] != 0) ++k;
    const size_t begin = k;
    while (k < end && codes[k] == 0) ++k;
    for (size_t z = 0; z < 4; ++z) out.inner[z] += static_cast<int64_t>(k - begin) >> z;
  }
  return out;
}

// Adds the counts of each code of `codes` to `counts`: four interleaved histograms, since a run
// of equal codes would otherwise make each increment wait for the one before (this loop was a
// third of the encoder's time). `partial` is scratch, all zeros before and after.
using Partials = std::array<std::array<uint32_t, kCodes>, 4>;
void count_codes(const uint16_t* codes, size_t size, Partials& partial, uint32_t* counts) {
  size_t at = 0;
  for (; at + 4 <= size; at += 4) {
    for (size_t j = 0; j < 4; ++j) ++partial[j][codes[at + j]];
  }
  for (; at < size; ++at) ++partial[0][codes[at]];
  for (size_t c = 0; c < kCodes; ++c) {
    counts[c] += partial[0][c] + partial[1][c] + partial[2][c] + partial[3][c];
    partial[0][c] = partial[1][c] = partial[2][c] = partial[3][c] = 0;
  }
}

// Statistics of a stream's codes by tiles of kTile, from which those of any range of it follow
// with a scan of its ends only (range_stats): a slice plan of 32768 codes, whether the stream's
// own (plan_codes costs two slicings of a long stream) or a depth slice's cut from the codes of
// the whole operation (plan_raw), reads its counts as a difference of two rows.
// O(codes) to make, kCodes words a tile (a quarter of the codes' bytes).
struct CodeTiles {
  static constexpr size_t kTile = 4096;
  std::vector<uint32_t> before;  // [tile boundary - 1][code]: the counts before boundaries 1, 2, ...
  std::vector<ZeroRuns> runs;    // per whole tile
};

CodeTiles tiles_of(const uint16_t* codes, size_t n) {
  CodeTiles tiles;
  const size_t count = n / CodeTiles::kTile;
  tiles.before.assign(count * kCodes, 0);
  tiles.runs.reserve(count);
  auto partial = std::make_unique<Partials>();
  std::array<uint32_t, kCodes> running{};
  for (size_t t = 0; t < count; ++t) {
    const uint16_t* tile = codes + t * CodeTiles::kTile;
    count_codes(tile, CodeTiles::kTile, *partial, running.data());
    std::copy(running.begin(), running.end(), tiles.before.begin() + static_cast<std::ptrdiff_t>(t * kCodes));
    tiles.runs.push_back(zero_runs_of(tile, CodeTiles::kTile));
  }
  return tiles;
}

// The counts and zero runs of codes [begin, end) of the stream `codes` whose tiles are `tiles`.
struct RangeStats {
  std::array<int64_t, kCodes> counts{};
  ZeroRuns runs;
};

RangeStats range_stats(const uint16_t* codes, const CodeTiles& tiles, size_t begin, size_t end) {
  RangeStats out;
  std::array<uint32_t, kCodes> counts{};
  auto partial = std::make_unique<Partials>();
  const size_t first = (begin + CodeTiles::kTile - 1) / CodeTiles::kTile, last = end / CodeTiles::kTile;
  if (first >= last || last > tiles.runs.size()) {  // within one tile (or tiles not made): scanned
    count_codes(codes + begin, end - begin, *partial, counts.data());
    out.runs = zero_runs_of(codes + begin, end - begin);
  } else {
    const size_t head = first * CodeTiles::kTile, tail = last * CodeTiles::kTile;
    count_codes(codes + begin, head - begin, *partial, counts.data());
    count_codes(codes + tail, end - tail, *partial, counts.data());
    const uint32_t* upto = tiles.before.data() + (last - 1) * kCodes;
    const uint32_t* from = first > 0 ? tiles.before.data() + (first - 1) * kCodes : nullptr;
    for (size_t c = 0; c < kCodes; ++c) counts[c] += upto[c] - (from ? from[c] : 0);
    out.runs = zero_runs_of(codes + begin, head - begin);
    for (size_t t = first; t < last; ++t) out.runs = out.runs.then(tiles.runs[t]);
    out.runs = out.runs.then(zero_runs_of(codes + tail, end - tail));
  }
  for (size_t c = 0; c < kCodes; ++c) out.counts[c] = counts[c];
  return out;
}

// The slice search's reductions over the codes (per palette size, per divisor) are most of a
// plan's time, and the baseline x86-64 build vectorises their 32-bit products four lanes wide,
// in emulated multiplies: where GCC can dispatch at load time (x86-64 Linux), an AVX2 copy runs
// on the processors that have it (the same integers: the same plans, bit for bit).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define CASCADER_AVX2_CLONE __attribute__((target_clones("avx2", "default")))
#else
#define CASCADER_AVX2_CLONE
#endif

// The cheapest plan for one slice of `size` codes, from their counts (`all`, by 9-bit code)
// and their zero runs.
CASCADER_AVX2_CLONE Plan choose_plan(const std::array<int64_t, kCodes>& all, const ZeroRuns& runs, size_t size) {
  // Zero runs: the zeros before the first nonzero value and after each one. A run of r costs
  // (r >> zdiv) + 1 + zdiv bits: the quotients are summed per divisor.
  std::array<int64_t, 4> run_quotients = runs.quotients();
  auto end_run = [&](int64_t r) {
    for (int z = 0; z < 4; ++z) run_quotients[static_cast<size_t>(z)] += r >> z;
  };
  const int64_t nonzero_count = static_cast<int64_t>(size) - all[0];
  int64_t run_count = nonzero_count + 1;  // one ended by each nonzero value, and the last one
  std::array<int64_t, kCodes> nonzero = all;
  nonzero[0] = 0;
  Plan best;
  // The best plan's palette: the first best_k codes of *best_palette (copied once, at the end).
  const std::array<int, kCodes>* best_palette = nullptr;
  int best_k = 0;
  if (nonzero_count == 0) {
    // A slice codes at least one value: an all-zero slice codes its last zero, the rest is a run.
    run_quotients = {};
    run_count = 2;
    end_run(static_cast<int64_t>(size) - 1);
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
  // Palettes: the k most frequent codes, ties to the smaller code. Sorted once: with zero runs
  // the order is the same without code 0 (or, for an all-zero slice, that one code).
  std::array<int, kCodes> by_count, by_count_nonzero;
  int distinct_all = 0, distinct_nonzero = 0;
  for (int c = 0; c < kCodes; ++c) {
    if (all[static_cast<size_t>(c)]) by_count[static_cast<size_t>(distinct_all++)] = c;
  }
  // Ties broken by the code itself: the order of a stable sort of the codes by count, without
  // the buffer a stable sort allocates (once per slice plan). Only the first kMaxPalette + 1 are
  // put in order (a palette's ranks; code 0 may drop out of them with zero runs): past a
  // palette, a plan reads the codes as a set (their extremes, their summed bits).
  const int ranked = std::min(distinct_all, kMaxPalette + 1);
  std::partial_sort(by_count.begin(), by_count.begin() + ranked, by_count.begin() + distinct_all, [&](int a, int b) {
    const int64_t ca = all[static_cast<size_t>(a)], cb = all[static_cast<size_t>(b)];
    return ca != cb ? ca > cb : a < b;
  });
  for (int j = 0; j < distinct_all; ++j) {
    const int c = by_count[static_cast<size_t>(j)];
    if (nonzero[static_cast<size_t>(c)]) by_count_nonzero[static_cast<size_t>(distinct_nonzero++)] = c;
  }
  for (int zr : {-1, best_zdiv}) {  // -1: no zero runs
    const std::array<int64_t, kCodes>& hist = zr >= 0 ? nonzero : all;
    const int64_t run_bits = zr >= 0 ? best_run_bits : 0;
    const std::array<int, kCodes>& order = zr >= 0 ? by_count_nonzero : by_count;
    const int distinct = zr >= 0 ? distinct_nonzero : distinct_all;
    std::vector<int> sizes{0};
    for (int k : {2, 3, 4, 6, 8, 12, 16, 24, 32, distinct}) {
      if (k >= 2 && k <= std::min(distinct, kMaxPalette) && std::find(sizes.begin(), sizes.end(), k) == sizes.end()) {
        sizes.push_back(k);
      }
    }
    // What every palette size reads alike, made once: the codes' counts in rank order, their
    // total, and the least and greatest code from each rank on (the codes outside a palette of
    // that many).
    std::array<int32_t, kCodes> counts;
    std::array<int, kCodes + 1> lowest_from, highest_from;
    int64_t n = 0;
    lowest_from[static_cast<size_t>(distinct)] = kCodes;
    highest_from[static_cast<size_t>(distinct)] = -1;
    for (int j = distinct - 1; j >= 0; --j) {
      const int c = order[static_cast<size_t>(j)];
      counts[static_cast<size_t>(j)] = static_cast<int32_t>(hist[static_cast<size_t>(c)]);
      n += hist[static_cast<size_t>(c)];
      lowest_from[static_cast<size_t>(j)] = std::min(lowest_from[static_cast<size_t>(j) + 1], c);
      highest_from[static_cast<size_t>(j)] = std::max(highest_from[static_cast<size_t>(j) + 1], c);
    }
    for (int k : sizes) {
      // Only the codes that occur matter (order lists them): a palette code's index is its rank,
      // any other's its distance above the direct offset plus k, so no two share an index.
      const int lowest = lowest_from[static_cast<size_t>(k)], highest = highest_from[static_cast<size_t>(k)];
      const int direct_offset = highest < 0 ? 0 : std::min(lowest, kMaxDirectOffset);
      if (highest >= 0 && highest - direct_offset + k >= kCodes) continue;  // an index beyond 9 bits
      int palbits = 2;
      for (int j = 0; j < k; ++j) palbits = std::max(palbits, bit_length(order[static_cast<size_t>(j)]));
      const int64_t header = 23 + 13 + static_cast<int64_t>(k) * palbits;
      auto consider = [&](bool uncompressed, int wdiv, bool trunc, int plan_palbits, int64_t wbits) {
        const int64_t cost = header - static_cast<int64_t>(k) * palbits + static_cast<int64_t>(k) * plan_palbits +
                             wbits + run_bits;
        if (cost < best.cost) {
          best = Plan{zr >= 0, std::max(zr, 0), uncompressed, wdiv, trunc, {}, plan_palbits, direct_offset, cost};
          best_palette = &order;
          best_k = k;
        }
      };
      // Golomb-Rice bits for every divisor: a value of index i takes its quotient in the
      // decoder's unary form, (i >> wdiv) + 1 bits, or 1 + (i >= 2^wdiv) truncated, and wdiv
      // bits of remainder. Per divisor, only the summed quotients and the count of values at
      // least 2^wdiv vary: the codes' indices and counts go into flat arrays, and each divisor
      // is a plain reduction over them that the compiler vectorises (a loop over the divisors
      // inside one over the codes was a sixth of the encoder's time). 32 bits hold every sum:
      // a slice codes at most 2^15 values, each index below 2^9.
      constexpr int kDivisors = 6;
      std::array<int32_t, kCodes> indices;
      // The palette's ranks, then each other code's place above the direct offset (the
      // greatest index that of the greatest code outside the palette, else the last rank).
      for (int j = 0; j < k; ++j) indices[static_cast<size_t>(j)] = j;
      for (int j = k; j < distinct; ++j) indices[static_cast<size_t>(j)] = order[static_cast<size_t>(j)] - direct_offset + k;
      const int max_index = std::max({0, k - 1, highest < 0 ? 0 : highest - direct_offset + k});
      std::array<int64_t, kDivisors> plain{}, truncated{};
      for (int wdiv = 0; wdiv < kDivisors; ++wdiv) {
        int32_t quotients = 0, at_least = 0;
        for (int j = 0; j < distinct; ++j) {
          const int32_t q = indices[static_cast<size_t>(j)] >> wdiv;
          quotients += counts[static_cast<size_t>(j)] * q;
          at_least += q != 0 ? counts[static_cast<size_t>(j)] : 0;
        }
        plain[static_cast<size_t>(wdiv)] = quotients + n * (1 + wdiv);
        truncated[static_cast<size_t>(wdiv)] = at_least + n * (1 + wdiv);
      }
      for (int wdiv = 0; wdiv < kDivisors; ++wdiv) {
        consider(false, wdiv, false, palbits, plain[static_cast<size_t>(wdiv)]);
        if ((max_index >> wdiv) <= 2) consider(false, wdiv, true, palbits, truncated[static_cast<size_t>(wdiv)]);
      }
      // Uncompressed: fixed-width indices. With a palette every value must be in it (the
      // width is the palette's index width); without, the width is the palette-bits field.
      if (k > 0 && k == distinct) {
        const int width = std::max(bit_length(k - 1), 1);
        consider(true, width, false, palbits, n * width);
      } else if (k == 0) {
        const int width = std::max(bit_length(max_index), 2);
        if (width <= 9) consider(true, width, false, width, n * width);
      }
    }
  }
  if (best_palette != nullptr) best.palette.assign(best_palette->begin(), best_palette->begin() + best_k);
  // The winner's unary symbols (as write_slice_codes counts them): a truncated quotient is one
  // symbol, another q / 2 + 1; uncompressed indices have none. The zero runs' unary bits are
  // their quotients plus one each.
  int64_t w_symbols = 0;
  if (!best.uncompressed) {
    const std::array<int64_t, kCodes>& hist = best.zero_runs ? nonzero : all;
    const int distinct = best.zero_runs ? distinct_nonzero : distinct_all;
    for (int j = 0; j < distinct; ++j) {
      const int c = (*best_palette)[static_cast<size_t>(j)];
      const int i = j < best_k ? j : c - best.direct_offset + best_k;
      w_symbols += hist[static_cast<size_t>(c)] * (best.wtrunc ? 1 : (i >> best.wdiv) / 2 + 1);
    }
  }
  best.bits = best.cost + (best.uncompressed ? 0 : chunk_padding(w_symbols, kWeightChunk));
  if (best.zero_runs) {
    best.bits += chunk_padding(run_quotients[static_cast<size_t>(best.zdiv)] + run_count, run_chunk(best.zdiv));
  }
  return best;
}

// One chunk of 12 quotient symbols (0 ends a quotient, 1 adds one and ends it, 2 adds two and
// continues, see write_slice) as the decoder reads it: `unary0` a bit per symbol, set when it
// is not 0; `unary1` a bit per such symbol, set when it is 2; `ones` those symbols; `ends` the
// symbols that end a quotient. Four symbols at a time through a table (this was a tenth of the
// encoder's time symbol by symbol).
struct Chunk {
  uint32_t unary0 = 0, unary1 = 0;
  int ones = 0, ends = 0;
};

// Per four symbols s0..s3 (index s0 | s1 << 2 | s2 << 4 | s3 << 6): bits 0-3 the nonzero
// mask, 4-7 the twos among the nonzero ones in order, 8-10 the nonzero count, 11-13 the ends.
const std::array<uint16_t, 256> kFourSymbols = [] {
  std::array<uint16_t, 256> table{};
  for (int index = 0; index < 256; ++index) {
    int nonzero = 0, twos = 0, count = 0, ends = 0;
    for (int k = 0; k < 4; ++k) {
      const int s = (index >> (2 * k)) & 3;
      if (s != 0) {
        nonzero |= 1 << k;
        twos |= (s == 2 ? 1 : 0) << count;
        ++count;
      }
      ends += s < 2;
    }
    table[static_cast<size_t>(index)] = static_cast<uint16_t>(nonzero | twos << 4 | count << 8 | ends << 11);
  }
  return table;
}();

Chunk chunk_of(const uint8_t* sym) {
  Chunk c;
  for (int g = 0; g < 3; ++g, sym += 4) {
    const uint16_t e = kFourSymbols[static_cast<size_t>(sym[0] | sym[1] << 2 | sym[2] << 4 | sym[3] << 6)];
    c.unary0 |= static_cast<uint32_t>(e & 0xF) << (4 * g);
    c.unary1 |= static_cast<uint32_t>((e >> 4) & 0xF) << c.ones;
    c.ones += (e >> 8) & 0x7;
    c.ends += (e >> 11) & 0x7;
  }
  return c;
}

// A stream's slices share their value and run arrays: sized for the longest slice once, not
// zeroed (every element is written before it is read).
struct SliceScratch {
  std::unique_ptr<uint16_t[]> values{new uint16_t[kMaxSliceValues]};
  std::unique_ptr<int32_t[]> runs{new int32_t[kMaxSliceValues + 1]};
};

// A slice's header: its divisors and length, and its palette when it sets up a new one.
template <typename Palette>
void write_slice_header(BitWriter& out, int zdiv, int nvalues, int wdiv_field, bool wtrunc, bool new_palette,
                        int direct_offset, int palbits, const Palette& palette) {
  out.put(static_cast<uint32_t>(zdiv), 3);
  out.put(static_cast<uint32_t>(nvalues - 1), 15);
  out.put(static_cast<uint32_t>(wdiv_field), 3);
  out.put(wtrunc ? 1 : 0, 1);
  out.put(new_palette ? 1 : 0, 1);
  if (!new_palette) return;
  const size_t palsize = palette.size();
  out.put(static_cast<uint32_t>(direct_offset), 5);
  out.put(static_cast<uint32_t>(palsize ? palsize - 1 : 0), 5);
  out.put(static_cast<uint32_t>(palbits - 2), 3);
  for (int c : palette) out.put(static_cast<uint32_t>(c), palbits);
}

// A slice's coded values (indices) and zero runs (`z_count` of them), in the decoder's
// interleaved chunks. `wdiv` is the index width when uncompressed.
void write_slice_codes(BitWriter& out, bool zero_runs, int zdiv, bool uncompressed, int wdiv, bool wtrunc,
                       const uint16_t* values, int nvalues, const int32_t* runs, int z_count) {
  const size_t nv = static_cast<size_t>(nvalues), nr = static_cast<size_t>(z_count);
  // Symbol arrays carry 12 zeros of padding: a chunk reads 12 symbols from where it starts, and
  // the decoder reads past the end as zeros.
  constexpr size_t kChunk = kWeightChunk;
  // The quotients as the decoder's symbols: 0 ends a quotient, 1 adds one and ends it, 2 adds
  // two and continues (ends it when truncated).
  std::vector<uint8_t> w_symbols;
  if (!uncompressed) {
    size_t count = kChunk;
    for (size_t v = 0; v < nv; ++v) count += wtrunc ? 1 : static_cast<size_t>((values[v] >> wdiv) / 2 + 1);
    // A quotient q is q / 2 twos, then q & 1: fill with twos and write only the last symbols,
    // so the loop has no data-dependent branch.
    w_symbols.assign(count, 2);
    uint8_t* sym = w_symbols.data();
    for (size_t v = 0; v < nv; ++v) {
      const int q = values[v] >> wdiv;
      if (wtrunc) {
        *sym++ = static_cast<uint8_t>(q);
      } else {
        sym += q / 2;
        *sym++ = static_cast<uint8_t>(q & 1);
      }
    }
    std::fill(sym, w_symbols.data() + count, uint8_t{0});
  }
  std::vector<uint8_t> z_bits;  // unary: ones, then a zero ends the quotient
  if (zero_runs) {
    size_t count = kChunk;
    for (size_t r = 0; r < nr; ++r) count += static_cast<size_t>((runs[r] >> zdiv) + 1);
    z_bits.assign(count, 1);  // as above: ones, and only each run's terminating zero written
    uint8_t* bit = z_bits.data();
    for (size_t r = 0; r < nr; ++r) {
      bit += runs[r] >> zdiv;
      *bit++ = 0;
    }
    std::fill(bit, z_bits.data() + count, uint8_t{0});
  }
  const int z_unary_len = run_chunk(zdiv);
  const int max_symbols = uncompressed && wdiv > 5 ? 8 : 12;
  const uint32_t w_mask = (uint32_t{1} << wdiv) - 1, z_mask = (uint32_t{1} << zdiv) - 1;

  // The decoder's chunk loop, mirrored: each step carries this step's unary parts and the
  // previous step's remainders. The values (runs) a step ends are consecutive, so a step's
  // remainders are the range [begin, end) of them.
  int w_pos = 0, z_pos = 0;
  size_t w_sym = 0, z_sym = 0;
  int w_prev_begin = 0, w_prev_end = 0, z_prev_begin = 0, z_prev_end = 0;
  bool w_prev_on = false, z_prev_on = false;
  do {
    const int balance = zero_runs ? w_pos - z_pos : 0;
    const bool w_enable = (balance < 8 || !zero_runs) && w_pos < nvalues;
    const bool z_enable = balance >= 0 && zero_runs && z_pos < z_count;
    const int w_begin = w_pos, z_begin = z_pos;
    Chunk chunk;
    if (w_enable && !uncompressed) {
      chunk = chunk_of(w_symbols.data() + w_sym);
      out.put(chunk.unary0, kChunk);
    }
    if (z_enable) {
      const uint8_t* bit = z_bits.data() + z_sym;
      uint32_t unary = 0;
      for (int k = 0; k < z_unary_len; ++k) {
        unary |= static_cast<uint32_t>(bit[k]) << k;
        z_pos += bit[k] ^ 1;
      }
      z_sym += static_cast<size_t>(z_unary_len);
      out.put(unary, z_unary_len);
    }
    if (w_enable) {
      if (uncompressed) {
        w_pos += max_symbols;
      } else {
        w_pos += wtrunc ? static_cast<int>(kChunk) : chunk.ends;
        out.put(chunk.unary1, chunk.ones);
        w_sym += kChunk;
      }
    }
    if (w_prev_on && wdiv > 0) {
      // The step's remainders (at most 12, each wdiv <= 9 bits) gathered into a word first: a
      // put per 32 bits, not per remainder or two (the puts were a fifth of the encoder).
      uint64_t packed = 0;
      int bits = 0;
      for (int v = w_prev_begin; v < std::min(w_prev_end, nvalues); ++v) {
        packed |= static_cast<uint64_t>(values[static_cast<size_t>(v)] & w_mask) << bits;
        bits += wdiv;
        if (bits >= 32) {
          out.put(static_cast<uint32_t>(packed), 32);
          packed >>= 32;
          bits -= 32;
        }
      }
      if (bits > 0) out.put(static_cast<uint32_t>(packed), bits);
    }
    if (z_prev_on && zdiv > 0) {
      for (int r = z_prev_begin; r < std::min(z_prev_end, z_count); ++r) {
        out.put(static_cast<uint32_t>(runs[static_cast<size_t>(r)]) & z_mask, zdiv);
      }
    }
    w_prev_on = w_enable;
    z_prev_on = z_enable;
    w_prev_begin = w_begin;
    w_prev_end = w_pos;
    z_prev_begin = z_begin;
    z_prev_end = z_pos;
  } while (w_prev_on || z_prev_on);
}

void write_slice(BitWriter& out, const Plan& p, Codes codes, SliceScratch& scratch) {
  // The coded values (indices) and the zero runs before each value and after the last.
  const int palsize = static_cast<int>(p.palette.size());
  std::array<uint16_t, kCodes> index{};
  for (int c = p.direct_offset; c < kCodes; ++c) index[static_cast<size_t>(c)] = static_cast<uint16_t>(c - p.direct_offset + palsize);
  for (int i = 0; i < palsize; ++i) index[static_cast<size_t>(p.palette[static_cast<size_t>(i)])] = static_cast<uint16_t>(i);
  // Written by position: no capacity check per value.
  uint16_t* const values = scratch.values.get();
  int32_t* const runs = scratch.runs.get();
  size_t nv = 0, nr = 0;
  if (p.zero_runs) {
    const bool all_zero = std::all_of(codes.begin(), codes.end(), [](uint16_t c) { return c == 0; });
    const size_t coded_zero = all_zero ? codes.size() - 1 : codes.size();  // an all-zero slice codes its last zero
    int32_t run = 0;
    for (size_t k = 0; k < codes.size(); ++k) {
      const uint16_t c = codes.data[k];
      if (c == 0 && k != coded_zero) {
        ++run;
        continue;
      }
      values[nv] = index[c];
      runs[nv++] = run;
      run = 0;
    }
    runs[nv] = run;
    nr = nv + 1;
  } else {
    for (uint16_t c : codes) values[nv++] = index[c];
  }
  // Every slice sets up its own palette and direct offset.
  write_slice_header(out, p.zero_runs ? p.zdiv : kZDivDisable, static_cast<int>(nv),
                     p.uncompressed ? kWDivUncompressed : p.wdiv, p.wtrunc, true, p.direct_offset, p.palbits,
                     p.palette);
  write_slice_codes(out, p.zero_runs, p.zdiv, p.uncompressed, p.wdiv, p.wtrunc, values, static_cast<int>(nv), runs,
                    static_cast<int>(nr));
}

// One slice of a stream as chosen: codes [begin, begin + count) of the stream, and its plan.
struct SlicePlan {
  size_t begin = 0, count = 0;
  Plan plan;
};

// The slices of the stream of `n` >= 1 coded values, each with its plan: the codes from `base`
// on of the stream `codes`, whose tiles are `tiles` (a depth slice's codes may be a range of the
// whole operation's stream); the slices' `begin` counts from `base`. `known`: slices of the same
// codes planned already (by begin, from the start of `codes`), whose plans a slice of the same
// codes takes (a plan depends on its codes alone): a depth slice of 32768-multiple codes
// starting at such a multiple, say, is sliced as the whole stream was.
std::vector<SlicePlan> plan_codes(const uint16_t* codes, const CodeTiles& tiles, size_t base, size_t n,
                                  const std::vector<SlicePlan>* known = nullptr) {
  // Where the slices end changes their statistics: full slices then a remainder, or equal
  // slices. Both are costed from their plans and the cheaper one is written.
  const size_t count = (n + kMaxSliceValues - 1) / kMaxSliceValues;
  std::vector<size_t> full, equal;
  for (size_t k = 1; k <= count; ++k) {
    full.push_back(std::min(n, k * kMaxSliceValues));
    equal.push_back(n * k / count);
  }
  auto slices = [&](const std::vector<size_t>& ends) {
    std::vector<SlicePlan> out;
    size_t begin = 0;
    for (size_t e : ends) {
      const SlicePlan* same = nullptr;
      if (known != nullptr) {
        const auto at = std::lower_bound(known->begin(), known->end(), base + begin,
                                         [](const SlicePlan& k, size_t b) { return k.begin < b; });
        if (at != known->end() && at->begin == base + begin && at->count == e - begin) same = &*at;
      }
      if (same != nullptr) {
        out.push_back(SlicePlan{begin, e - begin, same->plan});
      } else {
        const RangeStats stats = range_stats(codes, tiles, base + begin, base + e);
        out.push_back(SlicePlan{begin, e - begin, choose_plan(stats.counts, stats.runs, e - begin)});
      }
      begin = e;
    }
    return out;
  };
  auto total = [](const std::vector<SlicePlan>& parts) {
    int64_t bits = 0;
    for (const auto& part : parts) bits += part.plan.cost;
    return bits;
  };
  auto chosen = slices(full);
  if (count > 1) {
    auto alternative = slices(equal);
    if (total(alternative) < total(chosen)) chosen = std::move(alternative);
  }
  return chosen;
}

// The bytes of the stream of `slices` (plan_codes): each slice's bits, the end marker, byte
// alignment and the padding to 16 bytes. Known without writing the stream.
size_t stream_size(const std::vector<SlicePlan>& slices) {
  int64_t bits = 3;  // the end marker
  for (const auto& slice : slices) bits += slice.plan.bits;
  const size_t bytes = static_cast<size_t>((bits + 7) / 8);
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

// The stream of `codes` sliced and coded as `slices` (plan_codes) say.
std::vector<uint8_t> write_codes(const uint16_t* codes, const std::vector<SlicePlan>& slices) {
  size_t n = 0;
  for (const auto& slice : slices) n += slice.count;
  BitWriter out;
  out.reserve(n * 9 / 8 + 64 * slices.size());  // at most 9 bits a value, and the slice headers
  SliceScratch scratch;
  for (const auto& slice : slices) write_slice(out, slice.plan, Codes{codes + slice.begin, slice.count}, scratch);
  out.put(kZDivEnd, 3);
  out.align();
  std::vector<uint8_t>& bytes = out.bytes();
  bytes.resize((bytes.size() + kAlignment - 1) / kAlignment * kAlignment, 0xFF);  // more end markers
  // The sizes the planner was given (stream_size) are the streams' own: a stream of another
  // size would no longer fit the data's layout.
  if (bytes.size() != stream_size(slices)) {
    throw std::logic_error("weight stream of " + std::to_string(bytes.size()) + " bytes, planned as " +
                           std::to_string(stream_size(slices)));
  }
  return bytes;
}

// The codes of OFM channels first, first + stride, ... (layout.ofm_depth of them) of dense
// OHWI weights (`volume` values a channel), in the NPU's order: each weight minus its
// channel's zero point, coded (code_of), padding 0. The values are in range (checked before).
template <typename T>
std::vector<uint16_t> reordered_codes(const T* ohwi, const int32_t* zero_points, int first, int stride,
                                      size_t volume, const WeightLayout& l) {
  const int ifm_depth = l.depthwise ? 1 : l.ifm_depth;
  std::vector<uint16_t> codes(padded_weight_count(l), 0);
  size_t k = 0;
  walk_weight_order(l, [&](int o, int y, int x, int i, int count, int valid) {
    if (valid > 0) {  // else (o, y, x) may lie outside the kernel
      const size_t c = static_cast<size_t>(first) + static_cast<size_t>(o) * static_cast<size_t>(stride);
      const int32_t zero_point = zero_points[c];
      const size_t at = (static_cast<size_t>(y) * l.kernel_width + static_cast<size_t>(x)) * ifm_depth + i;
      const T* in = ohwi + c * volume + at;
      uint16_t* out = codes.data() + k;
      for (int j = 0; j < valid; ++j) out[j] = static_cast<uint16_t>(code_of(static_cast<int>(in[j]) - zero_point));
    }
    k += size_t(count);  // the padding stays zero
  });
  return codes;
}

}  // namespace

// One (depth slice, core) stream of a PlannedWeights: its scale stream, its weights' codes in
// the NPU's order and their slices as planned (empty for a core without channels).
struct PlannedStream {
  std::vector<uint8_t> scales;
  // Its weights' codes: `count` from `begin` of `shared` (a depth slice cut from the whole
  // operation's stream shares that stream's codes; none for a core without channels).
  std::shared_ptr<const std::vector<uint16_t>> shared;
  size_t begin = 0, count = 0;
  std::vector<SlicePlan> slices;
  CodeTiles tiles;  // of a whole stream's codes: a depth slicing of the same weights plans from them

  const uint16_t* codes() const { return shared->data() + begin; }
  // Takes `codes` as its own, all of them.
  void own(std::vector<uint16_t> codes) {
    count = codes.size();
    begin = 0;
    shared = std::make_shared<const std::vector<uint16_t>>(std::move(codes));
  }
};

namespace {

// The streams of `depth_slices` slices of `per_slice` streams each ([slice * per_slice +
// stream]) laid out: per slice, each stream's scales then its weights, each on a 16-byte
// boundary. A stream without codes (a core without channels in the slice) takes no bytes.
PlannedWeights laid_out(std::shared_ptr<std::vector<PlannedStream>> streams, size_t depth_slices, size_t per_slice) {
  PlannedWeights out;
  auto place = [&](size_t length) {  // the offset of the next stream, on a 16-byte boundary
    const size_t at = (out.size + kAlignment - 1) / kAlignment * kAlignment;
    out.size = at + length;
    return at;
  };
  for (size_t slice = 0; slice < depth_slices; ++slice) {
    std::vector<StreamRanges> ranges;
    for (size_t k = 0; k < per_slice; ++k) {
      const PlannedStream& stream = (*streams)[slice * per_slice + k];
      StreamRanges r;
      if (stream.count > 0) {
        r.scale_length = stream.scales.size();
        r.scale_offset = place(r.scale_length);
        r.weight_length = stream_size(stream.slices);
        r.weight_offset = place(r.weight_length);
      }
      ranges.push_back(r);
    }
    out.slices.push_back(std::move(ranges));
  }
  out.streams = std::move(streams);
  return out;
}

// The codes of stream-ordered values (code_of); an empty stream codes one zero. Throws
// InvalidArgument naming the first value outside -255..255.
std::vector<uint16_t> stream_codes(const std::vector<int16_t>& values) {
  std::vector<uint16_t> codes(std::max<size_t>(values.size(), 1), 0);
  int out_of_range = 0;  // checked once after the loop, which then has no branch
  for (size_t i = 0; i < values.size(); ++i) {
    const int v = values[i];
    out_of_range |= (v < -255) | (v > 255);
    codes[i] = static_cast<uint16_t>(code_of(v));
  }
  if (out_of_range) {
    const auto bad = std::find_if(values.begin(), values.end(), [](int16_t v) { return v < -255 || v > 255; });
    throw InvalidArgument("weight value " + std::to_string(*bad) + " at stream position " +
                          std::to_string(bad - values.begin()) + " is outside -255..255 (9 bits after the zero point)");
  }
  return codes;
}

bool same_layout(const WeightLayout& a, const WeightLayout& b) {
  return a.ofm_depth == b.ofm_depth && a.kernel_height == b.kernel_height && a.kernel_width == b.kernel_width &&
         a.ifm_depth == b.ifm_depth && a.ofm_block_depth == b.ofm_block_depth && a.depthwise == b.depthwise &&
         a.part_kernel_first == b.part_kernel_first && a.ifm_bits == b.ifm_bits && a.dilation_x == b.dilation_x &&
         a.dilation_y == b.dilation_y && a.ifm_ublock_depth == b.ifm_ublock_depth &&
         a.ofm_ublock_depth == b.ofm_ublock_depth;
}

// The stream of `whole` (plan_operation_weights) that a depth slicing by `depth_step` on `cores`
// may cut its streams' codes from, or null.
const PlannedStream* cut_from(const PlannedWeights* whole, const WeightLayout& layout, int cores, int depth_step) {
  if (whole == nullptr || !whole->whole_layout || !whole->streams || whole->streams->size() != 1 || cores != 1 ||
      depth_step <= 0 || depth_step % layout.ofm_block_depth != 0 || !same_layout(*whole->whole_layout, layout)) {
    return nullptr;
  }
  return &(*whole->streams)[0];
}

template <typename T>
PlannedWeights plan_raw(const T* ohwi, size_t size, const std::vector<int32_t>& zero_points,
                        const std::vector<BiasScale>& channels, const WeightLayout& layout, int cores,
                        int depth_step, const PlannedWeights* whole) {
  const int oc = layout.ofm_depth;
  const size_t volume =
      static_cast<size_t>(layout.kernel_height) * layout.kernel_width * (layout.depthwise ? 1 : layout.ifm_depth);
  if (oc < 1 || size != volume * static_cast<size_t>(oc)) {
    throw InvalidArgument("weights hold " + std::to_string(size) + " values; " + std::to_string(oc) +
                          " OFM channels of " + std::to_string(volume) + " need " + std::to_string(volume * oc));
  }
  if (zero_points.size() != static_cast<size_t>(oc) || channels.size() != static_cast<size_t>(oc)) {
    throw InvalidArgument("need one zero point and one bias/scale per OFM channel (" + std::to_string(oc) + ")");
  }
  if (cores < 1 || cores > 2) throw InvalidArgument("cores must be 1 or 2, got " + std::to_string(cores));
  if (depth_step < 0) throw InvalidArgument("depth_step must not be negative");
  check_weight_layout(layout);  // and so every channel holds at least one value (read below)
  const int step = depth_step > 0 ? depth_step : oc;
  const PlannedStream* cut = cut_from(whole, layout, cores, depth_step);
  // The codes of an OFM block: a slice of whole blocks starts at a multiple of them.
  WeightLayout block = layout;
  block.ofm_depth = layout.ofm_block_depth;
  const size_t block_codes = cut != nullptr ? padded_weight_count(block) : 0;
  // Every weight minus its zero point must fit 9 bits (those of a whole stream cut did).
  // Checked per channel, in the order the streams take the channels (depth slice, core,
  // channel), so the one named is the first a stream would meet.
  for (int first = 0; first < oc && cut == nullptr; first += step) {
    for (int core = 0; core < cores; ++core) {
      for (int c = first + core; c < std::min(first + step, oc); c += cores) {
        // The extremes of the raw values, in their own type (the loop vectorises), then less
        // the zero point.
        const T* weights = ohwi + static_cast<size_t>(c) * volume;
        T lowest = weights[0], highest = weights[0];
        for (size_t k = 1; k < volume; ++k) {
          lowest = std::min(lowest, weights[k]);
          highest = std::max(highest, weights[k]);
        }
        const int64_t zero_point = zero_points[static_cast<size_t>(c)];
        const int64_t low = std::min<int64_t>(0, lowest - zero_point);
        const int64_t high = std::max<int64_t>(0, highest - zero_point);
        if (low < -255 || high > 255) {
          throw InvalidArgument("OFM channel " + std::to_string(c) + ": weight minus zero point is " +
                                std::to_string(low < -255 ? low : high) + ", outside -255..255");
        }
      }
    }
  }
  // Each (depth slice, core) stream is independent. A depth-sliced operation's are planned on
  // every core the caller allows (worker_cap): the scheduler, which makes them on its own
  // thread while the background threads plan the other operations (one stream each, one
  // operation a thread, common/pending.hpp), allows only its own.
  const int depth_slices = (oc + step - 1) / step;
  auto streams = std::make_shared<std::vector<PlannedStream>>(static_cast<size_t>(depth_slices * cores));
  const size_t per_worker = depth_slices > 1 ? 1 : streams->size();
  parallel_blocks(streams->size(), per_worker, [&](size_t, size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) {
      const int first = static_cast<int>(k) / cores * step, core = static_cast<int>(k) % cores;
      const int n = std::min(step, oc - first);
      // This core's channels of the slice: first + core, then every `cores`-th.
      const int count = std::max(n - core + cores - 1, 0) / cores;
      if (count == 0) continue;
      std::vector<BiasScale> scales;
      for (int c = first + core; c < first + n; c += cores) scales.push_back(channels[static_cast<size_t>(c)]);
      WeightLayout l = layout;
      l.ofm_depth = count;
      l.ofm_block_depth = (layout.ofm_block_depth + cores - 1 - core) / cores;
      PlannedStream& stream = (*streams)[k];
      stream.scales = encode_scale_stream(scales);
      if (cut != nullptr) {
        const size_t bd = static_cast<size_t>(layout.ofm_block_depth), from = static_cast<size_t>(first);
        const size_t begin = from / bd * block_codes;
        const size_t end = first + n == oc ? cut->count : (from + static_cast<size_t>(n)) / bd * block_codes;
        stream.shared = cut->shared;
        stream.begin = cut->begin + begin;
        stream.count = end - begin;
        stream.slices = plan_codes(cut->codes(), cut->tiles, begin, end - begin, &cut->slices);
        continue;
      }
      stream.own(reordered_codes(ohwi, zero_points.data(), first + core, cores, volume, l));
      stream.tiles = tiles_of(stream.codes(), stream.count);
      stream.slices = plan_codes(stream.codes(), stream.tiles, 0, stream.count);
      if (streams->size() > 1) stream.tiles = CodeTiles{};  // only a whole stream is cut
    }
  });
  PlannedWeights out = laid_out(std::move(streams), static_cast<size_t>(depth_slices), static_cast<size_t>(cores));
  if (depth_slices == 1 && cores == 1) out.whole_layout = layout;
  return out;
}

}  // namespace

std::vector<uint8_t> encode_weight_stream(const std::vector<int16_t>& values) {
  const std::vector<uint16_t> codes = stream_codes(values);
  return write_codes(codes.data(), plan_codes(codes.data(), tiles_of(codes.data(), codes.size()), 0, codes.size()));
}

PlannedWeights plan_weight_streams(std::vector<std::vector<StreamToPlan>> slices) {
  const size_t per_slice = slices.empty() ? 0 : slices[0].size();
  for (const auto& slice : slices) {
    if (slice.size() != per_slice || per_slice == 0) {
      throw InvalidArgument("every depth slice needs the same number of streams, at least one");
    }
  }
  auto streams = std::make_shared<std::vector<PlannedStream>>(slices.size() * per_slice);
  // As plan_raw: a depth-sliced operation's streams are planned on every core.
  parallel_blocks(streams->size(), slices.size() > 1 ? 1 : streams->size(), [&](size_t, size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) {
      StreamToPlan& in = slices[k / per_slice][k % per_slice];
      PlannedStream& stream = (*streams)[k];
      stream.scales = std::move(in.scales);
      stream.own(stream_codes(in.values));
      stream.tiles = tiles_of(stream.codes(), stream.count);
      stream.slices = plan_codes(stream.codes(), stream.tiles, 0, stream.count);
    }
  });
  return laid_out(std::move(streams), slices.size(), per_slice);
}

std::vector<uint8_t> encode_weight_slices(const std::vector<WeightSlice>& slices) {
  if (slices.empty()) throw InvalidArgument("a weight stream needs at least one slice");
  BitWriter out;
  auto end_marker = [&] {
    out.put(kZDivEnd, 3);
    out.align(true);
  };
  int palsize = 0, palbits = 2;
  bool have_palette = false, zero_runs_before = false;
  for (size_t k = 0; k < slices.size(); ++k) {
    const WeightSlice& s = slices[k];
    const std::string at = "slice " + std::to_string(k) + ": ";
    if (s.new_section && k > 0) {
      end_marker();
      have_palette = false;
    }
    const size_t n = s.indices.size();
    if (n < 1 || n > size_t{kMaxSliceValues}) throw InvalidArgument(at + std::to_string(n) + " values (1..32768)");
    if ((s.zdiv < 0 || s.zdiv > 3) && s.zdiv != kZDivDisable) throw InvalidArgument(at + "ZDIV must be 0..3 or 6");
    if ((s.wdiv < 0 || s.wdiv > 5) && s.wdiv != kWDivUncompressed) throw InvalidArgument(at + "WDIV must be 0..5 or 7");
    const bool zero_runs = s.zdiv != kZDivDisable;
    if (s.new_palette) {
      if (s.palette.size() > size_t{kMaxPalette} || s.palette.size() == 1 || s.palbits < 2 || s.palbits > 9 ||
          s.direct_offset < 0 || s.direct_offset > kMaxDirectOffset) {
        throw InvalidArgument(at + "palette of " + std::to_string(s.palette.size()) + " entries, " +
                              std::to_string(s.palbits) + " bits, direct offset " + std::to_string(s.direct_offset));
      }
      for (int c : s.palette) {
        if (c < 0 || c >= (1 << s.palbits)) throw InvalidArgument(at + "palette entry wider than its bits");
      }
      palsize = static_cast<int>(s.palette.size());
      palbits = s.palbits;
      have_palette = true;
    } else if (!have_palette || zero_runs != zero_runs_before) {
      throw InvalidArgument(at + "keeps a palette (and zero-run mode) that no earlier slice of its section set up");
    }
    zero_runs_before = zero_runs;
    const size_t runs = zero_runs ? n + (s.new_palette ? 1 : 0) : 0;
    if (s.runs.size() != runs) {
      throw InvalidArgument(at + std::to_string(s.runs.size()) + " zero runs, the slice codes " + std::to_string(runs));
    }
    const bool uncompressed = s.wdiv == kWDivUncompressed;
    const int wdiv = uncompressed ? uncompressed_index_bits(palsize, palbits) : s.wdiv;
    for (size_t i = 0; i < n; ++i) {
      const int q = s.indices[i] >> wdiv;
      if (s.indices[i] >= kCodes || (uncompressed && q > 0) || (s.wtrunc && q > 2)) {
        throw InvalidArgument(at + "value " + std::to_string(s.indices[i]) + " does not fit the slice's code");
      }
    }
    for (int32_t r : s.runs) {
      if (r < 0 || r > (1 << 28)) throw InvalidArgument(at + "zero run " + std::to_string(r) + " out of range");
    }
    write_slice_header(out, s.zdiv, static_cast<int>(n), s.wdiv, s.wtrunc, s.new_palette, s.direct_offset, s.palbits,
                       s.palette);
    write_slice_codes(out, zero_runs, s.zdiv, uncompressed, wdiv, s.wtrunc, s.indices.data(), static_cast<int>(n),
                      s.runs.data(), static_cast<int>(runs));
  }
  end_marker();
  std::vector<uint8_t>& bytes = out.bytes();
  bytes.resize((bytes.size() + kAlignment - 1) / kAlignment * kAlignment, 0xFF);  // more end markers
  return bytes;
}

PlannedWeights plan_operation_weights(const RawWeights& ohwi, const std::vector<int32_t>& zero_points,
                                      const std::vector<BiasScale>& channels, const WeightLayout& layout, int cores,
                                      int depth_step, const PlannedWeights* whole) {
  switch (ohwi.type) {
    case RawWeights::Type::Int8:
      return plan_raw(static_cast<const int8_t*>(ohwi.data), ohwi.size, zero_points, channels, layout, cores,
                      depth_step, whole);
    case RawWeights::Type::UInt8:
      return plan_raw(static_cast<const uint8_t*>(ohwi.data), ohwi.size, zero_points, channels, layout, cores,
                      depth_step, whole);
    case RawWeights::Type::Int32:
      break;
  }
  return plan_raw(static_cast<const int32_t*>(ohwi.data), ohwi.size, zero_points, channels, layout, cores,
                  depth_step, whole);
}

std::vector<uint8_t> PlannedWeights::write() const {
  std::vector<uint8_t> data(size, 0);  // the gaps before 16-byte boundaries stay zero
  if (!streams) return data;
  const size_t cores = slices.empty() ? 1 : slices[0].size();
  // Each stream written into its own range (a depth-sliced operation's on every core, as planned).
  const size_t per_worker = slices.size() > 1 ? 1 : streams->size();
  parallel_blocks(streams->size(), per_worker, [&](size_t, size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) {
      const PlannedStream& stream = (*streams)[k];
      if (stream.count == 0) continue;
      const StreamRanges& r = slices[k / cores][k % cores];
      const std::vector<uint8_t> weights = write_codes(stream.codes(), stream.slices);
      std::copy(stream.scales.begin(), stream.scales.end(), data.begin() + static_cast<std::ptrdiff_t>(r.scale_offset));
      std::copy(weights.begin(), weights.end(), data.begin() + static_cast<std::ptrdiff_t>(r.weight_offset));
    }
  });
  return data;
}

}  // namespace cascader::emit
