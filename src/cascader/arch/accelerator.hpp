// Ethos-U accelerator configurations (U55-32 ... U85-2048): the fixed hardware facts the block
// config search and the cycle model need. Values are the published figures that Vela also uses
// (MAC array, micro-blocks, SHRAM or internal RAM geometry, output and activation throughput
// per element). Each product's table lives in its own folder (arch/ethos_u55, arch/ethos_u65,
// arch/ethos_u85), gathered by arch/target_family. Lookup is O(accelerators), a handful.
#pragma once

#include <array>
#include <string>
#include <vector>

namespace cascader {

// Height, width, depth of a block (micro-block, OFM block, IFM block).
struct BlockShape {
  int height = 1;
  int width = 1;
  int depth = 1;
  long long elements() const { return 1LL * height * width * depth; }
  bool operator==(const BlockShape& o) const {
    return height == o.height && width == o.width && depth == o.depth;
  }
};

// SHRAM element kinds: the index into AcceleratorConfig::shram_granules.
enum class ShramElement { Ifm8 = 0, Ifm16, Ifm8Elementwise, Ifm16Elementwise, Ifm32, Acc16, Acc32, Acc40 };

// Index into AcceleratorConfig::output_cycles_per_element: which output pipeline an op uses.
enum class OutputKind {
  ElementwiseUnary32 = 0,  // 32-bit elementwise with one input
  ElementwiseBinary32,     // 32-bit elementwise with two inputs
  Mul32,                   // MUL with a 32-bit output
  Acc40OrMul,              // MUL, or a convolution / pooling with 40-bit accumulators
  SimpleAddSub,
  AdvancedAddSub,          // ADD/SUB with rescaling (what int8 models use)
  MaxPool,
  Other,
};

// Index into AcceleratorConfig::activation_cycles_per_element.
enum class ActivationKind { Lut = 0, Relu, None };

// The product field of the NPU's CONFIG register: which register interface, weight format and
// cycle formulas a binary is for.
enum class Product : int { EthosU55 = 0, EthosU65 = 1, EthosU85 = 2 };

// The Ethos-U85's internal memories (it has no SHRAM): IFM buffer, accumulators, output buffer
// and the chaining buffer that keeps a fused operation's output on chip.
struct InternalRam {
  int ifm_bytes = 0;
  int acc_bytes = 0;
  int ob_bytes = 0;
  int cb_bytes = 0;
};

struct AcceleratorConfig {
  std::string name;                 // "ethos-u55-128"
  int id = 0;                       // index in the fixed table: a cheap identity for caches
  Product product = Product::EthosU55;
  bool is_u65 = false;
  int macs_per_cycle = 0;           // per core
  int cores = 1;
  BlockShape ofm_ublock;            // OFM micro-block: the DPU's smallest output unit
  BlockShape ifm_ublock;
  BlockShape ofm_block_max{32, 64, 128};
  int shram_banks = 0;              // 1 KiB each
  int shram_bank_bytes = 1024;
  int shram_reserved_output_banks = 2;
  int shram_reserved_end_banks = 0;  // unused at the top of SHRAM (where the LUT goes)
  int shram_lut_banks = 2;           // banks the LUT takes when an op uses one
  std::array<int, 8> shram_granules{};  // bank allocation granule per ShramElement
  int elementwise_units = 1;
  std::array<double, 8> output_cycles_per_element{};
  std::array<double, 3> activation_cycles_per_element{};
  int axi_bytes_per_cycle = 8;      // AXI data width / 8
  int max_outstanding_dma = 1;
  int max_outstanding_kernels = 2;
  BlockShape sub_kernel_max{8, 8, 65536};  // the DPU walks kernels in at most 8x8 pieces
  // Ethos-U85 only. ofm_ublock is the first of ofm_ublocks, the micro-blocks the MAC array
  // can be configured to; weight_decoders is how many weight streams an operation reads
  // (WEIGHT_BASE..WEIGHT3_BASE); the AXI port counts go into the CONFIG register.
  std::vector<BlockShape> ofm_ublocks;
  InternalRam internal_ram;
  int weight_decoders = 1;
  int axi_sram_ports_log2 = 0;
  int axi_ext_ports_log2 = 0;

  int granule(ShramElement e) const { return shram_granules[static_cast<int>(e)]; }
};

// Throws InvalidArgument naming the valid names if `name` is unknown.
const AcceleratorConfig& accelerator_config(const std::string& name);

// Throws InvalidArgument for an accelerator without a SHRAM (the Ethos-U85): the block-config
// search and the cycle formulas model the U55/U65 SHRAM, and would divide by its zero banks.
void require_shram(const AcceleratorConfig& arch);
std::vector<std::string> accelerator_names();

}  // namespace cascader
