// Ethos-U65: the Ethos-U55's SHRAM design with a 128-bit AXI interface, two DMAs in flight, and
// a dual-core 512-MAC size; it shares the U55's register map (arch/npu_registers.hpp). Its
// accelerator sizes and vela.ini's U65 systems.
#pragma once

#include "cascader/arch/target_family.hpp"

namespace cascader::ethos_u65 {

TargetFamily family();

}  // namespace cascader::ethos_u65
