// Ethos-U55: the SHRAM-based NPU with a 64-bit AXI interface, 32 to 256 MACs per cycle. Its
// accelerator sizes and vela.ini's U55 systems; the register map is arch/npu_registers.hpp,
// which the Ethos-U65 shares.
#pragma once

#include <array>

#include "cascader/arch/target_family.hpp"

namespace cascader::ethos_u55 {

// A SHRAM-based accelerator (U55 or U65): MAC array, micro-blocks, SHRAM banks and granules per
// ShramElement, elementwise units, output and activation cycles per element (OutputKind and
// ActivationKind order).
AcceleratorConfig shram_accelerator(const char* name, int macs, int cores, BlockShape ofm_ublock, BlockShape ifm_ublock,
                                    int banks, std::array<int, 8> granules, int elementwise_units,
                                    std::array<double, 8> output_cycles, std::array<double, 3> activation_cycles,
                                    int axi_bytes_per_cycle, int max_outstanding_dma);

TargetFamily family();

}  // namespace cascader::ethos_u55
