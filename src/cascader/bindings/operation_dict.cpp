#include "cascader/bindings/operation_dict.hpp"

#include <pybind11/stl.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cascader/common/error.hpp"

namespace py = pybind11;

namespace cascader::bindings {

namespace {

using sim::FeatureMap;
using sim::NpuOperation;

const char* const kRounding[] = {"TFL", "TRUNCATE", "NATURAL"};

py::dict feature_map(const FeatureMap& f) {
  py::dict d;
  d["region"] = f.region;
  d["base"] = std::vector<uint64_t>(f.base.begin(), f.base.end());
  d["shape"] = py::make_tuple(f.height, f.width, f.depth);
  d["tiles"] = py::make_tuple(f.height0, f.height1, f.width0);
  d["strides"] = py::make_tuple(f.stride_y, f.stride_x, f.stride_c);
  d["dtype"] = sim::name(f.dtype);
  d["layout"] = f.layout == sim::Layout::NHWC ? "NHWC" : "NHCWB16";
  d["zero_point"] = f.zero_point;
  return d;
}

py::dict address_range(const sim::AddressRange& r) {
  py::dict d;
  d["region"] = r.region;
  d["address"] = r.address;
  d["length"] = r.length;
  return d;
}

template <typename Enum, int N>
Enum enum_named(const std::string& value, const char* what) {
  for (int i = 0; i < N; ++i) {
    if (value == sim::name(static_cast<Enum>(i))) return static_cast<Enum>(i);
  }
  throw InvalidArgument(std::string("unknown ") + what + " " + value);
}

sim::Rounding rounding_named(const std::string& value) {
  for (int i = 0; i < 3; ++i) {
    if (value == kRounding[i]) return static_cast<sim::Rounding>(i);
  }
  throw InvalidArgument("rounding must be TFL, TRUNCATE or NATURAL, got " + value);
}

// A key of the record format as a Python string, made once per place it is read (interned,
// its hash cached) and kept for the module's lifetime: a compile converts thousands of records
// of ~40 fields, and building the key strings was most of the conversion (then a map from the
// literal to its string, a tenth of it).
struct Key {
  explicit Key(const char* key) : text(key), object(PyUnicode_InternFromString(key)) {
    if (object == nullptr) throw py::error_already_set();
  }
  const char* text;
  PyObject* object;
};
#define RECORD_KEY(text) ([]() -> const Key& { static const Key key(text); return key; }())

// The value under `key` (borrowed), or null.
PyObject* lookup(const py::dict& d, const Key& key) { return PyDict_GetItem(d.ptr(), key.object); }

template <typename T>
T cast_field(PyObject* v, const Key& key) {
  const auto wrong_type = [&] {
    return InvalidArgument(std::string("operation dict: '") + key.text + "' has the wrong type");
  };
  if constexpr (std::is_same_v<T, py::dict>) {
    // Checked, not cast: pybind11's cast to a dict would try to build one from the value.
    if (!PyDict_Check(v)) throw wrong_type();
    return py::reinterpret_borrow<py::dict>(v);
  } else {
    try {
      return py::handle(v).cast<T>();
    } catch (const py::cast_error&) {
      throw wrong_type();
    }
  }
}

template <typename T>
T field(const py::dict& d, const Key& key) {
  PyObject* v = lookup(d, key);
  if (v == nullptr) throw InvalidArgument(std::string("operation dict has no '") + key.text + "'");
  return cast_field<T>(v, key);
}

template <typename T>
T field_or(const py::dict& d, const Key& key, T fallback) {
  PyObject* v = lookup(d, key);
  return v != nullptr && v != Py_None ? cast_field<T>(v, key) : fallback;
}

FeatureMap feature_map(const py::dict& d) {
  FeatureMap f;
  f.region = field<int>(d, RECORD_KEY("region"));
  const auto base = field<std::vector<int64_t>>(d, RECORD_KEY("base"));
  if (base.size() != 4 || *std::min_element(base.begin(), base.end()) < 0) {
    throw InvalidArgument("a feature map's 'base' needs 4 non-negative tile addresses");
  }
  std::copy(base.begin(), base.end(), f.base.begin());
  std::tie(f.height, f.width, f.depth) = field<std::tuple<int, int, int>>(d, RECORD_KEY("shape"));
  std::tie(f.height0, f.height1, f.width0) = field<std::tuple<int, int, int>>(d, RECORD_KEY("tiles"));
  std::tie(f.stride_y, f.stride_x, f.stride_c) = field<std::tuple<int64_t, int64_t, int64_t>>(d, RECORD_KEY("strides"));
  f.dtype = enum_named<sim::DataType, 6>(field<std::string>(d, RECORD_KEY("dtype")), "dtype");  // S64: U85 ARGMAX
  const auto layout = field<std::string>(d, RECORD_KEY("layout"));
  if (layout != "NHWC" && layout != "NHCWB16") throw InvalidArgument("layout must be NHWC or NHCWB16, got " + layout);
  f.layout = layout == "NHWC" ? sim::Layout::NHWC : sim::Layout::NHCWB16;
  f.zero_point = field_or<int>(d, RECORD_KEY("zero_point"), 0);
  return f;
}

sim::AddressRange address_range(const py::dict& d) {
  const int64_t address = field<int64_t>(d, RECORD_KEY("address")), length = field<int64_t>(d, RECORD_KEY("length"));
  if (address < 0 || length < 0) throw InvalidArgument("address ranges must not be negative");
  return sim::AddressRange{field<int>(d, RECORD_KEY("region")), static_cast<uint64_t>(address),
                           static_cast<uint64_t>(length)};
}

// An Ethos-U85 strided or indexed DMA (operation_to_dict's "u85_dma"; every key required).
void u85_dma(const py::dict& d, sim::NpuOperation::U85Fields::Dma& m) {
  using Pair = std::tuple<int64_t, int64_t>;
  m.stride_mode = field<int>(d, RECORD_KEY("stride_mode"));
  m.src_indexed = field<bool>(d, RECORD_KEY("src_indexed"));
  m.dst_indexed = field<bool>(d, RECORD_KEY("dst_indexed"));
  const auto row = field<int64_t>(d, RECORD_KEY("row_bytes"));
  const auto [size1, size0] = field<Pair>(d, RECORD_KEY("sizes"));
  const auto [src1, src0] = field<Pair>(d, RECORD_KEY("src_strides"));
  const auto [dst1, dst0] = field<Pair>(d, RECORD_KEY("dst_strides"));
  m.index_max = field<int64_t>(d, RECORD_KEY("index_max"));
  m.index_skip1 = field<int64_t>(d, RECORD_KEY("index_skip1"));
  if (row < 1 || size0 < 1 || size1 < 1 || size0 > 0xFFFF || size1 > 0xFFFF || std::min({src0, src1, dst0, dst1}) < 0 ||
      m.index_max < 0 || m.index_skip1 < 0) {
    throw InvalidArgument("a DMA's rows, sizes (1..65535), strides, index_max and index_skip1 must be positive or 0");
  }
  m.length = static_cast<uint64_t>(row);
  m.size0 = static_cast<int>(size0), m.size1 = static_cast<int>(size1);
  m.src_stride0 = static_cast<uint64_t>(src0), m.src_stride1 = static_cast<uint64_t>(src1);
  m.dst_stride0 = static_cast<uint64_t>(dst0), m.dst_stride1 = static_cast<uint64_t>(dst1);
  m.index = address_range(field<py::dict>(d, RECORD_KEY("index")));
}

// The Ethos-U85 fields (operation_to_dict's "u85"); a key left out keeps its default.
void u85_fields(const py::dict& d, NpuOperation& op) {
  auto& u = op.u85;
  std::tie(u.ifm_storage, u.ifm2_storage, u.ofm_storage) =
      field_or<std::tuple<int, int, int>>(d, RECORD_KEY("storage"), {u.ifm_storage, u.ifm2_storage, u.ofm_storage});
  u.ofm_transpose = field_or<int>(d, RECORD_KEY("ofm_transpose"), u.ofm_transpose);
  u.ofm_reverse = field_or<int>(d, RECORD_KEY("ofm_reverse"), u.ofm_reverse);
  u.acc_input = field_or<int>(d, RECORD_KEY("acc_input"), u.acc_input);
  u.acc_output = field_or<int>(d, RECORD_KEY("acc_output"), u.acc_output);
  u.microblock = field_or<int>(d, RECORD_KEY("microblock"), u.microblock);
  u.ofm_round_mode = field_or<int>(d, RECORD_KEY("ofm_round_mode"), u.ofm_round_mode);
  u.ofm_double_round = field_or<int>(d, RECORD_KEY("ofm_double_round"), u.ofm_double_round);
  std::tie(u.ifm_scale, u.ifm_shift, u.ifm_round_mode, u.ifm_double_round) = field_or<std::tuple<uint32_t, int, int, int>>(
      d, RECORD_KEY("ifm_scale"), {u.ifm_scale, u.ifm_shift, u.ifm_round_mode, u.ifm_double_round});
  std::tie(u.ifm2_scale, u.ifm2_shift, u.ifm2_round_mode, u.ifm2_double_round) =
      field_or<std::tuple<uint32_t, int, int, int>>(d, RECORD_KEY("ifm2_scale"),
                                                    {u.ifm2_scale, u.ifm2_shift, u.ifm2_round_mode, u.ifm2_double_round});
  u.broadcast_mode = field_or<int>(d, RECORD_KEY("broadcast_mode"), u.broadcast_mode);
  u.ifm_broadcast_mode = field_or<int>(d, RECORD_KEY("ifm_broadcast_mode"), u.ifm_broadcast_mode);
  u.op_scalar = field_or<uint32_t>(d, RECORD_KEY("op_scalar"), u.op_scalar);
  u.activation_table = field_or<int>(d, RECORD_KEY("activation_table"), u.activation_table);
  u.weight_format = field_or<int>(d, RECORD_KEY("weight_format"), u.weight_format);
  u.weight_sparsity = field_or<int>(d, RECORD_KEY("weight_sparsity"), u.weight_sparsity);
  u.weights_ifm2 = field_or<bool>(d, RECORD_KEY("weights_ifm2"), u.weights_ifm2);
  u.resize_mode = field_or<int>(d, RECORD_KEY("resize_mode"), u.resize_mode);
  using Axis = std::tuple<int, int, int>;
  const auto [ry, rx] = field_or<std::tuple<Axis, Axis>>(
      d, RECORD_KEY("resize"), {Axis{u.resize_y.n, u.resize_y.d, u.resize_y.offset},
                                Axis{u.resize_x.n, u.resize_x.d, u.resize_x.offset}});
  std::tie(u.resize_y.n, u.resize_y.d, u.resize_y.offset) = ry;
  std::tie(u.resize_x.n, u.resize_x.d, u.resize_x.offset) = rx;
  if (PyObject* v = lookup(d, RECORD_KEY("weight_streams"))) {
    const auto streams = cast_field<std::vector<py::dict>>(v, RECORD_KEY("weight_streams"));
    if (streams.size() > u.weight_streams.size()) throw InvalidArgument("an Ethos-U85 operation has at most 4 weight streams");
    for (size_t i = 0; i < streams.size(); ++i) u.weight_streams[i] = address_range(streams[i]);
  }
}

}  // namespace

py::dict operation_to_dict(const NpuOperation& op, bool u85) {
  py::dict d;
  d["kind"] = sim::name(op.kind);
  d["word_offset"] = op.word_offset;
  if (op.kind == sim::OpKind::Dma) {
    d["src"] = address_range(op.dma_src);
    d["dst"] = address_range(op.dma_dst);
    const auto& m = op.u85.dma;
    if (m.strided_or_indexed()) {  // an Ethos-U85 2-D/3-D or indexed DMA (read-only: not re-encoded)
      d["u85_dma"] = py::dict(py::arg("stride_mode") = m.stride_mode, py::arg("src_indexed") = m.src_indexed,
                              py::arg("dst_indexed") = m.dst_indexed, py::arg("row_bytes") = m.length,
                              py::arg("sizes") = py::make_tuple(m.size1, m.size0),
                              py::arg("src_strides") = py::make_tuple(m.src_stride1, m.src_stride0),
                              py::arg("dst_strides") = py::make_tuple(m.dst_stride1, m.dst_stride0),
                              py::arg("index") = address_range(m.index), py::arg("index_max") = m.index_max,
                              py::arg("index_skip1") = m.index_skip1);
    }
    return d;
  }
  if (op.kind == sim::OpKind::Pool) d["sub_op"] = sim::name(static_cast<sim::PoolMode>(op.sub_op));
  if (op.kind == sim::OpKind::Elementwise) d["sub_op"] = sim::name(static_cast<sim::ElementwiseMode>(op.sub_op));
  if (op.kind == sim::OpKind::Resize) {
    static const char* modes[] = {"BILINEAR", "REPLICATE", "NEAREST"};
    d["sub_op"] = modes[op.sub_op];
  }
  d["ifm"] = feature_map(op.ifm);
  if (op.has_ifm2() || op.u85.weights_ifm2) {
    d["ifm2"] = feature_map(op.ifm2);
    d["ifm2_scalar"] = op.ifm2_is_scalar ? py::object(py::int_(op.ifm2_scalar)) : py::object(py::none());
    d["broadcast"] = py::make_tuple(op.broadcast_h, op.broadcast_w, op.broadcast_c);
    d["reversed_operands"] = op.reversed_operands;
  }
  d["ofm"] = feature_map(op.ofm);
  d["kernel"] = py::dict(py::arg("height") = op.kernel.height, py::arg("width") = op.kernel.width,
                         py::arg("stride") = py::make_tuple(op.kernel.stride_y, op.kernel.stride_x),
                         py::arg("dilation") = py::make_tuple(op.kernel.dilation_y, op.kernel.dilation_x),
                         py::arg("part_kernel_first") = op.kernel.part_kernel_first);
  d["padding"] = py::make_tuple(op.padding.top, op.padding.left, op.padding.bottom, op.padding.right);
  d["weights"] = address_range(op.weights);
  d["scales"] = address_range(op.scales);
  if (op.parallel_mode > 0) {
    d["weights1"] = address_range(op.weights1);
    d["scales1"] = address_range(op.scales1);
  }
  d["activation"] = py::dict(py::arg("function") = op.activation.function,
                             py::arg("clip_range") = op.activation.clip_range, py::arg("min") = op.activation.min,
                             py::arg("max") = op.activation.max);
  d["rounding"] = kRounding[static_cast<int>(op.rounding)];
  d["ifm_rounding"] = kRounding[static_cast<int>(op.ifm_rounding)];
  d["global_scale"] = op.global_scale;
  d["ofm_scale"] = py::make_tuple(op.ofm_scale, op.ofm_shift);
  d["opa_scale"] = py::make_tuple(op.opa_scale, op.opa_shift);
  d["opb_scale"] = op.opb_scale;
  d["ifm_scale_mode"] = op.ifm_scale_mode;
  d["ifm_upscale"] = op.ifm_upscale;
  d["acc_format"] = op.acc_format;
  d["parallel_mode"] = op.parallel_mode;
  d["block"] = py::make_tuple(op.block_height, op.block_width, op.block_depth);
  if (u85) {
    const auto& u = op.u85;
    py::list streams;
    for (const auto& w : u.weight_streams) streams.append(address_range(w));
    d["u85"] = py::dict(
        py::arg("storage") = py::make_tuple(u.ifm_storage, u.ifm2_storage, u.ofm_storage),
        py::arg("ofm_transpose") = u.ofm_transpose, py::arg("ofm_reverse") = u.ofm_reverse,
        py::arg("acc_input") = u.acc_input, py::arg("acc_output") = u.acc_output, py::arg("microblock") = u.microblock,
        py::arg("ofm_round_mode") = u.ofm_round_mode, py::arg("ofm_double_round") = u.ofm_double_round,
        py::arg("ifm_scale") = py::make_tuple(u.ifm_scale, u.ifm_shift, u.ifm_round_mode, u.ifm_double_round),
        py::arg("ifm2_scale") = py::make_tuple(u.ifm2_scale, u.ifm2_shift, u.ifm2_round_mode, u.ifm2_double_round),
        py::arg("broadcast_mode") = u.broadcast_mode, py::arg("ifm_broadcast_mode") = u.ifm_broadcast_mode,
        py::arg("op_scalar") = u.op_scalar, py::arg("activation_table") = u.activation_table,
        py::arg("weight_format") = u.weight_format, py::arg("weight_sparsity") = u.weight_sparsity,
        py::arg("weights_ifm2") = u.weights_ifm2, py::arg("resize_mode") = u.resize_mode,
        py::arg("resize") = py::make_tuple(py::make_tuple(u.resize_y.n, u.resize_y.d, u.resize_y.offset),
                                           py::make_tuple(u.resize_x.n, u.resize_x.d, u.resize_x.offset)),
        py::arg("weight_streams") = streams);
  }
  return d;
}

NpuOperation operation_from_dict(const py::dict& d) {
  NpuOperation op;
  op.kind = enum_named<sim::OpKind, 6>(field<std::string>(d, RECORD_KEY("kind")), "operation kind");
  op.word_offset = field_or<size_t>(d, RECORD_KEY("word_offset"), 0);
  if (op.kind == sim::OpKind::Dma) {
    op.dma_src = address_range(field<py::dict>(d, RECORD_KEY("src")));
    op.dma_dst = address_range(field<py::dict>(d, RECORD_KEY("dst")));
    if (PyObject* v = lookup(d, RECORD_KEY("u85_dma")); v != nullptr && v != Py_None) {
      u85_dma(cast_field<py::dict>(v, RECORD_KEY("u85_dma")), op.u85.dma);
    }
    return op;
  }
  if (op.kind == sim::OpKind::Pool) {
    const auto mode = field<std::string>(d, RECORD_KEY("sub_op"));
    op.sub_op = static_cast<int>(enum_named<sim::PoolMode, 8>(mode, "pooling mode"));
  }
  if (op.kind == sim::OpKind::Elementwise) {
    const auto mode = field<std::string>(d, RECORD_KEY("sub_op"));
    op.sub_op = static_cast<int>(enum_named<sim::ElementwiseMode, 43>(mode, "elementwise mode"));
  }
  op.ifm = feature_map(field<py::dict>(d, RECORD_KEY("ifm")));
  op.ofm = feature_map(field<py::dict>(d, RECORD_KEY("ofm")));
  if (op.has_ifm2()) {
    op.ifm2 = feature_map(field<py::dict>(d, RECORD_KEY("ifm2")));
    PyObject* scalar = lookup(d, RECORD_KEY("ifm2_scalar"));
    op.ifm2_is_scalar = scalar != nullptr && scalar != Py_None;
    if (op.ifm2_is_scalar) op.ifm2_scalar = cast_field<int>(scalar, RECORD_KEY("ifm2_scalar"));
    std::tie(op.broadcast_h, op.broadcast_w, op.broadcast_c) =
        field<std::tuple<bool, bool, bool>>(d, RECORD_KEY("broadcast"));
    op.reversed_operands = field_or<bool>(d, RECORD_KEY("reversed_operands"), false);
  }
  const auto kernel = field<py::dict>(d, RECORD_KEY("kernel"));
  op.kernel.height = field<int>(kernel, RECORD_KEY("height"));
  op.kernel.width = field<int>(kernel, RECORD_KEY("width"));
  std::tie(op.kernel.stride_y, op.kernel.stride_x) = field<std::tuple<int, int>>(kernel, RECORD_KEY("stride"));
  std::tie(op.kernel.dilation_y, op.kernel.dilation_x) = field<std::tuple<int, int>>(kernel, RECORD_KEY("dilation"));
  op.kernel.part_kernel_first = field_or<bool>(kernel, RECORD_KEY("part_kernel_first"), false);
  if (op.kernel.dilation_y < 1 || op.kernel.dilation_x < 1) throw InvalidArgument("dilation must be >= 1");
  std::tie(op.padding.top, op.padding.left, op.padding.bottom, op.padding.right) =
      field<std::tuple<int, int, int, int>>(d, RECORD_KEY("padding"));
  std::tie(op.block_height, op.block_width, op.block_depth) = field<std::tuple<int, int, int>>(d, RECORD_KEY("block"));
  // Optional ranges: an operation without weights (or a second core's) has none.
  const auto optional_range = [&](const Key& key, sim::AddressRange& range) {
    if (PyObject* v = lookup(d, key)) range = address_range(cast_field<py::dict>(v, key));
  };
  optional_range(RECORD_KEY("weights"), op.weights);
  optional_range(RECORD_KEY("scales"), op.scales);
  optional_range(RECORD_KEY("weights1"), op.weights1);
  optional_range(RECORD_KEY("scales1"), op.scales1);
  if (PyObject* activation = lookup(d, RECORD_KEY("activation"))) {
    const auto a = cast_field<py::dict>(activation, RECORD_KEY("activation"));
    op.activation.function = field<int>(a, RECORD_KEY("function"));
    op.activation.clip_range = field_or<int>(a, RECORD_KEY("clip_range"), 0);
    op.activation.min = field<int>(a, RECORD_KEY("min"));
    op.activation.max = field<int>(a, RECORD_KEY("max"));
  }
  // A key left out keeps NpuOperation's own default.
  op.rounding =
      rounding_named(field_or<std::string>(d, RECORD_KEY("rounding"), kRounding[static_cast<int>(op.rounding)]));
  op.ifm_rounding = rounding_named(
      field_or<std::string>(d, RECORD_KEY("ifm_rounding"), kRounding[static_cast<int>(op.ifm_rounding)]));
  op.global_scale = field_or<bool>(d, RECORD_KEY("global_scale"), op.global_scale);
  std::tie(op.ofm_scale, op.ofm_shift) =
      field_or<std::tuple<uint32_t, int>>(d, RECORD_KEY("ofm_scale"), {op.ofm_scale, op.ofm_shift});
  std::tie(op.opa_scale, op.opa_shift) =
      field_or<std::tuple<uint32_t, int>>(d, RECORD_KEY("opa_scale"), {op.opa_scale, op.opa_shift});
  op.opb_scale = field_or<uint32_t>(d, RECORD_KEY("opb_scale"), op.opb_scale);
  op.ifm_scale_mode = field_or<int>(d, RECORD_KEY("ifm_scale_mode"), op.ifm_scale_mode);
  op.ifm_upscale = field_or<int>(d, RECORD_KEY("ifm_upscale"), op.ifm_upscale);
  op.acc_format = field_or<int>(d, RECORD_KEY("acc_format"), op.acc_format);
  op.parallel_mode = field_or<int>(d, RECORD_KEY("parallel_mode"), op.parallel_mode);
  if (PyObject* u85 = lookup(d, RECORD_KEY("u85"))) u85_fields(cast_field<py::dict>(u85, RECORD_KEY("u85")), op);
  // An Ethos-U85 matrix product reads its weights from the IFM2 map: an operand, not elementwise.
  if (op.u85.weights_ifm2) op.ifm2 = feature_map(field<py::dict>(d, RECORD_KEY("ifm2")));
  return op;
}

}  // namespace cascader::bindings
