// Target families: one per Ethos-U product (U55, U65, U85). A family is what a product's folder
// (arch/ethos_u55, arch/ethos_u65, arch/ethos_u85) contributes: its accelerator sizes, the
// system presets Vela's vela.ini ships for it, Vela's default system and memory mode, the ID
// register value Vela writes into its driver payloads, and whether cascader emits binaries for
// it yet. Adding a product is one more folder and one line in target_family.cpp. O(1) lookup.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cascader/arch/accelerator.hpp"
#include "cascader/arch/arch_config.hpp"
#include "cascader/arch/system_config.hpp"

namespace cascader {

struct TargetFamily {
  std::string name;                      // "ethos-u85", the prefix of its accelerator names
  Product product = Product::EthosU55;
  std::vector<AcceleratorConfig> accelerators;
  std::vector<SystemConfig> systems;     // vela.ini's System_Config presets for the product
  std::string default_system;            // what Vela takes when given neither system nor mode
  MemoryMode default_memory_mode = MemoryMode::SharedSram;
  uint32_t id_word = 0;                  // the ID register value of Vela 5.2's payloads
  bool compiles = true;                  // cascader's emitter targets it (the U85: not yet)
};

// The families in product order; each accelerator's `id` is its index over all of them.
const std::vector<TargetFamily>& target_families();
// Throws InvalidArgument for a product no family describes.
const TargetFamily& target_family(Product product);

}  // namespace cascader
