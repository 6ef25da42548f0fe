#include "cascader/arch/system_config.hpp"

#include "cascader/arch/target_family.hpp"
#include "cascader/common/error.hpp"

namespace cascader {

const char* memory_area_name(MemoryArea m) {
  switch (m) {
    case MemoryArea::Sram: return "Sram";
    case MemoryArea::Dram: return "Dram";
    case MemoryArea::OnChipFlash: return "OnChipFlash";
    case MemoryArea::OffChipFlash: return "OffChipFlash";
  }
  return "?";
}

SystemConfig two_port_system(const char* name, double core_clock, MemorySpec sram, MemoryArea axi1, MemorySpec slow) {
  SystemConfig s;
  s.name = name;
  s.core_clock = core_clock;
  s.axi0 = MemoryArea::Sram;
  s.axi1 = axi1;
  s.memory(MemoryArea::Sram) = sram;
  s.memory(axi1) = slow;
  return s;
}

namespace {

std::vector<const SystemConfig*> presets() {
  std::vector<const SystemConfig*> all;
  for (const auto& f : target_families()) {
    for (const auto& s : f.systems) all.push_back(&s);
  }
  return all;
}

}  // namespace

const SystemConfig& system_config_preset(const std::string& name) {
  for (const SystemConfig* s : presets()) {
    if (s->name == name) return *s;
  }
  std::string valid;
  for (const SystemConfig* s : presets()) valid += (valid.empty() ? "" : ", ") + s->name;
  throw InvalidArgument("unknown system config '" + name + "'; presets are: " + valid +
                        " (or read your own with SystemConfig.from_ini)");
}

std::vector<std::string> system_config_preset_names() {
  std::vector<std::string> names;
  for (const SystemConfig* s : presets()) names.push_back(s->name);
  return names;
}

}  // namespace cascader
