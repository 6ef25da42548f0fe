#include "cascader/arch/ethos_u85/accumulators.hpp"

#include <string>

#include "cascader/arch/ethos_u85/registers.hpp"
#include "cascader/sim/register_file.hpp"

namespace cascader::ethos_u85 {

namespace {

constexpr int kPoolNone = 4;

bool null_pool(const sim::NpuOperation& op) { return op.kind == sim::OpKind::Pool && op.sub_op == kPoolNone; }

}  // namespace

void AccumulatorRam::check_input(const sim::NpuOperation& op) const {
  const int input = op.u85.acc_input;
  if (null_pool(op) != (input == kAccInputIfm2)) {
    sim::command_stream_error(op.word_offset, input == kAccInputIfm2
                                                  ? "accumulators from IFM2 are simulated for null pooling only"
                                                  : "null pooling needs its accumulators from IFM2");
  }
  if (input != kAccInputKeep) return;
  if (op.kind == sim::OpKind::Elementwise || op.kind == sim::OpKind::Resize) {
    sim::command_stream_error(op.word_offset, "kept accumulators are simulated for convolution and pooling only");
  }
  if (!valid_) sim::command_stream_error(op.word_offset, "keeps accumulators, but no operation kept any");
  if (h_ != op.ofm.height || w_ != op.ofm.width || c_ != op.ofm.depth) {
    sim::command_stream_error(op.word_offset, "keeps accumulators of " + std::to_string(h_) + "x" + std::to_string(w_) +
                                                  "x" + std::to_string(c_) + " for an OFM of another shape");
  }
}

std::vector<int64_t> AccumulatorRam::start(const sim::NpuOperation& op, std::vector<int64_t> computed,
                                           const std::vector<emit::BiasScale>& bias) const {
  if (op.u85.acc_input != kAccInputKeep) return computed;
  // The bias is loaded when the accumulators are reset, not again when they are kept.
  const size_t channels = static_cast<size_t>(c_);
  for (size_t i = 0; i < computed.size(); ++i) {
    computed[i] += kept_[i] - (bias.empty() ? 0 : bias[i % channels].bias);
  }
  return computed;
}

bool AccumulatorRam::finish(const sim::NpuOperation& op, const std::vector<int64_t>& acc) {
  kept_ = acc;
  h_ = op.ofm.height;
  w_ = op.ofm.width;
  c_ = op.ofm.depth;
  valid_ = true;
  return op.u85.acc_output == 0;  // 0 ENABLE, 1 DISABLE
}

}  // namespace cascader::ethos_u85
