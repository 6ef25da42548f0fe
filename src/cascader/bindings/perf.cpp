#include <pybind11/stl.h>

#include "cascader/bindings/bindings.hpp"
#include "cascader/perf/cycle_model.hpp"
#include "cascader/perf/eviction_shares.hpp"
#include "cascader/perf/npu_op.hpp"

namespace py = pybind11;

namespace cascader::bindings {

void bind_perf(py::module_& m) {
  py::class_<Shape4>(m, "Shape4")
      .def(py::init<int, int, int, int>(), py::arg("n"), py::arg("h"), py::arg("w"), py::arg("c"))
      .def_readwrite("n", &Shape4::n).def_readwrite("h", &Shape4::h)
      .def_readwrite("w", &Shape4::w).def_readwrite("c", &Shape4::c);
  py::class_<Kernel>(m, "Kernel")
      .def(py::init<>())
      .def_readwrite("height", &Kernel::height).def_readwrite("width", &Kernel::width)
      .def_readwrite("stride_y", &Kernel::stride_y).def_readwrite("stride_x", &Kernel::stride_x)
      .def_readwrite("dilation_y", &Kernel::dilation_y).def_readwrite("dilation_x", &Kernel::dilation_x);
  py::class_<Padding>(m, "Padding")
      .def(py::init<>())
      .def_readwrite("top", &Padding::top).def_readwrite("left", &Padding::left)
      .def_readwrite("bottom", &Padding::bottom).def_readwrite("right", &Padding::right);

  py::enum_<NpuOpType>(m, "NpuOpType")
      .value("Conv2D", NpuOpType::Conv2D).value("DepthwiseConv2D", NpuOpType::DepthwiseConv2D)
      .value("MaxPool", NpuOpType::MaxPool).value("AvgPool", NpuOpType::AvgPool)
      .value("Add", NpuOpType::Add).value("Sub", NpuOpType::Sub).value("Mul", NpuOpType::Mul)
      .value("Minimum", NpuOpType::Minimum).value("Maximum", NpuOpType::Maximum)
      .value("FullyConnected", NpuOpType::FullyConnected).value("Dma", NpuOpType::Dma)
      .value("ReduceSum", NpuOpType::ReduceSum);
  py::enum_<TensorFormat>(m, "TensorFormat")
      .value("NHWC", TensorFormat::NHWC).value("NHCWB16", TensorFormat::NHCWB16);
  py::enum_<Transpose>(m, "Transpose")
      .value("None_", Transpose::None).value("NWHC", Transpose::NWHC).value("NHCW", Transpose::NHCW)
      .value("NCWH", Transpose::NCWH);
  py::enum_<Activation>(m, "Activation")
      .value("None_", Activation::None).value("Relu", Activation::Relu).value("Lut", Activation::Lut);

  py::class_<FeatureMap>(m, "FeatureMap")
      .def(py::init<>())
      .def_readwrite("shape", &FeatureMap::shape).def_readwrite("format", &FeatureMap::format)
      .def_readwrite("bits", &FeatureMap::bits).def_readwrite("memory", &FeatureMap::memory);

  py::class_<NpuOp>(m, "NpuOp")
      .def(py::init<>())
      .def(py::init<const NpuOp&>(), py::arg("other"), "A copy of `other`.")
      .def_readwrite("type", &NpuOp::type)
      .def_readwrite("ifm", &NpuOp::ifm)
      .def_readwrite("ifm2", &NpuOp::ifm2)
      .def_readwrite("ofm", &NpuOp::ofm)
      .def_readwrite("kernel", &NpuOp::kernel)
      .def_readwrite("padding", &NpuOp::padding)
      .def_readwrite("weight_bytes", &NpuOp::weight_bytes)
      .def_readwrite("scale_bytes", &NpuOp::scale_bytes)
      .def_readwrite("weight_memory", &NpuOp::weight_memory)
      .def_readwrite("weight_buffer_memory", &NpuOp::weight_buffer_memory)
      .def_readwrite("weight_first_dma_bytes", &NpuOp::weight_first_dma_bytes)
      .def_readwrite("weight_last_slice_depth", &NpuOp::weight_last_slice_depth)
      .def_readwrite("dma_slack_cycles", &NpuOp::dma_slack_cycles)
      .def_readwrite("activation", &NpuOp::activation)
      .def_readwrite("lut_bytes", &NpuOp::lut_bytes)
      .def_readwrite("lut_memory", &NpuOp::lut_memory)
      .def_readwrite("rescaled", &NpuOp::rescaled)
      .def_readwrite("block_config", &NpuOp::block_config)
      .def_readwrite("traversal", &NpuOp::traversal)
      .def_readwrite("block_depth", &NpuOp::block_depth)
      .def_readwrite("whole_ofm", &NpuOp::whole_ofm)
      .def_readwrite("dma_bytes", &NpuOp::dma_bytes)
      .def_readwrite("ifm_upscale", &NpuOp::ifm_upscale)
      .def_readwrite("ofm_step", &NpuOp::ofm_step)
      .def_readwrite("transpose", &NpuOp::transpose)
      .def_readwrite("scalar_first", &NpuOp::scalar_first);

  py::class_<CostRecord>(m, "CostRecord")
      .def_readonly("npu_cycles", &CostRecord::npu_cycles)
      .def_readonly("dma_cycles", &CostRecord::dma_cycles)
      .def_readonly("access_cycles", &CostRecord::access_cycles)
      .def_readonly("read_bytes", &CostRecord::read_bytes)
      .def_readonly("write_bytes", &CostRecord::write_bytes)
      .def_readonly("macs", &CostRecord::macs)
      .def_readonly("total_cycles", &CostRecord::total_cycles)
      .def_readonly("buffering_slack_cycles", &CostRecord::buffering_slack_cycles)
      .def_readonly("block_config", &CostRecord::block_config)
      // Every field in one call, for the conversion a compile runs thousands of times: each
      // attribute read above builds a Python object (the block's nested structs too), and
      // those reads were most of the conversion's time.
      .def("fields", [](const CostRecord& r) {
        const BlockConfig& b = r.block_config;
        return py::make_tuple(r.total_cycles, r.npu_cycles, r.dma_cycles, r.access_cycles, r.read_bytes, r.write_bytes,
                              r.macs, py::make_tuple(b.ofm_block.height, b.ofm_block.width, b.ofm_block.depth),
                              py::make_tuple(b.ifm_block.height, b.ifm_block.width, b.ifm_block.depth),
                              b.part_kernel_first, static_cast<int>(b.accumulator), r.buffering_slack_cycles);
      }, "(total_cycles, npu_cycles, dma_cycles, access_cycles, read_bytes, write_bytes, macs, ofm block, "
         "ifm block, part_kernel_first, accumulator (ShramElement value), buffering_slack_cycles)");

  m.def("block_query", &block_query, py::arg("op"));
  m.def("access_cycles_per_byte", &access_cycles_per_byte, py::arg("arch"), py::arg("memory"));
  m.def("estimate", py::overload_cast<const NpuOp&, const ArchConfig&>(&estimate), py::arg("op"), py::arg("arch"),
        "Cost of one NPU op (block config chosen and cached when the op does not fix one).");
  m.def(
      "fastest_block_config",
      [](const NpuOp& op, const ArchConfig& arch) {
        thread_local BlockConfigCache cache;
        return fastest_block_config(op, arch, cache);
      },
      py::arg("op"), py::arg("arch"),
      "The block config the cycle model costs the op least with (its own, or the shape-only choice, on ties).");
  m.def("eviction_shares", &eviction_shares, py::arg("op"), py::arg("arch"), py::arg("home"), py::arg("slow"),
        py::arg("base_cycles"),
        "(ifm, ifm2, ofm): each operand's Shapley share of the cycles the op gains with its operands in "
        "`home` moved to `slow`, measured from `base_cycles`; None for an operand absent or elsewhere.");
}

}  // namespace cascader::bindings
