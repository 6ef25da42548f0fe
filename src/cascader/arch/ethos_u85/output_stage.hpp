// The Ethos-U85's scaling and output stage, as its registers define them:
//  - rescaling (OFM_SCALE, and IFM_SCALE/IFM2_SCALE on an elementwise operation's operands):
//    v * scale / 2^shift, rounded by the register's round mode. Double rounding (DOUBLE_SYMMETRIC,
//    TensorFlow Lite's fixed-point multiply then rounding shift) rounds first 31 - DBL_RND bits
//    down, then to the full shift; DBL_RND is the left shift TFLite applies to an ADD's operands
//    (20 for int8) before its multiply, so the result is TFLite's;
//  - the output stage of every block operation: the rescale (per channel from the scale stream,
//    or global), the OFM zero point, the clamp (ACTIVATION_MIN/MAX, unless the clip range is
//    NONE), then the activation (a lookup table in the 2 KiB LUT RAM, whose size and entry width
//    the function gives, at table index x table size; 16-bit tables interpolate), saturating to
//    the OFM type; with the clip range NONE and no table an 8/16-bit OFM takes the low bits
//    instead (Vela's narrowing CAST).
// Complexity: O(1) per element.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cascader/emit/weights.hpp"
#include "cascader/sim/command_stream.hpp"

namespace cascader::ethos_u85 {

// round_mode_ofm: 0 DOUBLE_SYMMETRIC, 1 NATURAL, 2 DOUBLE_ASYMMETRIC, 3 SYMMETRIC,
// 4 TRUNCATE_TO_ZERO, 5 TRUNCATE_TO_LOWER. IFM scales have 0 DOUBLE_SYMMETRIC, 1 NATURAL.
enum OfmRounding : int { DoubleSymmetric = 0, Natural = 1, DoubleAsymmetric = 2, Symmetric = 3, TruncateToZero = 4,
                         TruncateToLower = 5 };

// v * scale / 2^shift rounded by `mode`. Throws BinaryError (naming the operation's word) for
// DOUBLE_ASYMMETRIC, whose tie rule no Vela output pins down.
int64_t rescale(int64_t v, uint32_t scale, int shift, int double_round, int mode, size_t word_offset);

// An elementwise operand's scaling by IFM_SCALE or IFM2_SCALE (round mode 0 or 1).
int64_t rescale_operand(int64_t v, uint32_t scale, int shift, int double_round, int ifm_mode, size_t word_offset);

// v / 2^shift rounded by an OFM round mode (the SHR operation).
int64_t shift_right(int64_t v, int shift, int mode);

class OutputStage {
 public:
  // `lut_ram` is the 2 KiB LUT memory. Throws BinaryError for an activation function or round
  // mode the simulator does not model, or a table beyond the LUT RAM.
  OutputStage(const sim::NpuOperation& op, const uint8_t* lut_ram, size_t lut_bytes);

  // The stored value of an accumulator; `channel` is the scale-stream entry of per-channel
  // scaling (nullptr for global scaling or none).
  int64_t operator()(int64_t acc, const emit::BiasScale* channel) const;

 private:
  const sim::NpuOperation& op_;
  bool rescales_;
  uint32_t global_scale_;  // OFM_SCALE's multiplier as the output unit applies it
  int64_t lo_, hi_;            // the clamp
  int64_t type_lo_, type_hi_;  // the OFM type
  bool wraps_ = false;         // no clip: an 8/16-bit OFM keeps the result's low bits
  const uint8_t* table_ = nullptr;
  int lut_index_bias_ = 0;  // added to the clamped value to index the table
  int entry_bytes_ = 1;
  bool entry_signed_ = true;
  bool interpolated_ = false;  // a 16-bit table (activation_table.hpp)
  bool clamp_after_table_ = false;  // TANH, SIGMOID
};

}  // namespace cascader::ethos_u85
