#include "cascader/arch/ethos_u85/ethos_u85.hpp"

namespace cascader::ethos_u85 {

namespace {

// MACs, weight decoders, OFM micro-block choices (the first is the default), IFM micro-block,
// internal RAMs and the AXI port counts, as Vela 5.2's Ethos-U85 architecture lists them.
AcceleratorConfig u85(const char* name, int macs, int weight_decoders, std::vector<BlockShape> ofm_ublocks,
                      BlockShape ifm_ublock, InternalRam ram, int axi_sram_log2, int axi_ext_log2) {
  AcceleratorConfig c;
  c.name = name;
  c.macs_per_cycle = macs;
  c.cores = 1;  // one MAC array; the weight decoders split a convolution's OFM depth
  c.ofm_ublock = ofm_ublocks.front();
  c.ofm_ublocks = std::move(ofm_ublocks);
  c.ifm_ublock = ifm_ublock;
  c.ofm_block_max = {128, 128, 1024};
  c.internal_ram = ram;
  c.weight_decoders = weight_decoders;
  c.axi_sram_ports_log2 = axi_sram_log2;
  c.axi_ext_ports_log2 = axi_ext_log2;
  c.shram_banks = 0;
  c.shram_lut_banks = 0;          // the LUT has a RAM of its own (2 KiB)
  c.shram_reserved_output_banks = 0;
  c.axi_bytes_per_cycle = 16;     // 128-bit AXI
  c.max_outstanding_dma = 4;
  return c;
}

}  // namespace

TargetFamily family() {
  using M = MemoryArea;
  TargetFamily f;
  f.name = "ethos-u85";
  f.product = Product::EthosU85;
  // InternalRam: {IFM buffer, accumulators, output buffer, chaining buffer} bytes.
  f.accelerators = {
      u85("ethos-u85-128", 128, 1, {{1, 2, 8}, {1, 1, 16}}, {1, 2, 8}, {8192, 8192, 2048, 768}, 1, 0),
      u85("ethos-u85-256", 256, 1, {{1, 2, 16}, {1, 4, 8}, {2, 2, 8}}, {2, 2, 8}, {16384, 16384, 2048, 1536}, 1, 0),
      u85("ethos-u85-512", 512, 2, {{2, 2, 16}, {1, 4, 16}}, {2, 2, 16}, {16384, 32768, 4096, 3072}, 1, 0),
      u85("ethos-u85-1024", 1024, 4, {{2, 2, 32}, {1, 4, 32}, {2, 4, 16}}, {4, 2, 16}, {16384, 65536, 4096, 6144}, 1,
          1),
      u85("ethos-u85-2048", 2048, 4, {{2, 2, 64}, {1, 4, 64}, {4, 4, 16}}, {4, 4, 16},
          {32768, 131072, 8192, 12288}, 2, 1),
  };
  // vela.ini: {clock_scale, burst, read latency, write latency, ports, max reads, max writes}.
  f.systems = {
      two_port_system("Ethos_U85_SYS_Flash_Low", 200e6, {1.0, 64, 8, 8, 2, 8, 8}, M::OffChipFlash,
                      {0.0625, 128, 32, 0, 1, 2, 0}),
      two_port_system("Ethos_U85_SYS_Flash_High", 500e6, {1.0, 64, 32, 32, 2, 8, 8}, M::OffChipFlash,
                      {0.0625, 128, 64, 0, 1, 2, 0}),
      two_port_system("Ethos_U85_SYS_DRAM_Low", 500e6, {1.0, 64, 16, 16, 2, 8, 8}, M::Dram,
                      {0.46875, 128, 500, 250, 1, 24, 12}),
      two_port_system("Ethos_U85_SYS_DRAM_Mid", 1e9, {1.0, 64, 32, 32, 2, 8, 8}, M::Dram,
                      {0.75, 128, 500, 250, 1, 64, 32}),
      two_port_system("Ethos_U85_SYS_DRAM_High", 1e9, {1.0, 64, 32, 32, 4, 8, 8}, M::Dram,
                      {0.75, 128, 500, 250, 2, 64, 32}),
  };
  f.default_system = "Ethos_U85_SYS_DRAM_Mid";
  f.default_memory_mode = MemoryMode::DedicatedSram;
  f.id_word = 0x20007000u;  // arch 2.0.0, product major 7, status 0
  f.compiles = true;        // uncascaded and cascaded compiles; operations its emitter refuses go to the CPU
  return f;
}

}  // namespace cascader::ethos_u85
