#include "cascader/arch/ethos_u85/elementwise.hpp"

#include <algorithm>
#include <string>

#include "cascader/arch/ethos_u85/output_stage.hpp"
#include "cascader/sim/integer_ops.hpp"
#include "cascader/sim/register_file.hpp"

namespace cascader::ethos_u85 {

using sim::ElementwiseMode;

namespace {

// The NPU's boolean: all bits set for true.
int64_t boolean(bool v) { return v ? -1 : 0; }

}  // namespace

void require_simulated_elementwise(const sim::NpuOperation& op) {
  switch (static_cast<ElementwiseMode>(op.sub_op)) {
    case ElementwiseMode::Add: case ElementwiseMode::Sub: case ElementwiseMode::Mul: case ElementwiseMode::Min:
    case ElementwiseMode::Max: case ElementwiseMode::Abs: case ElementwiseMode::Clz: case ElementwiseMode::Shl:
    case ElementwiseMode::Shr: case ElementwiseMode::Div: case ElementwiseMode::CmpEq: case ElementwiseMode::CmpNe:
    case ElementwiseMode::CmpGe: case ElementwiseMode::CmpGt: case ElementwiseMode::And: case ElementwiseMode::Or:
    case ElementwiseMode::Xor: case ElementwiseMode::Not: case ElementwiseMode::AndNot: case ElementwiseMode::LRelu:
      return;
    default:
      sim::command_stream_error(op.word_offset, std::string("Ethos-U85 elementwise mode ") +
                                                    sim::name(static_cast<ElementwiseMode>(op.sub_op)) +
                                                    " is not simulated");
  }
}

int64_t elementwise_value(const sim::NpuOperation& op, int64_t a, int64_t b) {
  const auto& u = op.u85;
  const auto scaled_a = [&] {
    return rescale_operand(a, u.ifm_scale, u.ifm_shift, u.ifm_double_round, u.ifm_round_mode, op.word_offset);
  };
  const auto scaled_b = [&] {
    return rescale_operand(b, u.ifm2_scale, u.ifm2_shift, u.ifm2_double_round, u.ifm2_round_mode, op.word_offset);
  };
  switch (static_cast<ElementwiseMode>(op.sub_op)) {
    case ElementwiseMode::Add: return scaled_a() + scaled_b();
    case ElementwiseMode::Sub: return scaled_a() - scaled_b();
    case ElementwiseMode::Mul: return scaled_a() * scaled_b();
    case ElementwiseMode::Min: return std::min(scaled_a(), scaled_b());
    case ElementwiseMode::Max: return std::max(scaled_a(), scaled_b());
    case ElementwiseMode::LRelu:  // the operand's own rescale by its sign (IFM2_SCALE holds alpha's)
      return a < 0 ? rescale_operand(a, u.ifm2_scale, u.ifm2_shift, u.ifm2_double_round, u.ifm2_round_mode,
                                     op.word_offset)
                   : scaled_a();
    case ElementwiseMode::Abs: return sim::abs_value(a);
    case ElementwiseMode::Clz: return sim::count_leading_zeros32(a);
    case ElementwiseMode::Shl: return sim::shift_left32(a, b);
    case ElementwiseMode::Shr:
      return shift_right(a, static_cast<int>(std::clamp<int64_t>(b, 0, 31)), u.ofm_round_mode);
    case ElementwiseMode::CmpEq: return boolean(scaled_a() == scaled_b());
    case ElementwiseMode::CmpNe: return boolean(scaled_a() != scaled_b());
    case ElementwiseMode::CmpGe: return boolean(scaled_a() >= scaled_b());
    case ElementwiseMode::CmpGt: return boolean(scaled_a() > scaled_b());
    case ElementwiseMode::And: return a & b;
    case ElementwiseMode::Or: return a | b;
    case ElementwiseMode::Xor: return a ^ b;
    case ElementwiseMode::Not: return ~a;
    case ElementwiseMode::AndNot: return a & ~b;
    case ElementwiseMode::Div:
      if (b == 0) sim::command_stream_error(op.word_offset, "DIV by zero: the NPU's result is not defined");
      return a / b;  // C++ truncates toward zero, as the NPU does
    default:
      require_simulated_elementwise(op);
      return 0;
  }
}

}  // namespace cascader::ethos_u85
