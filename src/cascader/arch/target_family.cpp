#include "cascader/arch/target_family.hpp"

#include "cascader/arch/ethos_u55/ethos_u55.hpp"
#include "cascader/arch/ethos_u65/ethos_u65.hpp"
#include "cascader/arch/ethos_u85/ethos_u85.hpp"
#include "cascader/common/error.hpp"

namespace cascader {

const std::vector<TargetFamily>& target_families() {
  static const std::vector<TargetFamily> families = [] {
    std::vector<TargetFamily> v = {ethos_u55::family(), ethos_u65::family(), ethos_u85::family()};
    int id = 0;
    for (auto& f : v) {
      for (auto& a : f.accelerators) {
        a.id = id++;
        a.product = f.product;
        a.is_u65 = f.product == Product::EthosU65;
      }
    }
    return v;
  }();
  return families;
}

const TargetFamily& target_family(Product product) {
  for (const auto& f : target_families()) {
    if (f.product == product) return f;
  }
  throw InvalidArgument("no target family for product " + std::to_string(static_cast<int>(product)));
}

}  // namespace cascader
