#include <pybind11/stl.h>

#include "cascader/arch/accelerator.hpp"
#include "cascader/arch/arch_config.hpp"
#include "cascader/arch/block_config.hpp"
#include "cascader/arch/system_config.hpp"
#include "cascader/arch/target_family.hpp"
#include "cascader/bindings/bindings.hpp"

namespace py = pybind11;

namespace cascader::bindings {

void bind_arch(py::module_& m) {
  py::class_<BlockShape>(m, "BlockShape")
      .def(py::init<int, int, int>(), py::arg("height"), py::arg("width"), py::arg("depth"))
      .def_readwrite("height", &BlockShape::height)
      .def_readwrite("width", &BlockShape::width)
      .def_readwrite("depth", &BlockShape::depth)
      .def("__eq__", &BlockShape::operator==)
      .def("__repr__", [](const BlockShape& b) {
        return "BlockShape(" + std::to_string(b.height) + ", " + std::to_string(b.width) + ", " +
               std::to_string(b.depth) + ")";
      });

  py::enum_<ShramElement>(m, "ShramElement")
      .value("Ifm8", ShramElement::Ifm8).value("Ifm16", ShramElement::Ifm16)
      .value("Ifm8Elementwise", ShramElement::Ifm8Elementwise).value("Ifm16Elementwise", ShramElement::Ifm16Elementwise)
      .value("Ifm32", ShramElement::Ifm32).value("Acc16", ShramElement::Acc16).value("Acc32", ShramElement::Acc32)
      .value("Acc40", ShramElement::Acc40);

  py::enum_<Product>(m, "Product")
      .value("EthosU55", Product::EthosU55).value("EthosU65", Product::EthosU65).value("EthosU85", Product::EthosU85);

  py::class_<InternalRam>(m, "InternalRam")
      .def_readonly("ifm_bytes", &InternalRam::ifm_bytes)
      .def_readonly("acc_bytes", &InternalRam::acc_bytes)
      .def_readonly("ob_bytes", &InternalRam::ob_bytes)
      .def_readonly("cb_bytes", &InternalRam::cb_bytes);

  py::class_<AcceleratorConfig>(m, "AcceleratorConfig")
      .def_readonly("name", &AcceleratorConfig::name)
      .def_readonly("product", &AcceleratorConfig::product)
      .def_readonly("is_u65", &AcceleratorConfig::is_u65)
      .def_readonly("ofm_ublocks", &AcceleratorConfig::ofm_ublocks)
      .def_readonly("internal_ram", &AcceleratorConfig::internal_ram)
      .def_readonly("weight_decoders", &AcceleratorConfig::weight_decoders)
      .def_readonly("axi_sram_ports_log2", &AcceleratorConfig::axi_sram_ports_log2)
      .def_readonly("axi_ext_ports_log2", &AcceleratorConfig::axi_ext_ports_log2)
      .def_readonly("macs_per_cycle", &AcceleratorConfig::macs_per_cycle)
      .def_readonly("cores", &AcceleratorConfig::cores)
      .def_readonly("ofm_ublock", &AcceleratorConfig::ofm_ublock)
      .def_readonly("ifm_ublock", &AcceleratorConfig::ifm_ublock)
      .def_readonly("ofm_block_max", &AcceleratorConfig::ofm_block_max)
      .def_readonly("shram_banks", &AcceleratorConfig::shram_banks)
      .def_readonly("shram_bank_bytes", &AcceleratorConfig::shram_bank_bytes)
      .def_readonly("shram_reserved_output_banks", &AcceleratorConfig::shram_reserved_output_banks)
      .def_readonly("shram_reserved_end_banks", &AcceleratorConfig::shram_reserved_end_banks)
      .def_readonly("shram_lut_banks", &AcceleratorConfig::shram_lut_banks)
      .def_readonly("shram_granules", &AcceleratorConfig::shram_granules)
      .def_readonly("elementwise_units", &AcceleratorConfig::elementwise_units)
      .def_readonly("output_cycles_per_element", &AcceleratorConfig::output_cycles_per_element)
      .def_readonly("activation_cycles_per_element", &AcceleratorConfig::activation_cycles_per_element)
      .def_readonly("axi_bytes_per_cycle", &AcceleratorConfig::axi_bytes_per_cycle)
      .def_readonly("max_outstanding_dma", &AcceleratorConfig::max_outstanding_dma)
      .def_readonly("max_outstanding_kernels", &AcceleratorConfig::max_outstanding_kernels);
  m.def("accelerator_config", &accelerator_config, py::arg("name"), py::return_value_policy::copy);
  m.def("accelerator_names", &accelerator_names);

  py::enum_<MemoryArea>(m, "MemoryArea")
      .value("Sram", MemoryArea::Sram).value("Dram", MemoryArea::Dram)
      .value("OnChipFlash", MemoryArea::OnChipFlash).value("OffChipFlash", MemoryArea::OffChipFlash);

  py::class_<MemorySpec>(m, "MemorySpec")
      .def(py::init<>())
      .def_readwrite("clock_scale", &MemorySpec::clock_scale)
      .def_readwrite("burst_length", &MemorySpec::burst_length)
      .def_readwrite("read_latency", &MemorySpec::read_latency)
      .def_readwrite("write_latency", &MemorySpec::write_latency)
      .def_readwrite("ports_used", &MemorySpec::ports_used)
      .def_readwrite("max_reads", &MemorySpec::max_reads)
      .def_readwrite("max_writes", &MemorySpec::max_writes);

  py::class_<SystemConfig>(m, "SystemConfig")
      .def(py::init<>())
      .def_readwrite("name", &SystemConfig::name)
      .def_readwrite("core_clock", &SystemConfig::core_clock)
      .def_readwrite("axi0", &SystemConfig::axi0)
      .def_readwrite("axi1", &SystemConfig::axi1)
      .def_readwrite("memories", &SystemConfig::memories);
  m.def("system_config_preset", &system_config_preset, py::arg("name"), py::return_value_policy::copy);
  m.def("system_config_preset_names", &system_config_preset_names);

  m.def(
      "target_families",
      [] {
        py::list out;
        for (const auto& f : target_families()) {
          py::list accelerators, systems;
          for (const auto& a : f.accelerators) accelerators.append(a.name);
          for (const auto& s : f.systems) systems.append(s.name);
          out.append(py::dict(py::arg("name") = f.name, py::arg("product") = f.product,
                              py::arg("accelerators") = accelerators, py::arg("systems") = systems,
                              py::arg("default_system") = f.default_system,
                              py::arg("default_memory_mode") = memory_mode_name(f.default_memory_mode),
                              py::arg("id_word") = f.id_word, py::arg("compiles") = f.compiles));
        }
        return out;
      },
      "One dict per Ethos-U product: its accelerators, system presets, Vela's defaults, the ID word\n"
      "of Vela's payloads, and whether cascader compiles for it.");

  py::enum_<MemoryMode>(m, "MemoryMode")
      .value("Sram_Only", MemoryMode::SramOnly)
      .value("Shared_Sram", MemoryMode::SharedSram)
      .value("Dedicated_Sram", MemoryMode::DedicatedSram);
  py::enum_<Region>(m, "Region")
      .value("Constants", Region::Constants).value("Arena", Region::Arena).value("FastCache", Region::FastCache);

  py::class_<ArchConfig>(m, "ArchConfig")
      .def(py::init<const AcceleratorConfig&, const SystemConfig&, MemoryMode>(), py::arg("accelerator"),
           py::arg("system"), py::arg("memory_mode"))
      .def_property_readonly("accelerator", &ArchConfig::accelerator)
      .def_property_readonly("system", &ArchConfig::system)
      .def_property_readonly("memory_mode", &ArchConfig::memory_mode)
      .def("region_memory", &ArchConfig::region_memory)
      .def("bandwidth", &ArchConfig::bandwidth);

  py::enum_<NpuBlockType>(m, "NpuBlockType")
      .value("ConvolutionMxN", NpuBlockType::ConvolutionMxN)
      .value("ConvolutionDepthWise", NpuBlockType::ConvolutionDepthWise)
      .value("VectorProduct", NpuBlockType::VectorProduct).value("Pooling", NpuBlockType::Pooling)
      .value("ElementWise", NpuBlockType::ElementWise).value("ReduceSum", NpuBlockType::ReduceSum);
  py::enum_<Traversal>(m, "Traversal")
      .value("Auto", Traversal::Auto).value("DepthFirst", Traversal::DepthFirst)
      .value("PartKernelFirst", Traversal::PartKernelFirst);

  py::class_<ShramLayout>(m, "ShramLayout")
      .def_readonly("ifm_start", &ShramLayout::ifm_start)
      .def_readonly("ifm_end", &ShramLayout::ifm_end)
      .def_readonly("ifm2_start", &ShramLayout::ifm2_start)
      .def_readonly("acc_start", &ShramLayout::acc_start)
      .def_readonly("lut_start", &ShramLayout::lut_start);
  py::class_<BlockConfig>(m, "BlockConfig")
      .def(py::init<>())
      .def_readwrite("ofm_block", &BlockConfig::ofm_block)
      .def_readwrite("ifm_block", &BlockConfig::ifm_block)
      .def_readwrite("accumulator", &BlockConfig::accumulator)
      .def_readwrite("part_kernel_first", &BlockConfig::part_kernel_first)
      .def_readonly("layout", &BlockConfig::layout);
  py::class_<BlockQuery>(m, "BlockQuery");
  m.def("try_block_config", &try_block_config, py::arg("accelerator"), py::arg("query"), py::arg("ofm_block"));
  m.def("enumerate_block_configs", &enumerate_block_configs, py::arg("accelerator"), py::arg("query"));
  m.def("choose_block_config", &choose_block_config, py::arg("accelerator"), py::arg("query"));
}

}  // namespace cascader::bindings
