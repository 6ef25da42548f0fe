#include "cascader/arch/block_config.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>
#include <utility>

#include "cascader/common/error.hpp"

namespace cascader {

bool BlockQuery::operator==(const BlockQuery& o) const {
  return block_type == o.block_type && ifm == o.ifm && ofm == o.ofm && ifm2 == o.ifm2 &&
         ifm2_scalar == o.ifm2_scalar && ifm_bits == o.ifm_bits && kernel == o.kernel && lut_bytes == o.lut_bytes &&
         rescaled == o.rescaled && traversal == o.traversal && block_depth == o.block_depth &&
         ifm_upscale == o.ifm_upscale;
}

bool prefers_part_kernel_first(const Shape4& ifm, int ifm_bits, const Kernel& kernel) {
  if (ifm.c <= 8) return true;
  // Depth-first wastes the tail of the last 32 (int8) / 16 channel slice; part-kernel-first
  // wastes the tail of the last 8 channels and of the last 4 (int8) / 2 kernel elements.
  const int k = kernel.elements_wh();
  const double depth_util = ifm.c / double(round_up(ifm.c, ifm_bits == 8 ? 32 : 16));
  const double part_util = (ifm.c / double(round_up(ifm.c, 8))) * (k / double(round_up(k, ifm_bits == 8 ? 4 : 2)));
  return part_util >= depth_util;
}

namespace {

enum class EwUsage { No, Full, Scalar };

// Everything about the query that does not depend on the OFM block.
struct Fixed {
  EwUsage ew = EwUsage::No;
  bool equal_depth = false;  // IFM block depth follows the OFM block (depthwise, pooling, elementwise)
  bool depthwise = false;
  bool convolution = false;
  bool part_kernel = false;
  ShramElement acc = ShramElement::Acc32;
  int acc_bits = 32, acc_granule = 1, ifm_granule = 1, lut_banks = 0, ifm_block_depth = 8;
  Shape4 ifm;  // the larger of IFM and IFM2
};

void validate(const BlockQuery& q) {
  if (q.ifm_bits != 8 && q.ifm_bits != 16 && q.ifm_bits != 32) {
    throw InvalidArgument("ifm_bits must be 8, 16 or 32, got " + std::to_string(q.ifm_bits));
  }
  auto positive = [](const Shape4& s) { return s.n > 0 && s.h > 0 && s.w > 0 && s.c > 0; };
  if (!positive(q.ifm) || !positive(q.ofm) || (q.ifm2 && !positive(*q.ifm2))) {
    throw InvalidArgument("feature-map shapes must have every dimension >= 1");
  }
  const Kernel& k = q.kernel;
  if (k.height < 1 || k.width < 1 || k.stride_y < 1 || k.stride_x < 1 || k.dilation_y < 1 || k.dilation_x < 1) {
    throw InvalidArgument("kernel size, stride and dilation must be >= 1");
  }
  if (q.lut_bytes < 0) throw InvalidArgument("lut_bytes must be >= 0");
  if (q.block_depth < 0) throw InvalidArgument("block_depth must be >= 0 (0: searched)");
}

Fixed fixed_part(const AcceleratorConfig& arch, const BlockQuery& q) {
  require_shram(arch);
  validate(q);
  Fixed f;
  f.ifm = q.ifm;
  if (q.ifm2 && q.ifm2->elements() > q.ifm.elements()) f.ifm = *q.ifm2;
  if (q.block_type == NpuBlockType::ElementWise) {
    const bool scalar = q.ifm.elements() == 1 || q.ifm2_scalar;
    f.ew = scalar && q.ifm_bits <= 16 ? EwUsage::Scalar : EwUsage::Full;
  }
  f.depthwise = q.block_type == NpuBlockType::ConvolutionDepthWise;
  f.equal_depth = f.ew != EwUsage::No || q.block_type == NpuBlockType::Pooling || f.depthwise;
  f.convolution = q.block_type == NpuBlockType::ConvolutionMxN || f.depthwise;
  switch (q.traversal) {
    case Traversal::Auto:
      f.part_kernel = q.block_type == NpuBlockType::ConvolutionMxN && prefers_part_kernel_first(f.ifm, q.ifm_bits, q.kernel);
      break;
    case Traversal::DepthFirst: f.part_kernel = false; break;
    case Traversal::PartKernelFirst: f.part_kernel = q.block_type == NpuBlockType::ConvolutionMxN; break;
  }
  if (q.ifm_bits == 16 && q.block_type != NpuBlockType::Pooling && q.rescaled) f.acc = ShramElement::Acc40;
  f.acc_bits = f.acc == ShramElement::Acc40 ? 40 : 32;
  f.acc_granule = arch.granule(f.acc);
  if (f.ew != EwUsage::No) {
    f.ifm_granule = arch.granule(q.ifm_bits == 8    ? ShramElement::Ifm8Elementwise
                                 : q.ifm_bits == 16 ? ShramElement::Ifm16Elementwise
                                                    : ShramElement::Ifm32);
  } else {
    f.ifm_granule = arch.granule(q.ifm_bits == 8 ? ShramElement::Ifm8 : q.ifm_bits == 16 ? ShramElement::Ifm16
                                                                                          : ShramElement::Ifm32);
  }
  f.lut_banks = std::max((q.lut_bytes + arch.shram_bank_bytes - 1) / arch.shram_bank_bytes, arch.shram_reserved_end_banks);
  if (q.ifm_bits == 16) {
    f.ifm_block_depth = round_up(std::min(f.ifm.c, 16), 4);
  } else {
    f.ifm_block_depth = round_up(std::min(f.ifm.c, f.part_kernel ? 16 : 32), arch.ifm_ublock.depth);
  }
  return f;
}

int ifm_extent(int ofm, int stride, int kernel_area, int sub_kernel_max, int ublock) {
  return round_up((ofm - 1) * stride + std::min(kernel_area, sub_kernel_max), ublock);
}

// Fits `ofm_block` (already legal) into SHRAM; fills the layout on success.
std::optional<BlockConfig> fit(const AcceleratorConfig& arch, const BlockQuery& q, const Fixed& f,
                               const BlockShape& ofm_block) {
  BlockConfig cfg;
  cfg.ofm_block = ofm_block;
  cfg.accumulator = f.acc;
  cfg.part_kernel_first = f.part_kernel;
  cfg.ifm_block.height = ifm_extent(ofm_block.height, q.kernel.stride_y, q.kernel.area_height(),
                                    arch.sub_kernel_max.height, arch.ofm_ublock.height);
  cfg.ifm_block.width = ifm_extent(ofm_block.width, q.kernel.stride_x, q.kernel.area_width(),
                                   arch.sub_kernel_max.width, arch.ofm_ublock.width);
  cfg.ifm_block.depth = f.equal_depth ? ofm_block.depth : f.ifm_block_depth;

  // A 1-high OFM with a 1-high kernel on a 2-high micro-block needs only half the accumulators.
  BlockShape acc_block = ofm_block;
  if (q.ofm.h == 1 && q.kernel.height == 1 && arch.ofm_ublock.height == 2) acc_block.height = 1;

  // SHRAM holds the IFM as stored: an upscaled IFM block is half as tall and wide as the
  // extent its OFM block walks (Vela's blocks for transposed convolutions fill SHRAM exactly so).
  const int up = std::max(q.ifm_upscale, 1);
  const int64_t ifm_bytes = div_round_up(cfg.ifm_block.height, up) * int64_t(div_round_up(cfg.ifm_block.width, up)) *
                            round_up((cfg.ifm_block.depth * q.ifm_bits + 7) / 8, 8);
  const int bank = arch.shram_bank_bytes;
  const int ifm_banks = round_up(int((ifm_bytes + bank - 1) / bank) * 2, f.ifm_granule);
  const int lut_start = arch.shram_banks - f.lut_banks;
  int ifm_end = arch.shram_reserved_output_banks + ifm_banks;
  const int ifm2_start = ifm_end;
  int acc_start = lut_start;
  if (f.ew == EwUsage::No) {
    const int64_t acc_bytes = acc_block.height * int64_t(acc_block.width) * round_up(acc_block.depth, 8) * f.acc_bits / 8;
    acc_start -= round_up(int((acc_bytes + bank - 1) / bank) * 2, f.acc_granule);
  } else {
    const int ifm2_banks = f.ew == EwUsage::Full ? ifm_banks : 0;
    if (ifm2_start + ifm2_banks > acc_start) return std::nullopt;
    ifm_end = acc_start;
  }
  if (ifm_end > acc_start) return std::nullopt;
  cfg.layout = ShramLayout{arch.shram_reserved_output_banks, ifm_end, ifm2_start, acc_start, lut_start};
  return cfg;
}

bool legal(const AcceleratorConfig& arch, const BlockShape& b) {
  auto ok = [](int v, int max, int u) { return v > 0 && v <= max && v % u == 0; };
  return ok(b.height, arch.ofm_block_max.height, arch.ofm_ublock.height) &&
         ok(b.width, arch.ofm_block_max.width, arch.ofm_ublock.width) &&
         ok(b.depth, arch.ofm_block_max.depth, arch.ofm_ublock.depth);
}

constexpr int kSplitDepth = 16;

// Walks the search space in Vela's order, calling visit(cfg) for each block that fits.
template <typename Visit>
void search(const AcceleratorConfig& arch, const BlockQuery& q, const Fixed& f, Visit visit) {
  const BlockShape& u = arch.ofm_ublock;
  const int max_h = round_up(std::min(q.ofm.h, arch.ofm_block_max.height), u.height);
  const int max_w = round_up(std::min(q.ofm.w, arch.ofm_block_max.width), u.width);
  const int max_d = round_up(std::min(q.ofm.c, arch.ofm_block_max.depth), u.depth);
  int depth = std::max(u.depth, std::min(max_d, kSplitDepth));
  if (depth < q.ofm.c) depth = round_up(depth, kSplitDepth);
  if (q.block_depth > 0) depth = q.block_depth;  // that depth only: the loop below runs once
  // A block that does not fit SHRAM fits no block at least as high, wide and deep (its IFM
  // block and accumulators only grow): a flag per H x W in micro-blocks carries a failure to
  // the larger depths (a tree set here was a tenth of the planner's time, in allocations), and
  // the rest of a row, or of the rows, is skipped at once. Only blocks that fit are visited,
  // so the visits and their order are those of trying every block.
  const int columns = max_w / u.width;
  std::vector<char> wont_fit(size_t(std::max(max_h / u.height, 0)) * size_t(std::max(columns, 0)), 0);
  while (depth <= max_d) {
    for (int h = u.height; h <= max_h; h += u.height) {
      char* row = wont_fit.data() + size_t(h / u.height - 1) * size_t(columns);
      if (row[0]) break;  // nor does any higher row
      for (int w = u.width; w <= max_w; w += u.width) {
        char* known = row + size_t(w / u.width - 1);
        if (*known) break;  // nor does any wider block
        auto cfg = fit(arch, q, f, BlockShape{h, w, depth});
        if (!cfg) {
          std::fill(known, row + columns, char{1});
          break;
        }
        visit(*cfg);
      }
    }
    if (q.block_depth > 0) break;
    depth += u.depth;
    if (depth < q.ofm.c) depth = round_up(depth, kSplitDepth);
  }
}

}  // namespace

std::optional<BlockConfig> try_block_config(const AcceleratorConfig& arch, const BlockQuery& q,
                                            const BlockShape& ofm_block) {
  const Fixed f = fixed_part(arch, q);
  if (!legal(arch, ofm_block)) return std::nullopt;
  return fit(arch, q, f, ofm_block);
}

std::vector<BlockConfig> enumerate_block_configs(const AcceleratorConfig& arch, const BlockQuery& q) {
  const Fixed f = fixed_part(arch, q);
  std::vector<BlockConfig> out;
  search(arch, q, f, [&](const BlockConfig& c) { out.push_back(c); });
  return out;
}

BlockConfig choose_block_config(const AcceleratorConfig& arch, const BlockQuery& q) {
  const Fixed f = fixed_part(arch, q);
  const Shape4& ifm = f.ifm;
  const Shape4& ofm = q.ofm;
  const int ifm_repeats = div_round_up(q.kernel.area_width(), arch.sub_kernel_max.width) *
                          div_round_up(q.kernel.area_height(), arch.sub_kernel_max.height);
  const int64_t weight_fetch_wh = f.convolution ? int64_t(q.kernel.width) * q.kernel.height : 0;
  const float ofm_elements = float(ofm.elements());

  // Single precision throughout, as Vela: exact ties decide between blocks.
  float best_cost = std::numeric_limits<float>::infinity();
  float best_coverage = std::numeric_limits<float>::infinity();
  std::optional<BlockConfig> best;
  search(arch, q, f, [&](const BlockConfig& c) {
    const BlockShape& b = c.ofm_block;
    // Blocks per axis, whole (what is fetched) and fractional (what the cost is spread over).
    BlockShape fb = b;  // the block as fitted (1-high for 1-high OFMs on 2-high micro-blocks)
    if (q.ofm.h == 1 && q.kernel.height == 1 && arch.ofm_ublock.height == 2) fb.height = 1;
    const int64_t full_h = div_round_up(ofm.h, fb.height), full_w = div_round_up(ofm.w, fb.width);
    const int64_t full_d = div_round_up(ofm.c, fb.depth);
    const float frac_h = float(ofm.h) / float(fb.height), frac_w = float(ofm.w) / float(fb.width);
    const float frac_d = float(ofm.c) / float(fb.depth);

    float weight_fetch = float(weight_fetch_wh * ifm.c * full_h * full_w);
    if (!f.depthwise) weight_fetch *= frac_d * float(fb.depth);
    float ifm_fetch = float(c.ifm_block.height * int64_t(c.ifm_block.width) * ifm.c * ifm_repeats) * frac_w * frac_h;
    if (!f.equal_depth) ifm_fetch *= float(full_d);

    float cost = q.block_type == NpuBlockType::ElementWise ? ofm_elements / float(b.height * b.width * b.depth)
                                                           : (ifm_fetch + weight_fetch) / ofm_elements;
    // When both IFM buffers hold the whole IFM, nothing is refetched.
    if (ifm.elements() < c.ifm_block.elements() * 2) cost /= 2.0f;

    if (!(cost <= best_cost)) return;
    bool take = false;
    if (cost == best_cost) {
      // Equal cost: prefer the small block that covers more of the IFM.
      const int64_t cover_wh = int64_t(std::min(ifm.h, c.ifm_block.height)) * std::min(ifm.w, c.ifm_block.width);
      const float cover = float(ifm.elements_wh()) / float(std::max<int64_t>(cover_wh, 1));
      if (cover <= best_coverage && b.height <= 4 && b.width <= 4) {
        best_coverage = cover;
        take = true;
      }
    } else {
      best_coverage = std::numeric_limits<float>::infinity();
      take = true;
    }
    if (take) {
      best_cost = cost;
      best = c;
    }
  });
  if (!best) {
    throw InvalidArgument("no OFM block config fits SHRAM on " + arch.name +
                          " for this op (IFM block too large for the IFM bits / kernel)");
  }
  return *best;
}

}  // namespace cascader
