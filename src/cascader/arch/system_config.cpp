#include "cascader/arch/system_config.hpp"

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

namespace {

SystemConfig make(const char* name, double clock, MemoryArea axi1, MemorySpec slow) {
  SystemConfig s;
  s.name = name;
  s.core_clock = clock;
  s.axi0 = MemoryArea::Sram;
  s.axi1 = axi1;
  s.memory(MemoryArea::Sram) = MemorySpec{1.0, 32, 32, 32, 1};
  s.memory(axi1) = slow;
  return s;
}

const std::vector<SystemConfig>& presets() {
  using M = MemoryArea;
  static const std::vector<SystemConfig> all = {
      make("Ethos_U55_Deep_Embedded", 200e6, M::OffChipFlash, {0.0625, 128, 64, 0, 1}),
      make("Ethos_U55_High_End_Embedded", 500e6, M::OffChipFlash, {0.125, 128, 64, 0, 1}),
      make("Ethos_U65_Embedded", 500e6, M::OffChipFlash, {0.0625, 128, 64, 0, 1}),
      make("Ethos_U65_Mid_End", 500e6, M::Dram, {0.46875, 128, 500, 250, 1}),
      make("Ethos_U65_High_End", 1e9, M::Dram, {0.234375, 128, 500, 250, 1}),
      make("Ethos_U65_Client_Server", 1e9, M::Dram, {0.75, 128, 500, 250, 1}),
  };
  return all;
}

}  // namespace

const SystemConfig& system_config_preset(const std::string& name) {
  for (const auto& s : presets()) {
    if (s.name == name) return s;
  }
  std::string valid;
  for (const auto& s : presets()) valid += (valid.empty() ? "" : ", ") + s.name;
  throw InvalidArgument("unknown system config '" + name + "'; presets are: " + valid +
                        " (or read your own with SystemConfig.from_ini)");
}

std::vector<std::string> system_config_preset_names() {
  std::vector<std::string> names;
  for (const auto& s : presets()) names.push_back(s.name);
  return names;
}

}  // namespace cascader
