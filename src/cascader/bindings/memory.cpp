#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "cascader/bindings/bindings.hpp"
#include "cascader/common/error.hpp"
#include "cascader/memory/live_range.hpp"

namespace py = pybind11;

namespace cascader::bindings {

namespace {

using I64Array = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

std::vector<LiveRange> to_ranges(const I64Array& start, const I64Array& end, const I64Array& size) {
  if (start.ndim() != 1 || end.ndim() != 1 || size.ndim() != 1 || start.size() != end.size() ||
      start.size() != size.size()) {
    throw InvalidArgument("start, end and size must be 1-D arrays of the same length");
  }
  auto s = start.unchecked<1>();
  auto e = end.unchecked<1>();
  auto z = size.unchecked<1>();
  std::vector<LiveRange> ranges(static_cast<size_t>(start.size()));
  for (py::ssize_t i = 0; i < start.size(); ++i) ranges[static_cast<size_t>(i)] = {s(i), e(i), z(i)};
  return ranges;
}

}  // namespace

void bind_memory(py::module_& m) {
  m.def(
      "peak_live_bytes",
      [](const I64Array& start, const I64Array& end, const I64Array& size) {
        return peak_live_bytes(to_ranges(start, end, size));
      },
      py::arg("start"), py::arg("end"), py::arg("size"),
      "Maximum over time of the bytes live in half-open intervals [start, end).");
}

}  // namespace cascader::bindings
