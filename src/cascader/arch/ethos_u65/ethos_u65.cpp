#include "cascader/arch/ethos_u65/ethos_u65.hpp"

#include "cascader/arch/ethos_u55/ethos_u55.hpp"

namespace cascader::ethos_u65 {

TargetFamily family() {
  using M = MemoryArea;
  using ethos_u55::shram_accelerator;
  TargetFamily f;
  f.name = "ethos-u65";
  f.product = Product::EthosU65;
  constexpr int axi = 16, dma = 2;  // 128-bit AXI, two DMAs in flight
  f.accelerators = {
      shram_accelerator("ethos-u65-256", 256, 1, {2, 2, 8}, {2, 2, 8}, 48, {8, 8, 8, 8, 16, 8, 16, 20}, 8,
                        {0.625, 1.125, 0.5, 0.375, 0.5, 0.75, 0.125, 0.25}, {1.0, 0.25, 0.0}, axi, dma),
      // Dual core: each core has the U65-256 array; the model divides DPU work by the cores.
      shram_accelerator("ethos-u65-512", 256, 2, {2, 2, 8}, {2, 2, 8}, 48, {8, 8, 8, 8, 16, 8, 16, 20}, 8,
                        {0.3125, 0.5625, 0.25, 0.1875, 0.25, 0.375, 0.0625, 0.125}, {0.5, 0.125, 0.0}, axi, dma),
  };
  // vela.ini: {clock_scale, burst, read latency, write latency, ports, max reads, max writes}.
  f.systems = {
      two_port_system("Ethos_U65_Embedded", 500e6, {1.0, 32, 32, 32, 1, 8, 8}, M::OffChipFlash,
                      {0.0625, 128, 64, 0, 1, 2, 0}),
      two_port_system("Ethos_U65_Mid_End", 500e6, {1.0, 32, 32, 32, 1, 8, 8}, M::Dram,
                      {0.46875, 128, 500, 250, 1, 12, 6}),
      two_port_system("Ethos_U65_High_End", 1e9, {1.0, 32, 32, 32, 1, 16, 16}, M::Dram,
                      {0.234375, 128, 500, 250, 1, 24, 12}),
      two_port_system("Ethos_U65_Client_Server", 1e9, {1.0, 32, 32, 32, 1, 16, 16}, M::Dram,
                      {0.75, 128, 500, 250, 1, 24, 12}),
  };
  f.default_system = "Ethos_U65_Client_Server";
  f.default_memory_mode = MemoryMode::DedicatedSram;
  f.id_word = 0x10066001u;  // Vela 5.2 writes the U55's ID word for the U65 too
  return f;
}

}  // namespace cascader::ethos_u65
