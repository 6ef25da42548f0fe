// The description of one NPU operation that the cycle model costs. It carries only what the
// hardware sees: shapes, formats, element sizes, memories, kernel, encoded weight sizes, the
// activation, and (optionally) a fixed block config and traversal.
#pragma once

#include <optional>
#include <vector>

#include "cascader/arch/block_config.hpp"
#include "cascader/arch/geometry.hpp"
#include "cascader/arch/system_config.hpp"

namespace cascader {

enum class NpuOpType {
  Conv2D = 0,
  DepthwiseConv2D,
  MaxPool,
  AvgPool,
  Add,
  Sub,
  Mul,
  Minimum,
  Maximum,
  FullyConnected,
  Dma,  // a memory-to-memory copy of ifm -> ofm (weights, LUTs, feature maps)
  ReduceSum,  // sum over the IFM depth into a depth-1 OFM (pooling hardware, Vela's REDUCE_SUM)
};

enum class TensorFormat { NHWC = 0, NHCWB16 };

// One step of a TRANSPOSE as Vela decomposes it, named by the output's axis order over the
// step's input (H, W, C): NWHC swaps H and W (channels stay innermost), NHCW swaps W and C,
// NCWH swaps H and C. Other permutations are two steps (0312: NCWH then NHCW; 0231: NWHC then
// NHCW).
enum class Transpose { None = 0, NWHC, NHCW, NCWH };

// Fused activation. Relu covers every clamp (ReLU, ReLU6, ReLU-N1-to-1); Lut covers sigmoid,
// tanh and table lookups.
enum class Activation { None = 0, Relu, Lut };

struct FeatureMap {
  Shape4 shape;
  TensorFormat format = TensorFormat::NHWC;
  int bits = 8;  // element size: 8, 16 or 32
  MemoryArea memory = MemoryArea::Sram;
};

struct Padding {
  int top = 0, left = 0, bottom = 0, right = 0;
};

// Ethos-U85 only: what its cycle model (arch/ethos_u85/performance) needs beyond the shapes.
// A chain of operations (each OFM kept in the chaining buffer for the next) is costed as one
// operation, as Vela costs it: the first operation's compute, with the output cycles of every
// operation of the chain, the inputs the later ones read from memory, and the last one's OFM.
struct U85Chained {
  NpuOpType type = NpuOpType::Add;
  int ifm_bits = 8, ofm_bits = 8;
  bool writes_chain = false;              // its OFM goes on to the next operation
  bool lut = false;                       // a table activation: in the same pass of the output unit
  std::optional<FeatureMap> memory_input;  // an operand it reads from memory (the other is chained)
};

struct U85Op {
  BlockShape ofm_ublock{1, 1, 1};
  BlockShape ifm_block{1, 1, 1};  // as the hardware allocates it
  bool acc48 = false;
  bool fast_weights = false, sparse_weights = false;
  bool resize = false;
  bool ifm_chained = false, ifm2_chained = false;  // read from the chaining buffer, not memory
  bool ofm_chained = false;                         // the OFM stays in the chaining buffer
  int own_ofm_bits = 8;  // this operation's OFM element size (NpuOp::ofm is its chain's last OFM)
  // The OFM written transposed along H and W (WHC, WCH, CWH) or reversed along W: the output
  // unit runs at half its activation throughput. (NpuOp::ofm's shape is then the permuted
  // map in memory; the block stays the unpermuted one, as the registers hold it.)
  bool ofm_half_throughput = false;
  std::vector<U85Chained> chain;                    // the operations after this one in its chain
};

struct NpuOp {
  NpuOpType type = NpuOpType::Conv2D;
  FeatureMap ifm;
  std::optional<FeatureMap> ifm2;  // elementwise second operand; a 1x1x1x1 shape is a scalar
  FeatureMap ofm;
  Kernel kernel;
  Padding padding;
  int64_t weight_bytes = 0;  // encoded weight stream
  int64_t scale_bytes = 0;   // encoded scale and bias
  MemoryArea weight_memory = MemoryArea::OnChipFlash;
  // Where the weights are DMA'd before use (nullopt: the NPU reads them in place). With a
  // buffer, the DMA of the first slice must finish before the op starts; later slices stream
  // under it (double buffering), and the DMA of the whole stream ends at least the last slice's
  // compute before the op does.
  std::optional<MemoryArea> weight_buffer_memory;
  int64_t weight_first_dma_bytes = 0;  // first slice's weights + scales (0: the whole stream)
  int weight_last_slice_depth = 0;     // OFM depth of the last slice (0: the whole OFM depth)
  int64_t dma_slack_cycles = 0;        // cycles that hide this op's weight or LUT DMA: the preceding op's
                                       // CostRecord::buffering_slack_cycles
  Activation activation = Activation::None;
  int64_t lut_bytes = 0;     // LUT copied into SHRAM by DMA when activation == Lut
  MemoryArea lut_memory = MemoryArea::OnChipFlash;
  bool rescaled = true;      // 16-bit ops that rescale use 40-bit accumulators
  std::optional<BlockConfig> block_config;  // nullopt: chosen (and cached) by the model
  Traversal traversal = Traversal::Auto;
  int block_depth = 0;       // a fixed OFM block depth for the model's choice (see BlockQuery)
  int64_t dma_bytes = 0;     // Dma only: bytes copied from ifm.memory to ofm.memory
  // 2: the IFM is upscaled by 2 in H and W on the way in (a nearest-neighbour repeat, or the
  // zeros of a transposed convolution). `ifm.shape` stays the extent the kernel walks; the NPU
  // fetches only the stored half of it.
  int ifm_upscale = 1;
  // Vela's accounting of a command that writes every `ofm_step`-th pixel and row of a map (a
  // phase of its bilinear resize: four 2x2 depthwise commands, each writing one pixel of every
  // 2x2 output cell): costed over the box of the map those pixels span, with the IFM it reads.
  // The NPU computes only the pixels it writes; Vela's per-layer figures count the box (each
  // phase of a 12x12 -> 24x24 resize as a 23x23 OFM), so the estimator sets this only when it
  // accounts as Vela does. 1: the OFM shape is what is computed.
  int ofm_step = 1;
  // Vela's accounting of a transpose step (Transpose::None: none): `ifm.shape` is the step's
  // input, `ofm.shape` its permutation. Vela costs the step by its memory traffic alone, the
  // slower of reading the input and writing the output, with the block its search picks for
  // the unpermuted shape, whatever commands carry it out (one strided copy, or a run of
  // one-channel copies). The estimator sets it only when it accounts as Vela does.
  Transpose transpose = Transpose::None;
  // Vela's accounting of an elementwise op whose first operand is one element (SUB(0, x),
  // Vela's NEG; a softmax's SUB from a constant): the NPU takes it as IFM2 (a scalar, or a map
  // broadcast along every axis) with the operands reversed, but Vela's figures read the
  // operands in the operator's order, and there an IFM of one element and more than 8 bits
  // counts one read of itself and none of the tensor (its element accounting reads the tensor
  // only after an 8-bit scalar). Set with `ifm2` of one element; the estimator sets it only
  // when it accounts as Vela does (an int16 NEG on U65, DRAM-bound: 1,366 -> 768 cycles, Vela
  // 768; an int32 softmax SUB on U55-128, from flash: 128 -> 40, Vela 40).
  bool scalar_first = false;
  std::optional<U85Op> u85;  // set for Ethos-U85 operations
  // Ethos-U85: the OFM of the whole operation this one is a stripe of (nullopt: this op's own).
  // The U85's micro-block follows the OFM shape and fixes the order of the weight stream all
  // stripes of an operation share: it is chosen for the whole operation.
  std::optional<Shape4> whole_ofm;
};

// The lookup is the whole op (Vela's LUT op: a 1x1 pool through the table), not an activation
// fused into another op; Vela costs its output stage as no activation (its LUT DMA still counts).
inline bool is_lut_operation(const NpuOp& op) {
  return op.activation == Activation::Lut && op.type == NpuOpType::AvgPool && op.kernel.width == 1 &&
         op.kernel.height == 1 && op.kernel.stride_x == 1 && op.kernel.stride_y == 1;
}


NpuBlockType block_type_of(NpuOpType t);
bool is_elementwise(NpuOpType t);

}  // namespace cascader
