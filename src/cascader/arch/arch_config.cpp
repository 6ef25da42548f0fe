#include "cascader/arch/arch_config.hpp"

#include "cascader/common/error.hpp"

namespace cascader {

const char* memory_mode_name(MemoryMode m) {
  switch (m) {
    case MemoryMode::SramOnly: return "Sram_Only";
    case MemoryMode::SharedSram: return "Shared_Sram";
    case MemoryMode::DedicatedSram: return "Dedicated_Sram";
  }
  return "?";
}

ArchConfig::ArchConfig(const AcceleratorConfig& accelerator, const SystemConfig& system, MemoryMode mode)
    : accel_(accelerator), system_(system), mode_(mode) {
  if (system_.core_clock <= 0) throw InvalidArgument("system config '" + system_.name + "': core_clock must be > 0");
  if (system_.axi0 == system_.axi1 && mode != MemoryMode::SramOnly) {
    throw InvalidArgument("system config '" + system_.name + "' puts the same memory on both AXI ports; only "
                          "memory mode Sram_Only can use it");
  }
  // Ports used by each region, per mode: {constants, arena, fast cache}.
  std::array<int, 3> port{};
  switch (mode) {
    case MemoryMode::SramOnly: port = {0, 0, 0}; break;
    case MemoryMode::SharedSram: port = {1, 0, 0}; break;
    case MemoryMode::DedicatedSram: port = {1, 1, 0}; break;
  }
  std::array<MemoryArea, 2> axi = {system_.axi0, system_.axi1};
  for (int r = 0; r < 3; ++r) region_memory_[r] = axi[port[r]];

  if (region_memory_[1] != MemoryArea::Sram && region_memory_[1] != MemoryArea::Dram) {
    // Dedicated_Sram on a system without DRAM (Ethos_U65_Embedded: AXI1 is the flash).
    throw InvalidArgument(std::string("memory mode ") + memory_mode_name(mode) + " puts the arena in " +
                          memory_area_name(region_memory_[1]) + " on system config '" + system_.name +
                          "'; the arena must be Sram or Dram: use memory mode Shared_Sram or Sram_Only with it");
  }
  if (region_memory_[2] != MemoryArea::Sram) {
    throw InvalidArgument(std::string("memory mode ") + memory_mode_name(mode) + " puts the fast cache in " +
                          memory_area_name(region_memory_[2]) + "; AXI0 must be Sram");
  }
  for (int m = 0; m < kMemoryAreaCount; ++m) {
    const MemorySpec& s = system_.memories[m];
    if (s.clock_scale <= 0 || s.burst_length <= 0 || s.ports_used <= 0 || s.read_latency < 0 ||
        s.write_latency < 0) {
      throw InvalidArgument("system config '" + system_.name + "': memory " +
                            memory_area_name(static_cast<MemoryArea>(m)) +
                            " needs clock_scale, burst_length and ports_used > 0 and latencies >= 0");
    }
    bandwidth_[m] = accel_.axi_bytes_per_cycle * s.ports_used * s.clock_scale;
  }
}

}  // namespace cascader
