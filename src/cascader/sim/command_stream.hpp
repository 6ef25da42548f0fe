// Decoding of an Ethos-U register command stream into typed NPU operations. The U55/U65
// register map is decoded here; the U85's, in arch/ethos_u85/command_decoder.
//
// The stream is a sequence of 32-bit words. A cmd0 word (bits 14-15 == 0) carries a 10-bit
// opcode and a 16-bit parameter; a cmd1 word (bits 14-15 == 1) carries the same plus a
// 32-bit payload word. Register-setting commands update a register state; NPU_OP_* commands
// start an operation that reads that state. Decoding therefore replays the register writes
// and snapshots a typed NpuOperation at every operation command. Complexity: O(words).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cascader/arch/accelerator.hpp"

namespace cascader::sim {

enum class DataType : uint8_t { U8, S8, U16, S16, S32, S64 };  // S64: Ethos-U85 only
enum class Layout : uint8_t { NHWC, NHCWB16 };
enum class OpKind : uint8_t { Conv, Depthwise, Pool, Elementwise, Dma, Resize };
// The U55/U65 modes, then the U85's (whose register values they are).
enum class PoolMode : uint8_t { Max = 0, Average = 1, ReduceSum = 2, Sum = 3, None = 4, Min = 5, ArgmaxX = 6, ArgmaxY = 7 };
enum class ElementwiseMode : uint8_t {
  Mul = 0, Add, Sub, Min, Max, LRelu, Abs, Clz, Shr, Shl,
  Lsr = 10, Div = 11, CmpEq = 16, CmpNe, CmpGe, CmpGt, And = 33, Or, Xor, Not, AndNot = 42,
};
enum class Rounding : uint8_t { TFL = 0, Truncate = 1, Natural = 2 };

int element_size(DataType t);
bool is_signed(DataType t);
const char* name(DataType t);
const char* name(OpKind k);
const char* name(PoolMode m);         // "MAX", "AVERAGE", "REDUCE_SUM"
const char* name(ElementwiseMode m);  // "MUL", "ADD", ... as the register spec spells them

// The SHRAM is addressed by DMA through this region number (internal bit | region 3).
constexpr int kShramRegion = 0x103;

// A feature map as the NPU sees it: up to four tiles (BASE0..3 with HEIGHT0/HEIGHT1/WIDTH0)
// laid out in NHWC or NHCWB16 with explicit byte strides.
struct FeatureMap {
  int region = 0;
  std::array<uint64_t, 4> base{};
  int height = 1, width = 1, depth = 1;  // IFM: depth only (H/W come from the tiles and OFM)
  int height0 = 1, height1 = 1, width0 = 1;
  int64_t stride_x = 0, stride_y = 0, stride_c = 0;
  DataType dtype = DataType::U8;
  Layout layout = Layout::NHWC;
  int zero_point = 0;

