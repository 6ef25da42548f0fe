// The order the NPU's weight decoder consumes an operation's weights in: OFM blocks, IFM
// blocks, sub-kernels of at most 8x8, micro-blocks. One walker serves the encoder's reorder
// (weight_encoder) and its inverse (unpack_weights), so the two cannot disagree.
//
// Complexity: O(padded weight count / micro-block depth) visits.
#pragma once

#include <algorithm>

#include "cascader/common/error.hpp"
#include "cascader/emit/weights.hpp"

namespace cascader::emit {

// Walks the NPU's weight order a run at a time: visit(ofm, ky, kx, ifm, count, valid) stands for
// `count` consecutive stream values, those of input channels ifm .. ifm + count - 1, of which
// the first `valid` exist (the rest are padding, zero in the stream). A run is one micro-block's
// input channels (one value for depthwise): the per-value work is then a copy, not a walk.
template <typename Visit>
void walk_weight_order(const WeightLayout& l, Visit visit) {
  const int ifm_block_depth = (l.part_kernel_first || l.ifm_bits == 16) ? 16 : 32;
  const int decomp_h = 8 / l.dilation_y, decomp_w = 8 / l.dilation_x;
  const int ifm_depth = l.depthwise ? 1 : l.ifm_depth;
  const int iz_count = l.depthwise ? 1 : l.ifm_ublock_depth;
  for (int ofm_block = 0; ofm_block < l.ofm_depth; ofm_block += l.ofm_block_depth) {
    const int ofm_block_depth = std::min(l.ofm_block_depth, l.ofm_depth - ofm_block);
    for (int ifm_block = 0; ifm_block < (l.depthwise ? 1 : ifm_depth); ifm_block += ifm_block_depth) {
      int ifm_block_clipped = l.depthwise ? l.ifm_ublock_depth
                              : l.part_kernel_first ? std::min(ifm_block_depth, ifm_depth - ifm_block)
                                                    : ifm_block_depth;
      for (int sub_y = 0; sub_y < l.kernel_height; sub_y += decomp_h) {
        const int sub_h = std::min(l.kernel_height - sub_y, decomp_h);
        for (int sub_x = 0; sub_x < l.kernel_width; sub_x += decomp_w) {
          const int sub_w = std::min(l.kernel_width - sub_x, decomp_w);
          int elements = sub_w * sub_h;
          if (l.part_kernel_first) {
            const int multiple = l.ifm_bits == 16 ? 2 : 4;
            elements = (elements + multiple - 1) / multiple * multiple;
          } else if (l.depthwise) {
            elements = (elements + 3) / 4 * 4;
          }
          const int outer = l.part_kernel_first ? ifm_block_clipped : 1;
          const int inner = l.part_kernel_first ? 1 : ifm_block_clipped;
          for (int ifm_outer = 0; ifm_outer < outer; ifm_outer += l.ifm_ublock_depth) {
            for (int ofm_ublk = 0; ofm_ublk < ofm_block_depth; ofm_ublk += l.ofm_ublock_depth) {
              for (int e = 0; e < elements; ++e) {
                const int kx = e % sub_w, ky = e / sub_w;
                for (int ifm_inner = 0; ifm_inner < inner; ifm_inner += l.ifm_ublock_depth) {
                  const int ifm = ifm_block + ifm_inner + ifm_outer;
                  for (int oz = 0; oz < l.ofm_ublock_depth; ++oz) {
                    const int ofm = ofm_block + ofm_ublk + oz;
                    const bool exists = ofm < l.ofm_depth && ky < sub_h && ofm_ublk + oz < ofm_block_depth;
                    const int valid = exists ? std::clamp(ifm_depth - ifm, 0, iz_count) : 0;
                    visit(ofm, sub_y + ky, sub_x + kx, ifm, iz_count, valid);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

inline void check_weight_layout(const WeightLayout& l) {
  if (l.ofm_depth < 1 || l.kernel_height < 1 || l.kernel_width < 1 || l.ifm_depth < 1 ||
      l.ofm_block_depth < 1 || l.ifm_ublock_depth < 1 || l.ofm_ublock_depth < 1 ||
      (l.dilation_x != 1 && l.dilation_x != 2) || (l.dilation_y != 1 && l.dilation_y != 2) ||
      (l.ifm_bits != 8 && l.ifm_bits != 16) || (l.depthwise && l.part_kernel_first)) {
    throw InvalidArgument("invalid weight layout");
  }
}

}  // namespace cascader::emit
