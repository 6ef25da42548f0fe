#include "cascader/arch/block_traversal.hpp"

#include <algorithm>
#include <string>

#include "cascader/common/error.hpp"

namespace cascader {

int input_extent(int ofm, int stride, int dilated_kernel, int pad_before, int pad_after) {
  return (ofm - 1) * stride + dilated_kernel - pad_before - pad_after;
}

namespace {

// Source rows [first, last) read by outputs [o0, o1) along one axis.
void window(int o0, int o1, int stride, int taps, int dilation, int pad, int extent, int upscale, int& first,
            int& last) {
  const int lo = std::max(o0 * stride - pad, 0);
  const int hi = std::min((o1 - 1) * stride - pad + (taps - 1) * dilation + 1, extent);
  if (lo >= hi) {
    first = last = 0;
    return;
  }
  first = lo / upscale;
  last = (hi - 1) / upscale + 1;
}

}  // namespace

std::vector<TraversalBlock> block_traversal(const TraversalShape& s) {
  const auto positive = [](int v) { return v >= 1; };
  if (!positive(s.ofm_height) || !positive(s.ofm_width) || !positive(s.ofm_depth) || !positive(s.ifm_height) ||
      !positive(s.ifm_width) || !positive(s.ifm_depth)) {
    throw InvalidArgument("block traversal needs positive OFM and IFM shapes");
  }
  if (!positive(s.block_height) || !positive(s.block_width) || !positive(s.block_depth)) {
    throw InvalidArgument("block traversal needs a positive block config, got " + std::to_string(s.block_height) +
                          "x" + std::to_string(s.block_width) + "x" + std::to_string(s.block_depth));
  }
  if (s.upscale != 1 && s.upscale != 2) throw InvalidArgument("IFM upscale must be 1 or 2");
  const Kernel& k = s.kernel;
  if (!positive(k.height) || !positive(k.width) || !positive(k.stride_y) || !positive(k.stride_x) ||
      !positive(k.dilation_y) || !positive(k.dilation_x)) {
    throw InvalidArgument("block traversal needs a positive kernel, stride and dilation");
  }
  const int dz = div_round_up(s.ofm_depth, s.block_depth);
  const int dx = div_round_up(s.ofm_width, s.block_width);
  const int dy = div_round_up(s.ofm_height, s.block_height);
  const bool elementwise = s.op == TraversalOp::Elementwise;
  const bool all_channels = s.op == TraversalOp::Convolution || s.op == TraversalOp::ReduceSum;
  std::vector<TraversalBlock> jobs;
  jobs.reserve(static_cast<size_t>(dz) * dx * dy);
  for (int by = 0; by < dy; ++by) {
    for (int bx = 0; bx < dx; ++bx) {
      for (int bz = 0; bz < dz; ++bz) {
        TraversalBlock b;
        b.ofm = {by * s.block_height, std::min((by + 1) * s.block_height, s.ofm_height),
                 bx * s.block_width,  std::min((bx + 1) * s.block_width, s.ofm_width),
                 bz * s.block_depth,  std::min((bz + 1) * s.block_depth, s.ofm_depth)};
        if (elementwise) {
          b.ifm = b.ofm;
          if (s.has_ifm2 && !s.ifm2_scalar) {
            b.ifm2 = b.ofm;
            if (s.broadcast_h) b.ifm2.y0 = 0, b.ifm2.y1 = 1;
            if (s.broadcast_w) b.ifm2.x0 = 0, b.ifm2.x1 = 1;
            if (s.broadcast_c) b.ifm2.c0 = 0, b.ifm2.c1 = 1;
          }
        } else {
          window(b.ofm.y0, b.ofm.y1, k.stride_y, k.height, k.dilation_y, s.pad_top, s.ifm_height, s.upscale,
                 b.ifm.y0, b.ifm.y1);
          window(b.ofm.x0, b.ofm.x1, k.stride_x, k.width, k.dilation_x, s.pad_left, s.ifm_width, s.upscale,
                 b.ifm.x0, b.ifm.x1);
          b.ifm.c0 = all_channels ? 0 : b.ofm.c0;
          b.ifm.c1 = all_channels ? s.ifm_depth : b.ofm.c1;
        }
        jobs.push_back(b);
      }
    }
  }
  return jobs;
}

}  // namespace cascader
