#include <pybind11/stl.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "cascader/arch/block_traversal.hpp"
#include "cascader/bindings/bindings.hpp"
#include "cascader/common/error.hpp"
#include "cascader/sim/command_stream.hpp"
#include "cascader/sim/in_place_hazard.hpp"

namespace py = pybind11;

namespace cascader::bindings {

namespace {

// Reading back the operation dicts that decode_driver_payload returns (the inverse of its
// conversion, for the fields the block traversal and the hazard check use).
template <typename Enum, int N>
Enum enum_named(const std::string& value, const char* what) {
  for (int i = 0; i < N; ++i) {
    if (value == sim::name(static_cast<Enum>(i))) return static_cast<Enum>(i);
  }
  throw InvalidArgument(std::string("unknown ") + what + " " + value);
}

template <typename T>
T field(const py::dict& d, const char* key) {
  if (!d.contains(key)) throw InvalidArgument(std::string("operation dict has no '") + key + "'");
  return d[key].cast<T>();
}

sim::FeatureMap feature_map(const py::dict& d) {
  sim::FeatureMap f;
  f.region = field<int>(d, "region");
  const auto base = field<std::vector<uint64_t>>(d, "base");
  if (base.size() != 4) throw InvalidArgument("a feature map's 'base' needs 4 tile addresses");
  std::copy(base.begin(), base.end(), f.base.begin());
  std::tie(f.height, f.width, f.depth) = field<std::tuple<int, int, int>>(d, "shape");
  std::tie(f.height0, f.height1, f.width0) = field<std::tuple<int, int, int>>(d, "tiles");
  std::tie(f.stride_y, f.stride_x, f.stride_c) = field<std::tuple<int64_t, int64_t, int64_t>>(d, "strides");
  f.dtype = enum_named<sim::DataType, 5>(field<std::string>(d, "dtype"), "dtype");
  const auto layout = field<std::string>(d, "layout");
  if (layout != "NHWC" && layout != "NHCWB16") throw InvalidArgument("layout must be NHWC or NHCWB16, got " + layout);
  f.layout = layout == "NHWC" ? sim::Layout::NHWC : sim::Layout::NHCWB16;
  return f;
}

sim::NpuOperation operation(const py::dict& d) {
  sim::NpuOperation op;
  op.kind = enum_named<sim::OpKind, 5>(field<std::string>(d, "kind"), "operation kind");
  if (op.kind == sim::OpKind::Pool) {
    op.sub_op = static_cast<int>(enum_named<sim::PoolMode, 3>(field<std::string>(d, "sub_op"), "pooling mode"));
  }
  if (op.kind == sim::OpKind::Elementwise) {
    op.sub_op = static_cast<int>(enum_named<sim::ElementwiseMode, 10>(field<std::string>(d, "sub_op"), "elementwise mode"));
  }
  op.word_offset = d.contains("word_offset") ? d["word_offset"].cast<size_t>() : 0;
  op.ifm = feature_map(field<py::dict>(d, "ifm"));
  op.ofm = feature_map(field<py::dict>(d, "ofm"));
  if (op.has_ifm2()) {
    op.ifm2 = feature_map(field<py::dict>(d, "ifm2"));
    const py::object scalar = d.contains("ifm2_scalar") ? py::object(d["ifm2_scalar"]) : py::object(py::none());
    op.ifm2_is_scalar = !scalar.is_none();
    if (op.ifm2_is_scalar) op.ifm2_scalar = scalar.cast<int>();
    std::tie(op.broadcast_h, op.broadcast_w, op.broadcast_c) = field<std::tuple<bool, bool, bool>>(d, "broadcast");
  }
  const auto kernel = field<py::dict>(d, "kernel");
  op.kernel.height = field<int>(kernel, "height");
  op.kernel.width = field<int>(kernel, "width");
  std::tie(op.kernel.stride_y, op.kernel.stride_x) = field<std::tuple<int, int>>(kernel, "stride");
  std::tie(op.kernel.dilation_y, op.kernel.dilation_x) = field<std::tuple<int, int>>(kernel, "dilation");
  std::tie(op.padding.top, op.padding.left, op.padding.bottom, op.padding.right) =
      field<std::tuple<int, int, int, int>>(d, "padding");
  std::tie(op.block_height, op.block_width, op.block_depth) = field<std::tuple<int, int, int>>(d, "block");
  op.ifm_upscale = d.contains("ifm_upscale") ? d["ifm_upscale"].cast<int>() : 0;
  if (op.kernel.dilation_y < 1 || op.kernel.dilation_x < 1) throw InvalidArgument("dilation must be >= 1");
  return op;
}

py::tuple box(const FeatureBox& b) {
  return py::make_tuple(py::make_tuple(b.y0, b.y1), py::make_tuple(b.x0, b.x1), py::make_tuple(b.c0, b.c1));
}

}  // namespace

void bind_in_place(py::module_& m) {
  m.def(
      "block_traversal",
      [](const py::dict& op) {
        py::list out;
        for (const TraversalBlock& b : block_traversal(sim::traversal_shape(operation(op)))) {
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
        const auto h = sim::find_in_place_hazard(operation(op), ifm, ifm2);
        if (!h) return py::none();
        return py::dict(py::arg("reader") = h->reader, py::arg("writer") = h->writer,
                        py::arg("reader_ofm") = box(h->reader_ofm), py::arg("writer_ofm") = box(h->writer_ofm),
                        py::arg("operand") = h->operand, py::arg("address") = h->address,
                        py::arg("message") = h->describe());
      },
      py::arg("operation"), py::arg("ifm") = true, py::arg("ifm2") = true,
      "The first block that reads a byte an earlier block wrote, or None.");
  m.def(
      "min_in_place_shift", [](const py::dict& op) { return sim::min_in_place_shift(operation(op)); },
      py::arg("operation"), "Smallest 16 B multiple the OFM may start below its IFM with no hazard.");
}

}  // namespace cascader::bindings
