#include <pybind11/stl.h>

#include "cascader/bindings/bindings.hpp"
#include "cascader/sim/command_stream.hpp"
#include "cascader/sim/driver_payload.hpp"
#include "cascader/sim/estimator.hpp"

namespace py = pybind11;

namespace cascader::bindings {

void bind_estimator(py::module_& m) {
  m.def(
      "estimate_driver_payload",
      [](const py::bytes& payload, const ArchConfig& arch, bool merge_as_vela, bool operations) {
        const std::string_view s = payload;
        const sim::DriverPayload p = sim::parse_driver_payload(reinterpret_cast<const uint8_t*>(s.data()), s.size());
        const sim::CommandStream cs = sim::decode_command_stream(p.command_stream.data(), p.command_stream.size(), static_cast<Product>(p.config.product));
        BlockConfigCache cache;
        const sim::StreamEstimate e = sim::estimate_stream(cs, arch, cache, merge_as_vela);
        py::list rows;
        for (size_t k = 0; operations && k < e.operations.size(); ++k) {
          const sim::OperationEstimate& r = e.operations[k];
          rows.append(py::dict(py::arg("operation") = r.operation,
                               py::arg("word_offset") = cs.operations[r.operation].word_offset,
                               py::arg("merged") = r.merged, py::arg("op") = r.op, py::arg("cost") = r.cost,
                               py::arg("dmas") = r.dmas,
                               py::arg("block_config_from_binary") = r.block_config_from_binary,
                               py::arg("matmul_columns") = r.matmul_columns, py::arg("matmul_sum") = r.matmul_sum));
        }
        return py::dict(py::arg("operations") = rows, py::arg("total_cycles") = e.total_cycles,
                        py::arg("read_bytes") = e.read_bytes, py::arg("write_bytes") = e.write_bytes);
      },
      py::arg("payload"), py::arg("arch"), py::arg("merge_as_vela") = true, py::arg("operations") = true,
      "Cycle estimate of a COP1 driver payload on a target: one row per costed operation\n"
      "(decoded index, NpuOp, CostRecord, folded DMAs), total cycles and bytes per memory.\n"
      "merge_as_vela: cost an operator run as several operations (cascade stripes, 1x1 pieces) once, as Vela does.\n"
      "operations: false leaves the rows out (an empty list) when only the totals are wanted.");
}

}  // namespace cascader::bindings
