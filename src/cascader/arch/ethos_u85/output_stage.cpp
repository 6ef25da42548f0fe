#include "cascader/arch/ethos_u85/output_stage.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "cascader/arch/ethos_u85/activation_table.hpp"
#include "cascader/sim/register_file.hpp"

namespace cascader::ethos_u85 {

namespace {

using i128 = __int128;

// p / 2^k truncated toward zero, by shifts: a 128-bit division per OFM element made the U85
// simulation of MobileNetV2-224 a fifth slower than the U55's.
template <typename T>
T divide_toward_zero(T p, int k) {
  return (p < 0 ? p + ((static_cast<T>(1) << k) - 1) : p) >> k;
}

// TensorFlow Lite's rounding of a fixed-point multiply's high part: p / 2^k, ties toward +inf
// (the nudge of SaturatingRoundingDoublingHighMul, then a division that truncates).
template <typename T>
T round_high(T p, int k) {
  if (k == 0) return p;
  const T half = static_cast<T>(1) << (k - 1);
  return divide_toward_zero<T>(p + (p >= 0 ? half : 1 - half), k);
}

// p / 2^k rounded half away from zero (TFLite's RoundingDivideByPOT).
template <typename T>
T round_away(T p, int k) {
  if (k == 0) return p;
  const T mask = (static_cast<T>(1) << k) - 1;
  const T threshold = (mask >> 1) + (p < 0 ? 1 : 0);
  return (p >> k) + ((p & mask) > threshold ? 1 : 0);
}

// In T: 128 bits for any product of a 64-bit value and a 32-bit scale; 64 bits when the
// product and every rounding step fit (the common case, and several times faster).
template <typename T>
T round_by(T p, int shift, int double_round, int mode) {
  switch (mode) {
    case DoubleSymmetric: {
      const int first = 31 - double_round;  // where the multiply's high part is rounded
      return shift <= first ? round_high<T>(p, shift) : round_away<T>(round_high<T>(p, first), shift - first);
    }
    case Natural: return shift == 0 ? p : (p + (static_cast<T>(1) << (shift - 1))) >> shift;
    case Symmetric: return round_away<T>(p, shift);
    case TruncateToZero: return divide_toward_zero<T>(p, shift);
    case TruncateToLower: return p >> shift;
    default: return 0;  // refused by the callers
  }
}

int64_t saturate64(i128 v) {
  return static_cast<int64_t>(std::clamp<i128>(v, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
}

int64_t type_min(sim::DataType t) {
  switch (t) {
    case sim::DataType::S8: return -128;
    case sim::DataType::S16: return -32768;
    case sim::DataType::S32: return std::numeric_limits<int32_t>::min();
    case sim::DataType::S64: return std::numeric_limits<int64_t>::min();
    default: return 0;
  }
}

int64_t type_max(sim::DataType t) {
  switch (t) {
    case sim::DataType::U8: return 255;
    case sim::DataType::S8: return 127;
    case sim::DataType::U16: return 65535;
    case sim::DataType::S16: return 32767;
    case sim::DataType::S32: return std::numeric_limits<int32_t>::max();
    case sim::DataType::S64: return std::numeric_limits<int64_t>::max();
  }
  return 0;
}

// The low bits of v as a value of type t (8 or 16 bits).
int64_t wrap(int64_t v, sim::DataType t) {
  switch (t) {
    case sim::DataType::U8: return static_cast<uint8_t>(v);
    case sim::DataType::S8: return static_cast<int8_t>(v);
    case sim::DataType::U16: return static_cast<uint16_t>(v);
    case sim::DataType::S16: return static_cast<int16_t>(v);
    default: return v;
  }
}

}  // namespace

int64_t rescale(int64_t v, uint32_t scale, int shift, int double_round, int mode, size_t word_offset) {
  if (mode < DoubleSymmetric || mode > TruncateToLower || mode == DoubleAsymmetric) {
    sim::command_stream_error(word_offset, "OFM round mode " + std::to_string(mode) + " is not simulated");
  }
  // |v| < 2^30 and a 32-bit scale keep the product and its rounding within 63 bits.
  constexpr int64_t kNarrow = int64_t{1} << 30;
  if (v > -kNarrow && v < kNarrow && shift < 62) {
    return round_by<int64_t>(v * static_cast<int64_t>(scale), shift, double_round, mode);
  }
  return saturate64(round_by<i128>(static_cast<i128>(v) * scale, shift, double_round, mode));
}

int64_t rescale_operand(int64_t v, uint32_t scale, int shift, int double_round, int ifm_mode, size_t word_offset) {
  return rescale(v, scale, shift, double_round, ifm_mode == 1 ? Natural : DoubleSymmetric, word_offset);
}

int64_t shift_right(int64_t v, int shift, int mode) {
  // A plain shift has no multiply to round the high part of: the double modes round once.
  return saturate64(round_by<i128>(v, shift, 0, mode == DoubleSymmetric ? Symmetric : mode));
}

OutputStage::OutputStage(const sim::NpuOperation& op, const uint8_t* lut_ram, size_t lut_bytes) : op_(op) {
  const auto& u = op.u85;
  if (u.ofm_round_mode == DoubleAsymmetric || u.ofm_round_mode > TruncateToLower) {
    sim::command_stream_error(op.word_offset, "OFM round mode " + std::to_string(u.ofm_round_mode) + " is not simulated");
  }
  type_lo_ = type_min(op.ofm.dtype);
  type_hi_ = type_max(op.ofm.dtype);
  // The clamp is on the value before the table (16-bit registers) unless the clip range is NONE.
  const bool clip = op.activation.clip_range == 0;
  lo_ = clip ? op.activation.min : std::numeric_limits<int64_t>::min();
  hi_ = clip ? (op.ofm.dtype == sim::DataType::U16 ? static_cast<uint16_t>(op.activation.max) : op.activation.max)
             : std::numeric_limits<int64_t>::max();
  rescales_ = true;
  // With the clip range NONE an 8/16-bit OFM keeps the low bits of the result: Vela asks for
  // that (quantMin/Max at the int64 edges) where TFLite's CAST narrows by truncation.
  wraps_ = !clip && sim::element_size(op.ofm.dtype) <= 2 && op.activation.function == 0;
  // The 64-bit product of a 32-bit MUL leaves no room for the multiplier: only the shift
  // applies, as on the U55 (Vela's softmax MULs give scale 2^30 and shift 31 for TFLite's
  // doubling high multiply). A 32-bit ADD/SUB keeps it: Vela's scaling lifts both operands by
  // 2^14 through IFM/IFM2_SCALE and brings the sum back by OFM_SCALE 2^30 / 2^44, which gives
  // TFLite's plain int32 sum only with the multiplier applied.
  const bool wide_multiply = op.kind == sim::OpKind::Elementwise && op.ifm.dtype == sim::DataType::S32 &&
                             op.sub_op == static_cast<int>(sim::ElementwiseMode::Mul);
  global_scale_ = wide_multiply ? 1 : op.ofm_scale;
  // Tables: LUT_U8_U8 1, LUT_S8_S8 4, LUT_S8_S16 5, LUT_S8_S32 7 (256 entries, indexed by the
  // clamped 8-bit value); LUT_S16_S16 8, TANH 10 and SIGMOID 11 (activation_table.hpp: 512
  // interpolated words, indexed by the clamped 16-bit value). LUT_S16_S32 (9) is not modelled.
  const int f = op.activation.function;
  if (f == 0) return;
  int table_bytes = 0;
  switch (f) {
    case 1: table_bytes = 256; entry_bytes_ = 1; entry_signed_ = false; lut_index_bias_ = 0; break;
    case 4: table_bytes = 256; entry_bytes_ = 1; lut_index_bias_ = 128; break;
    case 5: table_bytes = 512; entry_bytes_ = 2; lut_index_bias_ = 128; break;
    case 7: table_bytes = 1024; entry_bytes_ = 4; lut_index_bias_ = 128; break;
    case kLutS16S16: case kLutTanh: case kLutSigmoid:
      table_bytes = 2048; interpolated_ = true; lut_index_bias_ = 32768; break;
    default:
      sim::command_stream_error(op.word_offset, "Ethos-U85 activation function " + std::to_string(f) + " is not simulated");
  }
  const size_t at = static_cast<size_t>(u.activation_table) * static_cast<size_t>(table_bytes);
  if (lut_ram == nullptr || at + static_cast<size_t>(table_bytes) > lut_bytes) {
    sim::command_stream_error(op.word_offset, "LUT table " + std::to_string(u.activation_table) + " of " +
                                                  std::to_string(table_bytes) + " bytes is beyond the LUT RAM");
  }
  table_ = lut_ram + at;
  if (f == kLutTanh || f == kLutSigmoid) {
    // The table reads the rescaled value beyond 16 bits: the clamp applies to its result.
    clamp_after_table_ = true;
    return;
  }
  // The index is the clamped value as an 8-bit (16-bit) number: clamp to its range even without a clip.
  lo_ = std::max<int64_t>(lo_, -lut_index_bias_);
  hi_ = std::min<int64_t>(hi_, (interpolated_ ? 65535 : 255) - lut_index_bias_);
}

int64_t OutputStage::operator()(int64_t acc, const emit::BiasScale* channel) const {
  const auto& u = op_.u85;
  int64_t v = acc;
  if (channel != nullptr) {
    v = rescale(v, channel->scale, channel->shift, u.ofm_double_round, u.ofm_round_mode, op_.word_offset);
  } else if (rescales_) {
    v = rescale(v, global_scale_, op_.ofm_shift, u.ofm_double_round, u.ofm_round_mode, op_.word_offset);
  }
  v += op_.ofm.zero_point;
  if (clamp_after_table_) return std::clamp(std::clamp(lookup16(table_, v, op_.activation.function), lo_, hi_), type_lo_, type_hi_);
  v = std::clamp(v, lo_, hi_);
  if (interpolated_) {
    v = lookup16(table_, v, op_.activation.function);
  } else if (table_ != nullptr) {
    const uint8_t* e = table_ + static_cast<size_t>(v + lut_index_bias_) * static_cast<size_t>(entry_bytes_);
    uint32_t raw = 0;
    std::memcpy(&raw, e, static_cast<size_t>(entry_bytes_));
    switch (entry_bytes_) {
      case 1: v = entry_signed_ ? static_cast<int8_t>(raw) : static_cast<int64_t>(raw); break;
      case 2: v = static_cast<int16_t>(raw); break;
      default: v = static_cast<int32_t>(raw); break;
    }
  }
  return wraps_ ? wrap(v, op_.ofm.dtype) : std::clamp(v, type_lo_, type_hi_);
}

}  // namespace cascader::ethos_u85
