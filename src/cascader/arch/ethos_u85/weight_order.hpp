// The order an Ethos-U85 weight decoder consumes a convolution's weights in, and where an
// operation's weight and scale streams come from in its registers.
//
// The U85 order differs from the U55/U65's (emit/weight_order.hpp): OFM micro-blocks are fed
// four channels at a time, and with several weight decoders each decoder takes every n-th
// group of four (decoder d: channels 4d..4d+3, then 4(d+n).., within each micro-block) from a
// stream of its own; kernel rows are walked in a serpentine (odd rows right to left); the IFM
// blocks of an OFM block are walked forward and backward in turn; part-kernel-first and
// depthwise orders take the kernel stride phase by phase and pad each sub-kernel to a multiple
// of 5 or 10 elements (depthwise also pads after every 10 elements on the larger arrays). In
// fast-weight format an operation has one stream, in which the decoders' orders alternate
// block by block. 2:4 sparse weights keep every value (zeros included) but take IFM channels
// sixteen at a time.
//
// Complexity: O(stream values) per walk.
#pragma once

#include <cstdint>
#include <vector>

#include "cascader/arch/accelerator.hpp"
#include "cascader/sim/command_stream.hpp"

namespace cascader::ethos_u85 {

enum class Traversal { DepthFirst, PartKernel, Depthwise };

struct WeightOrder {
  Traversal traversal = Traversal::DepthFirst;
  int ofm_depth = 1;
  int kernel_height = 1, kernel_width = 1;  // undilated
  int ifm_depth = 1;                        // 1 for depthwise
  int ofm_block_depth = 16, ifm_block_depth = 64;
  int ifm_bits = 8;
  int ofm_ublock_depth = 8;
  int stride_x = 1, stride_y = 1, dilation_x = 1, dilation_y = 1;
  int macs = 256;
  int decoders = 1;   // weight decoders sharing the OFM micro-blocks
  bool fast = false;  // fast-weight format: one stream, the decoders' orders interleaved
  bool sparse = false;  // 2:4 sparse weights: IFM channels in steps of 16, deeper IFM blocks
};

// The order an operation's registers describe on `accelerator`: traversal (depthwise, or the
// KERNEL_STRIDE weight-order bit), block depths (OFM_BLK_DEPTH; the IFM block depth the U85
// derives from the traversal, the IFM precision and the micro-block), the micro-block
// (ACC_FORMAT, whose depth the accelerator's micro-block of that height and width gives), the
// weight decoders in use, the format and the sparsity. Throws BinaryError for a micro-block the
// accelerator does not have.
WeightOrder weight_order_of(const sim::NpuOperation& op, const AcceleratorConfig& accelerator);

// A weighted operation as the compiler describes it: its kernel as stored (OHWI, undilated)
// and the register fields the weight order depends on.
struct WeightedKernel {
  int ofm_depth = 0, ifm_depth = 0, height = 1, width = 1;  // OHWI's O, I, H and W
  int ifm_bits = 8, stride_y = 1, stride_x = 1, dilation_y = 1, dilation_x = 1;
  int block_depth = 0, microblock = 0;  // OFM_BLK_DEPTH; ACC_FORMAT's micro-block field
  bool depthwise = false, part_kernel_first = false, acc48 = false;
};

// weight_order_of the operation whose registers `k` gives. Throws InvalidArgument for an IFM
// precision other than 8 or 16 bits, or a micro-block field outside 0..5.
WeightOrder weight_order_for(const WeightedKernel& k, const AcceleratorConfig& accelerator);

// The OFM micro-block ACC_FORMAT selects: the accelerator's micro-block of that height and
// width. Throws BinaryError for one the accelerator does not have.
BlockShape ofm_micro_block(const sim::NpuOperation& op, const AcceleratorConfig& accelerator);

// The IFM block depth a convolution (or REDUCE_SUM) walks its IFM in: fixed by traversal,
// array size, micro-block depth and sparsity.
int conv_ifm_block_depth(Traversal traversal, int macs, int ofm_ublock_depth, bool sparse, int ifm_bits);

// Values in the order's streams, padding included: one count per stream.
std::vector<size_t> stream_value_counts(const WeightOrder& order);

// Dense OHWI weights (I = 1 for depthwise) from the streams' values (one vector per stream,
// as many as stream_value_counts). Throws BinaryError when a stream holds fewer values than
// the order needs.
std::vector<int16_t> unpack_u85_weights(const std::vector<std::vector<int16_t>>& streams, const WeightOrder& order);

// The inverse: each stream's values from dense OHWI weights (padding 0).
std::vector<std::vector<int16_t>> order_u85_weights(const std::vector<int16_t>& ohwi, const WeightOrder& order);

}  // namespace cascader::ethos_u85
