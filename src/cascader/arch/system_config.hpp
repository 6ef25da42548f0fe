// System configurations: the core clock and the characteristics of each memory the NPU reaches
// over AXI. The presets carry the values of Vela's vela.ini (so that our figures and Vela's
// describe the same system) and come from each product's folder (arch/ethos_u55, ...);
// user-defined ones are built field by field or read from a Vela .ini in Python
// (cascader.arch.SystemConfig.from_ini).
#pragma once

#include <array>
#include <string>
#include <vector>

namespace cascader {

// The memories a system may have. Index into SystemConfig::memories.
enum class MemoryArea { Sram = 0, Dram, OnChipFlash, OffChipFlash };
constexpr int kMemoryAreaCount = 4;
const char* memory_area_name(MemoryArea m);

struct MemorySpec {
  double clock_scale = 1.0;  // memory clock / core clock
  int burst_length = 1;      // bytes per burst
  int read_latency = 0;      // core cycles
  int write_latency = 0;
  int ports_used = 1;
  int max_reads = 1;         // outstanding transactions (the Ethos-U85 model's channel limits)
  int max_writes = 1;
};

struct SystemConfig {
  std::string name;
  double core_clock = 500e6;  // Hz
  MemoryArea axi0 = MemoryArea::Sram;
  MemoryArea axi1 = MemoryArea::OffChipFlash;
  std::array<MemorySpec, kMemoryAreaCount> memories{};

  const MemorySpec& memory(MemoryArea m) const { return memories[static_cast<int>(m)]; }
  MemorySpec& memory(MemoryArea m) { return memories[static_cast<int>(m)]; }
};

// A preset's shape: SRAM on AXI0 and one slower memory on AXI1.
SystemConfig two_port_system(const char* name, double core_clock, MemorySpec sram, MemoryArea axi1, MemorySpec slow);

// Throws InvalidArgument naming the presets if `name` is unknown.
const SystemConfig& system_config_preset(const std::string& name);
std::vector<std::string> system_config_preset_names();

}  // namespace cascader
