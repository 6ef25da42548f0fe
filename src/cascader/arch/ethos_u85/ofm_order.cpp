#include "cascader/arch/ethos_u85/ofm_order.hpp"

#include <string>

#include "cascader/arch/ethos_u85/registers.hpp"
#include "cascader/sim/register_file.hpp"

namespace cascader::ethos_u85 {

namespace {

// Stored axis k takes computed axis kAxes[mode][k] (0 H, 1 W, 2 C).
constexpr int kAxes[8][3] = {{0, 1, 2}, {1, 0, 2}, {0, 2, 1}, {1, 2, 0}, {0, 0, 0}, {0, 0, 0}, {2, 0, 1}, {2, 1, 0}};

}  // namespace

OfmOrder::OfmOrder(const sim::NpuOperation& op)
    : transpose_(op.u85.ofm_transpose), reverse_(op.u85.ofm_reverse), oh_(op.ofm.height), ow_(op.ofm.width),
      oc_(op.ofm.depth) {
  if (transpose_ == 4 || transpose_ == 5) {
    sim::command_stream_error(op.word_offset, "reserved OFM transpose " + std::to_string(transpose_));
  }
  if (transpose_ != 0 && reverse_ != 0) {
    sim::command_stream_error(op.word_offset, "an OFM both transposed and reversed");
  }
  if (!identity() && op.u85.ofm_storage == CHAINED) {
    sim::command_stream_error(op.word_offset, "a chained OFM cannot be transposed or reversed");
  }
}

std::array<int, 3> OfmOrder::stored_of(std::array<int, 3> hwc) const {
  const int* axes = kAxes[transpose_];
  return {hwc[static_cast<size_t>(axes[0])], hwc[static_cast<size_t>(axes[1])], hwc[static_cast<size_t>(axes[2])]};
}

std::array<int, 3> OfmOrder::stored(int y, int x, int c) const {
  switch (reverse_) {  // 1 H, 2 W, 3 C: mirrored within the operation's OFM
    case 1: y = oh_ - 1 - y; break;
    case 2: x = ow_ - 1 - x; break;
    case 3: c = oc_ - 1 - c; break;
    default: break;
  }
  return stored_of({y, x, c});
}

}  // namespace cascader::ethos_u85
