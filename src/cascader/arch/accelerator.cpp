#include "cascader/arch/accelerator.hpp"

#include "cascader/arch/target_family.hpp"
#include "cascader/common/error.hpp"

namespace cascader {

const AcceleratorConfig& accelerator_config(const std::string& name) {
  for (const auto& f : target_families()) {
    for (const auto& c : f.accelerators) {
      if (c.name == name) return c;
    }
  }
  std::string valid;
  for (const auto& n : accelerator_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw InvalidArgument("unknown accelerator '" + name + "'; valid names are: " + valid);
}

void require_shram(const AcceleratorConfig& arch) {
  if (arch.shram_banks <= 0) {
    throw InvalidArgument("the accelerator " + arch.name + " has no SHRAM: its block configs and cycle formulas are not modelled yet "
                          "(cascader decodes its binaries only)");
  }
}

std::vector<std::string> accelerator_names() {
  std::vector<std::string> names;
  for (const auto& f : target_families()) {
    for (const auto& c : f.accelerators) names.push_back(c.name);
  }
  return names;
}

}  // namespace cascader
