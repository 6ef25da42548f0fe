#include "cascader/arch/accelerator.hpp"

#include "cascader/common/error.hpp"

namespace cascader {

namespace {

AcceleratorConfig make(const char* name, bool u65, int macs, int cores, BlockShape ofm_ublock,
                       BlockShape ifm_ublock, int banks, std::array<int, 8> granules, int ew_units,
                       std::array<double, 8> out, std::array<double, 3> act) {
  AcceleratorConfig c;
  c.name = name;
  c.is_u65 = u65;
  c.macs_per_cycle = macs;
  c.cores = cores;
  c.ofm_ublock = ofm_ublock;
  c.ifm_ublock = ifm_ublock;
  c.shram_banks = banks;
  // Configurations with more than 16 banks keep the top two free, which is where the LUT lives.
  c.shram_reserved_end_banks = banks > 16 ? 2 : 0;
  c.shram_granules = granules;
  c.elementwise_units = ew_units;
  c.output_cycles_per_element = out;
  c.activation_cycles_per_element = act;
  c.axi_bytes_per_cycle = u65 ? 16 : 8;
  c.max_outstanding_dma = u65 ? 2 : 1;
  return c;
}

const std::vector<AcceleratorConfig>& all() {
  static const std::vector<AcceleratorConfig> configs = [] {
    std::vector<AcceleratorConfig> v = {
      make("ethos-u55-32", false, 32, 1, {1, 1, 4}, {1, 1, 8}, 16, {2, 2, 2, 2, 4, 4, 4, 4}, 1,
           {2.0, 3.0, 3.0, 3.0, 4.0, 6.0, 1.0, 2.0}, {1.0, 1.0, 0.0}),
      make("ethos-u55-64", false, 64, 1, {1, 1, 8}, {1, 1, 8}, 16, {2, 2, 2, 2, 4, 4, 4, 8}, 2,
           {1.0, 1.5, 1.5, 1.5, 2.0, 3.0, 0.5, 1.0}, {1.0, 1.0, 0.0}),
      make("ethos-u55-128", false, 128, 1, {1, 2, 8}, {1, 2, 8}, 24, {4, 4, 4, 4, 8, 4, 8, 12}, 4,
           {0.75, 1.25, 0.75, 0.75, 1.0, 1.5, 0.25, 0.5}, {1.0, 0.5, 0.0}),
      make("ethos-u55-256", false, 256, 1, {2, 2, 8}, {2, 2, 8}, 48, {8, 8, 8, 8, 16, 8, 16, 20}, 8,
           {0.625, 1.125, 0.5, 0.375, 0.5, 0.75, 0.125, 0.25}, {1.0, 0.25, 0.0}),
      make("ethos-u65-256", true, 256, 1, {2, 2, 8}, {2, 2, 8}, 48, {8, 8, 8, 8, 16, 8, 16, 20}, 8,
           {0.625, 1.125, 0.5, 0.375, 0.5, 0.75, 0.125, 0.25}, {1.0, 0.25, 0.0}),
      // Dual core: each core has the U65-256 array; the model divides DPU work by the cores.
      make("ethos-u65-512", true, 256, 2, {2, 2, 8}, {2, 2, 8}, 48, {8, 8, 8, 8, 16, 8, 16, 20}, 8,
           {0.3125, 0.5625, 0.25, 0.1875, 0.25, 0.375, 0.0625, 0.125}, {0.5, 0.125, 0.0}),
    };
    for (size_t i = 0; i < v.size(); ++i) v[i].id = int(i);
    return v;
  }();
  return configs;
}

}  // namespace

const AcceleratorConfig& accelerator_config(const std::string& name) {
  for (const auto& c : all()) {
    if (c.name == name) return c;
  }
  std::string valid;
  for (const auto& c : all()) valid += (valid.empty() ? "" : ", ") + c.name;
  throw InvalidArgument("unknown accelerator '" + name + "'; valid names are: " + valid);
}

std::vector<std::string> accelerator_names() {
  std::vector<std::string> names;
  for (const auto& c : all()) names.push_back(c.name);
  return names;
}

}  // namespace cascader
