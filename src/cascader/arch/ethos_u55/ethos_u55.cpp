#include "cascader/arch/ethos_u55/ethos_u55.hpp"

namespace cascader::ethos_u55 {

AcceleratorConfig shram_accelerator(const char* name, int macs, int cores, BlockShape ofm_ublock, BlockShape ifm_ublock,
                                    int banks, std::array<int, 8> granules, int elementwise_units,
                                    std::array<double, 8> output_cycles, std::array<double, 3> activation_cycles,
                                    int axi_bytes_per_cycle, int max_outstanding_dma) {
  AcceleratorConfig c;
  c.name = name;
  c.macs_per_cycle = macs;
  c.cores = cores;
  c.ofm_ublock = ofm_ublock;
  c.ifm_ublock = ifm_ublock;
  c.shram_banks = banks;
  // Configurations with more than 16 banks keep the top two free, which is where the LUT lives.
  c.shram_reserved_end_banks = banks > 16 ? 2 : 0;
  c.shram_granules = granules;
  c.elementwise_units = elementwise_units;
  c.output_cycles_per_element = output_cycles;
  c.activation_cycles_per_element = activation_cycles;
  c.axi_bytes_per_cycle = axi_bytes_per_cycle;
  c.max_outstanding_dma = max_outstanding_dma;
  return c;
}

TargetFamily family() {
  using M = MemoryArea;
  TargetFamily f;
  f.name = "ethos-u55";
  f.product = Product::EthosU55;
  constexpr int axi = 8, dma = 1;  // 64-bit AXI, one DMA in flight
  f.accelerators = {
      shram_accelerator("ethos-u55-32", 32, 1, {1, 1, 4}, {1, 1, 8}, 16, {2, 2, 2, 2, 4, 4, 4, 4}, 1,
                        {2.0, 3.0, 3.0, 3.0, 4.0, 6.0, 1.0, 2.0}, {1.0, 1.0, 0.0}, axi, dma),
      shram_accelerator("ethos-u55-64", 64, 1, {1, 1, 8}, {1, 1, 8}, 16, {2, 2, 2, 2, 4, 4, 4, 8}, 2,
                        {1.0, 1.5, 1.5, 1.5, 2.0, 3.0, 0.5, 1.0}, {1.0, 1.0, 0.0}, axi, dma),
      shram_accelerator("ethos-u55-128", 128, 1, {1, 2, 8}, {1, 2, 8}, 24, {4, 4, 4, 4, 8, 4, 8, 12}, 4,
                        {0.75, 1.25, 0.75, 0.75, 1.0, 1.5, 0.25, 0.5}, {1.0, 0.5, 0.0}, axi, dma),
      shram_accelerator("ethos-u55-256", 256, 1, {2, 2, 8}, {2, 2, 8}, 48, {8, 8, 8, 8, 16, 8, 16, 20}, 8,
                        {0.625, 1.125, 0.5, 0.375, 0.5, 0.75, 0.125, 0.25}, {1.0, 0.25, 0.0}, axi, dma),
  };
  // vela.ini: {clock_scale, burst, read latency, write latency, ports, max reads, max writes}.
  f.systems = {
      two_port_system("Ethos_U55_Deep_Embedded", 200e6, {1.0, 32, 32, 32, 1, 8, 8}, M::OffChipFlash,
                      {0.0625, 128, 64, 0, 1, 2, 0}),
      two_port_system("Ethos_U55_High_End_Embedded", 500e6, {1.0, 32, 32, 32, 1, 4, 4}, M::OffChipFlash,
                      {0.125, 128, 64, 0, 1, 2, 0}),
  };
  f.default_system = "Ethos_U55_High_End_Embedded";
  f.default_memory_mode = MemoryMode::SharedSram;
  f.id_word = 0x10066001u;  // arch 1.0.6, product major 6, status 1
  return f;
}

}  // namespace cascader::ethos_u55
