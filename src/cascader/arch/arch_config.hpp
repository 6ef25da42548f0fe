// The complete target the cost model sees: an accelerator, a system config and a memory mode.
// The memory mode maps the three regions (constants, arena, fast cache) onto the AXI ports, and
// through the system config onto memories. Construction resolves everything the cycle model
// reads per op (bandwidths, latencies, bursts), so estimates do no lookups by name. O(1).
#pragma once

#include <array>
#include <string>

#include "cascader/arch/accelerator.hpp"
#include "cascader/arch/system_config.hpp"

namespace cascader {

// Sram_Only: everything in SRAM on AXI0 (constants share SRAM's bandwidth). Shared_Sram: constants on AXI1, arena and cache in SRAM on AXI0.
// Dedicated_Sram: constants and arena on AXI1 (e.g. DRAM), SRAM on AXI0 only as a fast cache.
enum class MemoryMode { SramOnly = 0, SharedSram, DedicatedSram };
const char* memory_mode_name(MemoryMode m);

enum class Region { Constants = 0, Arena, FastCache };

enum class Direction { Read = 0, Write };

class ArchConfig {
 public:
  // Throws InvalidArgument when the mode cannot be realised on the system (e.g. constants on a
  // port whose memory is SRAM in a mode that needs a separate constant memory).
  ArchConfig(const AcceleratorConfig& accelerator, const SystemConfig& system, MemoryMode mode);

  const AcceleratorConfig& accelerator() const { return accel_; }
  const SystemConfig& system() const { return system_; }
  MemoryMode memory_mode() const { return mode_; }

  MemoryArea region_memory(Region r) const { return region_memory_[static_cast<int>(r)]; }
  double bandwidth(MemoryArea m) const { return bandwidth_[static_cast<int>(m)]; }  // bytes/cycle
  int burst_length(MemoryArea m) const { return system_.memory(m).burst_length; }
  int latency(MemoryArea m, Direction d) const {
    const MemorySpec& s = system_.memory(m);
    return d == Direction::Read ? s.read_latency : s.write_latency;
  }

 private:
  AcceleratorConfig accel_;
  SystemConfig system_;
  MemoryMode mode_;
  std::array<MemoryArea, 3> region_memory_{};
  std::array<double, kMemoryAreaCount> bandwidth_{};
};

}  // namespace cascader
