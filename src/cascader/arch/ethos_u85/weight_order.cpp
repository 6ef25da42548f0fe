#include "cascader/arch/ethos_u85/weight_order.hpp"

#include <algorithm>
#include <string>
#include <tuple>

#include "cascader/arch/ethos_u85/registers.hpp"
#include "cascader/common/error.hpp"

namespace cascader::ethos_u85 {

namespace {

constexpr int kInterleave = 4;  // OFM channels a decoder takes at a time

int round_up(int v, int m) { return (v + m - 1) / m * m; }

// IFM channels of one micro-block step, and the multiple each sub-kernel is padded to.
int ifm_ublock_depth(const WeightOrder& o) {
  if (o.traversal == Traversal::Depthwise) return 1;
  if (o.traversal == Traversal::PartKernel && o.ifm_bits == 16 && !o.sparse) return 8;
  return o.ifm_block_depth;
}

int sub_kernel_round(const WeightOrder& o) {
  switch (o.traversal) {
    case Traversal::DepthFirst: return 1;
    case Traversal::PartKernel: return o.ifm_bits == 16 || o.sparse ? 10 : 5;
    case Traversal::Depthwise: return 10;
  }
  return 1;
}

// Walks decoder `decoder`'s values in order: visit(ofm, ky, kx, ifm) for a weight position
// (which may lie beyond the OFM or IFM depth: the value is then 0) and pad(n) for n values of
// padding.
template <typename Visit, typename Pad>
void walk(const WeightOrder& o, int decoder, Visit visit, Pad pad) {
  const bool dw = o.traversal == Traversal::Depthwise;
  // Depth-first takes the kernel as it is; the other orders take it stride phase by phase.
  const int sx = o.traversal == Traversal::DepthFirst ? 1 : o.stride_x;
  const int sy = o.traversal == Traversal::DepthFirst ? 1 : o.stride_y;
  const int round = sub_kernel_round(o), ifm_ub = ifm_ublock_depth(o);
  const int inner_step = dw ? 1 : o.sparse ? 16 : 8;  // sparse: a 2:4 group pair
  const int decomp_x = 8 / o.dilation_x, decomp_y = 8 / o.dilation_y;
  const int dw_padding = (o.ifm_bits != 16 && o.macs <= 256) ? 0 : o.macs <= 512 ? 2 : 6;
  const int per_decoder = o.ofm_ublock_depth / o.decoders;
  const int ifm_blocks_end = dw ? 1 : o.ifm_depth;
  int ifm_step = -o.ifm_block_depth, ifm_start = 0;
  for (int ofm_block = 0; ofm_block < o.ofm_depth; ofm_block += o.ofm_block_depth) {
    ifm_step = -ifm_step;  // the IFM blocks go forward, then backward for the next OFM block
    const int ofm_clipped = std::min(o.ofm_block_depth, o.ofm_depth - ofm_block);
    for (int ifm_block = ifm_start; ifm_block < ifm_blocks_end && ifm_block >= 0; ifm_block += ifm_step) {
      ifm_start = ifm_block;
      const int ifm_clipped = std::min(o.ifm_block_depth, o.ifm_depth - ifm_block);
      for (int sub_x = 0; sub_x < o.kernel_width; sub_x += decomp_x) {
        const int sub_w = std::min(o.kernel_width - sub_x, decomp_x);
        for (int sub_y = 0; sub_y < o.kernel_height; sub_y += decomp_y) {
          const int sub_h = std::min(o.kernel_height - sub_y, decomp_y);
          for (int ifm_outer = 0; ifm_outer < (dw ? 1 : ifm_clipped); ifm_outer += ifm_ub) {
            for (int ofm_outer = 0; ofm_outer < ofm_clipped; ofm_outer += o.ofm_ublock_depth) {
              int remaining = round_up(sub_w * sub_h, round);
              for (int py = 0; py < sy; ++py) {
                const int strided_h = (sub_h + sy - 1 - py) / sy;
                for (int px = 0; px < sx; ++px) {
                  const int strided_w = (sub_w + sx - 1 - px) / sx;
                  for (int ky = 0; ky < strided_h; ++ky) {
                    for (int k = 0; k < strided_w; ++k) {
                      const int kx = ky % 2 == 0 ? k : strided_w - 1 - k;  // serpentine rows
                      const int wy = sub_y + py + ky * sy, wx = sub_x + px + kx * sx;
                      --remaining;
                      for (int ifm_inner = 0; ifm_inner < ifm_ub; ifm_inner += inner_step) {
                        for (int z = decoder * kInterleave; z < o.ofm_ublock_depth; z += kInterleave * o.decoders) {
                          for (int oi = 0; oi < kInterleave; ++oi) {
                            for (int i = 0; i < inner_step; ++i) {
                              visit(ofm_block + ofm_outer + oi + z, wy, wx, ifm_block + ifm_outer + ifm_inner + i);
                            }
                          }
                        }
                      }
                      if (dw && remaining % round == 0) pad(dw_padding * per_decoder);
                    }
                  }
                }
              }
              if (remaining > 0) pad((remaining + (dw ? dw_padding : 0)) * ifm_ub * per_decoder);
            }
          }
        }
      }
    }
  }
}

void check(const WeightOrder& o) {
  const bool ok = o.ofm_depth >= 1 && o.kernel_height >= 1 && o.kernel_width >= 1 && o.ifm_depth >= 1 &&
                  o.ofm_block_depth >= 1 && o.ifm_block_depth >= 1 && o.decoders >= 1 && o.ofm_ublock_depth >= 1 &&
                  o.ofm_ublock_depth % (kInterleave * o.decoders) == 0 && (o.dilation_x == 1 || o.dilation_x == 2) &&
                  (o.dilation_y == 1 || o.dilation_y == 2) && o.stride_x >= 1 && o.stride_y >= 1 &&
                  (o.ifm_bits == 8 || o.ifm_bits == 16) && (o.traversal != Traversal::Depthwise || o.ifm_depth == 1) &&
                  !(o.fast && o.traversal == Traversal::Depthwise) &&
                  !(o.sparse && o.traversal == Traversal::Depthwise);
  if (!ok) throw BinaryError("invalid Ethos-U85 weight order");
}

size_t decoder_values(const WeightOrder& o, int decoder) {
  size_t n = 0;
  walk(o, decoder, [&](int, int, int, int) { ++n; }, [&](int count) { n += static_cast<size_t>(count); });
  return n;
}

// Values a decoder contributes to each block of a fast-weight stream.
size_t fast_block(const WeightOrder& o) {
  return static_cast<size_t>(o.ofm_ublock_depth * ifm_ublock_depth(o) * sub_kernel_round(o) / o.decoders);
}

// The decoders' walks, each as a list of `value(position)` for the weight positions into the
// dense OHWI weights and `absent` for a value that is 0, then laid out as the streams hold
// them. One template for the positions (unpack) and the values (order): the encoder gathers
// the values as it walks, without a position list eight bytes a weight (that list and its
// gather were most of the U85 encoder's time outside the compression).
template <typename T, typename Value>
std::vector<std::vector<T>> decoder_streams(const WeightOrder& o, T absent, Value value) {
  check(o);
  std::vector<std::vector<T>> per_decoder(static_cast<size_t>(o.decoders));
  for (int d = 0; d < o.decoders; ++d) {
    auto& out = per_decoder[static_cast<size_t>(d)];
    out.reserve(decoder_values(o, d));
    walk(
        o, d,
        [&](int ofm, int y, int x, int i) {
          const bool exists = ofm < o.ofm_depth && i < o.ifm_depth;
          out.push_back(exists ? value(((static_cast<int64_t>(ofm) * o.kernel_height + y) * o.kernel_width + x) *
                                           o.ifm_depth + i)
                               : absent);
        },
        [&](int count) { out.insert(out.end(), static_cast<size_t>(count), absent); });
  }
  if (!o.fast || o.decoders == 1) return per_decoder;
  // One fast-weight stream: a block of each decoder's values in turn.
  const size_t block = fast_block(o);
  std::vector<T> stream;
  std::vector<size_t> at(per_decoder.size(), 0);
  for (bool more = true; more;) {
    more = false;
    for (size_t d = 0; d < per_decoder.size(); ++d) {
      const size_t take = std::min(block, per_decoder[d].size() - at[d]);
      stream.insert(stream.end(), per_decoder[d].begin() + static_cast<std::ptrdiff_t>(at[d]),
                    per_decoder[d].begin() + static_cast<std::ptrdiff_t>(at[d] + take));
      at[d] += take;
      more = more || at[d] < per_decoder[d].size();
    }
  }
  return {stream};
}

std::vector<std::vector<int64_t>> stream_positions(const WeightOrder& o) {
  return decoder_streams<int64_t>(o, int64_t{-1}, [](int64_t position) { return position; });
}

}  // namespace

BlockShape ofm_micro_block(const sim::NpuOperation& op, const AcceleratorConfig& accelerator) {
  const int m = op.u85.microblock;
  const auto ublock = std::find_if(accelerator.ofm_ublocks.begin(), accelerator.ofm_ublocks.end(), [&](const BlockShape& b) {
    return b.height == kMicroblockHeights[m] && b.width == kMicroblockWidths[m];
  });
  if (ublock == accelerator.ofm_ublocks.end()) {
    throw BinaryError("command stream word " + std::to_string(op.word_offset) + ": " + accelerator.name + " has no " +
                      std::to_string(kMicroblockHeights[m]) + "x" + std::to_string(kMicroblockWidths[m]) + " OFM micro-block");
  }
  return *ublock;
}

int conv_ifm_block_depth(Traversal traversal, int macs, int ofm_ublock_depth, bool sparse, int ifm_bits) {
  if (traversal == Traversal::PartKernel) return 16;
  if (ifm_bits == 32 || ((macs == 128 || macs == 256) && ofm_ublock_depth == 16 && !sparse)) return 32;
  return sparse && ifm_bits == 8 ? 128 : 64;
}

WeightOrder weight_order_of(const sim::NpuOperation& op, const AcceleratorConfig& accelerator) {
  const auto& u = op.u85;
  WeightOrder o;
  o.traversal = op.kind == sim::OpKind::Depthwise ? Traversal::Depthwise
                : op.kernel.part_kernel_first    ? Traversal::PartKernel
                                                 : Traversal::DepthFirst;
  o.ofm_depth = op.ofm.depth;
  o.kernel_height = op.kernel.undilated_height();
  o.kernel_width = op.kernel.undilated_width();
  o.ifm_depth = o.traversal == Traversal::Depthwise ? 1 : op.ifm.depth;
  o.ofm_block_depth = op.block_depth;
  o.ifm_bits = 8 * sim::element_size(op.ifm.dtype);
  const sim::Kernel& k = op.kernel;
  std::tie(o.stride_x, o.stride_y, o.dilation_x, o.dilation_y) = std::tie(k.stride_x, k.stride_y, k.dilation_x, k.dilation_y);
  o.macs = accelerator.macs_per_cycle;
  o.decoders = accelerator.weight_decoders;
  o.fast = u.weight_format == 1;
  o.sparse = u.weight_sparsity == 1;
  o.ofm_ublock_depth = ofm_micro_block(op, accelerator).depth;
  o.ifm_block_depth = conv_ifm_block_depth(o.traversal, o.macs, o.ofm_ublock_depth, o.sparse, o.ifm_bits);
  return o;
}

std::vector<size_t> stream_value_counts(const WeightOrder& order) {
  check(order);
  std::vector<size_t> counts;
  for (int d = 0; d < order.decoders; ++d) counts.push_back(decoder_values(order, d));
  if (order.fast && order.decoders > 1) {
    size_t total = 0;
    for (size_t c : counts) total += c;
    counts = {total};
  }
  return counts;
}

std::vector<int16_t> unpack_u85_weights(const std::vector<std::vector<int16_t>>& streams, const WeightOrder& o) {
  const auto positions = stream_positions(o);
  if (streams.size() != positions.size()) {
    throw BinaryError("the weight order has " + std::to_string(positions.size()) + " streams, not " +
                      std::to_string(streams.size()));
  }
  std::vector<int16_t> ohwi(static_cast<size_t>(o.ofm_depth) * o.kernel_height * o.kernel_width * o.ifm_depth, 0);
  for (size_t s = 0; s < streams.size(); ++s) {
    if (streams[s].size() < positions[s].size()) {
      throw BinaryError("weight stream " + std::to_string(s) + " holds " + std::to_string(streams[s].size()) +
                        " values, the operation needs " + std::to_string(positions[s].size()));
    }
    for (size_t k = 0; k < positions[s].size(); ++k) {
      if (positions[s][k] >= 0) ohwi[static_cast<size_t>(positions[s][k])] = streams[s][k];
    }
  }
  return ohwi;
}

std::vector<std::vector<int16_t>> order_u85_weights(const std::vector<int16_t>& ohwi, const WeightOrder& o) {
  if (ohwi.size() != static_cast<size_t>(o.ofm_depth) * o.kernel_height * o.kernel_width * o.ifm_depth) {
    check(o);  // an invalid order is named first, as before the sizes
    throw InvalidArgument("OHWI weights of " + std::to_string(ohwi.size()) + " values do not match the weight order");
  }
  const int16_t* values = ohwi.data();
  return decoder_streams<int16_t>(o, int16_t{0}, [values](int64_t position) { return values[position]; });
}

WeightOrder weight_order_for(const WeightedKernel& k, const AcceleratorConfig& accelerator) {
  if (k.ifm_bits != 8 && k.ifm_bits != 16) throw InvalidArgument("ifm_bits must be 8 or 16");
  if (k.microblock < 0 || k.microblock > 5) throw InvalidArgument("the micro-block field is 0..5");
  // The operation the streams go with, as the decoder reads its order from the registers.
  sim::NpuOperation op;
  op.kind = k.depthwise ? sim::OpKind::Depthwise : sim::OpKind::Conv;
  op.ofm.depth = k.ofm_depth;
  op.ifm.depth = k.ifm_depth;
  op.ifm.dtype = k.ifm_bits == 8 ? sim::DataType::S8 : sim::DataType::S16;
  op.kernel.stride_y = k.stride_y;
  op.kernel.stride_x = k.stride_x;
  op.kernel.dilation_y = k.dilation_y;
  op.kernel.dilation_x = k.dilation_x;
  op.kernel.height = (k.height - 1) * k.dilation_y + 1;
  op.kernel.width = (k.width - 1) * k.dilation_x + 1;
  op.kernel.part_kernel_first = k.part_kernel_first;
  op.block_depth = k.block_depth;
  op.u85.microblock = k.microblock;
  op.acc_format = k.acc48 ? 1 : 0;
  return weight_order_of(op, accelerator);
}

}  // namespace cascader::ethos_u85