  // Region-relative byte address of element (y, x, c), choosing the tile as the hardware does.
  uint64_t address(int y, int x, int c) const;
};

struct Kernel {
  int width = 1, height = 1;  // dilated extent (register value + 1)
  int stride_x = 1, stride_y = 1;
  int dilation_x = 1, dilation_y = 1;
  bool part_kernel_first = false;
  // The kernel's own extent (the weights' H and W), without the dilation's holes.
  int undilated_height() const { return (height - 1) / dilation_y + 1; }
  int undilated_width() const { return (width - 1) / dilation_x + 1; }
};

struct Padding {
  int top = 0, left = 0, bottom = 0, right = 0;
};

struct AddressRange {
  int region = 0;
  uint64_t address = 0;
  uint64_t length = 0;
};

struct Activation {
  int function = 0;  // 0 none (clamp only), 3 tanh, 4 sigmoid, 16..23 LUT slot 0..7
  int clip_range = 0;
  int min = 0, max = 0;  // clamp, in OFM quantized units
};

// One typed NPU operation: the register state that matters at the operation command.
struct NpuOperation {
  OpKind kind = OpKind::Conv;
  int sub_op = 0;          // PoolMode / ElementwiseMode for Pool / Elementwise
  size_t word_offset = 0;  // of the NPU_OP_* word, in 32-bit words from the stream start
  FeatureMap ifm, ifm2, ofm;
  Kernel kernel;
  Padding padding;
  AddressRange weights, scales;
  Activation activation;
  int ifm_upscale = 0;
  int ifm_scale_mode = 0;     // elementwise: 0 both 16-bit, 1 OPA 32-bit, 2 OPB 32-bit
  Rounding ifm_rounding = Rounding::TFL;
  Rounding rounding = Rounding::TFL;
  bool global_scale = false;  // OFM_PRECISION.scaling: OFM_SCALE register instead of per-channel
  uint32_t ofm_scale = 1;
  int ofm_shift = 0;
  uint32_t opa_scale = 1;
  int opa_shift = 0;
  uint32_t opb_scale = 1;
  bool broadcast_h = false, broadcast_w = false, broadcast_c = false;
  bool reversed_operands = false;
  bool ifm2_is_scalar = false;
  int ifm2_scalar = 0;
  int acc_format = 0;  // 0 int32, 1 int40, 2 fp s5.10
  int parallel_mode = 0;  // Ethos-U65-512: cores - 1; each core has its own weight/scale stream
  AddressRange weights1, scales1;  // the second core's streams
  int block_width = 1, block_height = 1, block_depth = 1;
  // DMA
  AddressRange dma_src, dma_dst;
  // Ethos-U85 only: the register fields with no U55/U65 counterpart, as the stream sets them.
  struct U85Fields {
    int ifm_storage = 0, ifm2_storage = 0, ofm_storage = 0;  // 0/1 tiles, 2 chained, 3 none
    int ofm_transpose = 0, ofm_reverse = 0;
    int acc_input = 0, acc_output = 0, microblock = 0;
    int ofm_round_mode = 0, ofm_double_round = 0;
    int ifm_round_mode = 0, ifm2_round_mode = 0;
    int ifm_double_round = 0, ifm2_double_round = 0;
    uint32_t ifm_scale = 0, ifm2_scale = 0;
    int ifm_shift = 0, ifm2_shift = 0;
    int broadcast_mode = 0, ifm_broadcast_mode = 0;  // IFM2_BROADCAST / IFM_BROADCAST, 8 scalar
    uint32_t op_scalar = 0;
    int activation_table = 0;
    int weight_format = 0, weight_sparsity = 0;
    bool weights_ifm2 = false;  // a matrix multiply: the weights are the IFM2 feature map
    int resize_mode = 0;
    // RESIZE_X/Y: output position p reads IFM position (p * d + offset) / n.
    struct ResizeAxis {
      int n = 1, d = 1, offset = 0;
    } resize_x, resize_y;
    std::array<AddressRange, 4> weight_streams{};  // one per weight decoder
    // A DMA's 2-D/3-D and index registers (arch/ethos_u85/dma.hpp); a 1-D copy leaves them.
    struct Dma {
      int stride_mode = 0;  // 0 1-D, 1 2-D, 2 3-D
      bool src_indexed = false, dst_indexed = false;
      uint64_t length = 0;  // bytes per row
      int size0 = 1, size1 = 1;
      uint64_t src_stride0 = 0, src_stride1 = 0, dst_stride0 = 0, dst_stride1 = 0;
      AddressRange index;  // the int32 index array
      int64_t index_max = 0, index_skip1 = 0;
      bool strided_or_indexed() const { return stride_mode != 0 || src_indexed || dst_indexed; }
    } dma;
  } u85;

  bool has_ifm2() const;
};

struct CommandStream {
  std::vector<NpuOperation> operations;
  size_t words = 0;
  Product product = Product::EthosU55;  // whose register map the words were decoded with
};

// Decodes a command stream for a product (a payload's NpuConfig::product). Throws BinaryError
// naming the word offset for unknown opcodes, a truncated cmd1, reserved field values, or a
// stream that does not end with NPU_OP_STOP.
CommandStream decode_command_stream(const uint32_t* words, size_t count, Product product = Product::EthosU55);


}  // namespace cascader::sim
