#include <pybind11/stl.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "cascader/arch/block_traversal.hpp"
#include "cascader/bindings/bindings.hpp"
#include "cascader/bindings/operation_dict.hpp"
#include "cascader/common/error.hpp"
#include "cascader/sim/command_stream.hpp"
#include "cascader/sim/in_place_hazard.hpp"

namespace py = pybind11;

namespace cascader::bindings {

namespace {

py::tuple box(const FeatureBox& b) {
  return py::make_tuple(py::make_tuple(b.y0, b.y1), py::make_tuple(b.x0, b.x1), py::make_tuple(b.c0, b.c1));
}

}  // namespace

void bind_in_place(py::module_& m) {
  m.def(
      "block_traversal",
      [](const py::dict& op) {
        py::list out;
        for (const TraversalBlock& b : block_traversal(sim::traversal_shape(operation_from_dict(op)))) {
          out.append(py::make_tuple(box(b.ofm), box(b.ifm), box(b.ifm2)));
        }
        return out;
      },
      py::arg("operation"),
      "The NPU's OFM block order for a decoded operation dict: (ofm, ifm, ifm2) boxes, each\n"
      "((y0, y1), (x0, x1), (c0, c1)) half-open.");
  m.def(
      "find_in_place_hazard",
      [](const py::dict& op, bool ifm, bool ifm2) -> py::object {
        const auto h = sim::find_in_place_hazard(operation_from_dict(op), ifm, ifm2);
        if (!h) return py::none();
        return py::dict(py::arg("reader") = h->reader, py::arg("writer") = h->writer,
                        py::arg("reader_ofm") = box(h->reader_ofm), py::arg("writer_ofm") = box(h->writer_ofm),
                        py::arg("operand") = h->operand, py::arg("address") = h->address,
                        py::arg("message") = h->describe());
      },
      py::arg("operation"), py::arg("ifm") = true, py::arg("ifm2") = true,
      "The first block that reads a byte an earlier block wrote, or None.");
  m.def(
      "min_in_place_shift",
      [](const py::dict& op, uint64_t budget) {
        const auto s = sim::min_in_place_shift(operation_from_dict(op), budget);
        return py::make_tuple(s.shift, s.exact);
      },
      py::arg("operation"), py::arg("budget") = uint64_t{1} << 23,
      "(shift, exact): the smallest 16 B multiple the OFM may start below its IFM with no hazard,\n"
      "or, when the search exceeds `budget` run visits, the trailing bound (exact False).");
}

}  // namespace cascader::bindings
