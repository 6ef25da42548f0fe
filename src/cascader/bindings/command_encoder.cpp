#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <vector>

#include "cascader/bindings/bindings.hpp"
#include "cascader/bindings/operation_dict.hpp"
#include "cascader/emit/command_encoder.hpp"

namespace py = pybind11;

namespace cascader::bindings {

void bind_command_encoder(py::module_& m) {
  m.def(
      "encode_command_stream",
      [](const py::list& operations, const ArchConfig& arch) {
        std::vector<sim::NpuOperation> ops;
        ops.reserve(operations.size());
        for (const py::handle& op : operations) ops.push_back(operation_from_dict(op.cast<py::dict>()));
        const std::vector<uint32_t> words = emit::encode_command_stream(ops, arch);
        return py::array_t<uint32_t>(static_cast<py::ssize_t>(words.size()), words.data());
      },
      py::arg("operations"), py::arg("arch"),
      "Register command words (ending in STOP) for operation dicts in cascader.sim.decode's format.");
}

}  // namespace cascader::bindings
