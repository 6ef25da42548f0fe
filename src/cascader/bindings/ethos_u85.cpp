#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <map>
#include <string>
#include <string_view>
#include <tuple>

#include "cascader/arch/ethos_u85/activation_table.hpp"
#include "cascader/arch/ethos_u85/block_search.hpp"
#include "cascader/arch/ethos_u85/fast_weights.hpp"
#include "cascader/arch/ethos_u85/operation_weights.hpp"
#include "cascader/arch/ethos_u85/performance.hpp"
#include "cascader/arch/ethos_u85/scale_stream.hpp"
#include "cascader/arch/ethos_u85/weight_order.hpp"
#include "cascader/bindings/bindings.hpp"
#include "cascader/common/error.hpp"
#include "cascader/emit/weight_encoder.hpp"
#include "cascader/emit/weights.hpp"
#include "cascader/sim/driver_payload.hpp"
#include "cascader/sim/executor.hpp"

namespace py = pybind11;

namespace cascader::bindings {

namespace {

const uint8_t* data_of(const py::bytes& b, size_t& size) {
  const std::string_view s = b;
  size = s.size();
  return reinterpret_cast<const uint8_t*>(s.data());
}

py::bytes as_bytes(const std::vector<uint8_t>& v) { return py::bytes(reinterpret_cast<const char*>(v.data()), v.size()); }

py::dict slice_dict(const emit::WeightSlice& s) {
  return py::dict(py::arg("new_section") = s.new_section, py::arg("zdiv") = s.zdiv, py::arg("wdiv") = s.wdiv,
                  py::arg("wtrunc") = s.wtrunc, py::arg("new_palette") = s.new_palette,
                  py::arg("direct_offset") = s.direct_offset, py::arg("palbits") = s.palbits,
                  py::arg("palette") = s.palette, py::arg("indices") = s.indices, py::arg("runs") = s.runs);
}

emit::WeightSlice slice_of(const py::dict& d) {
  emit::WeightSlice s;
  s.new_section = d["new_section"].cast<bool>();
  s.zdiv = d["zdiv"].cast<int>();
  s.wdiv = d["wdiv"].cast<int>();
  s.wtrunc = d["wtrunc"].cast<bool>();
  s.new_palette = d["new_palette"].cast<bool>();
  s.direct_offset = d["direct_offset"].cast<int>();
  s.palbits = d["palbits"].cast<int>();
  s.palette = d["palette"].cast<std::vector<int16_t>>();
  s.indices = d["indices"].cast<std::vector<uint16_t>>();
  s.runs = d["runs"].cast<std::vector<int32_t>>();
  return s;
}

py::list channels_list(const std::vector<emit::BiasScale>& v) {
  py::list out;
  for (const auto& e : v) out.append(py::make_tuple(e.bias, e.scale, e.shift));
  return out;
}

std::vector<emit::BiasScale> channels_of(const std::vector<std::tuple<int64_t, uint32_t, int>>& v) {
  std::vector<emit::BiasScale> out;
  for (const auto& [b, s, sh] : v) out.push_back({b, s, sh});
  return out;
}

}  // namespace

void bind_ethos_u85(py::module_& m) {
  m.def(
      "u85_tanh_sigmoid_table", [](int function) { return as_bytes(ethos_u85::tanh_sigmoid_table(function)); },
      py::arg("function"), "The 2 KiB table the Ethos-U85's TANH (10) or SIGMOID (11) activation reads.");
  m.def(
      "u85_micro_block",
      [](const std::string& accelerator, NpuOpType type, int ifm_bits, std::tuple<int, int, int> ofm,
         bool depth_first_1x1) {
        const auto& [h, w, c] = ofm;
        const BlockShape ub = ethos_u85::micro_block(accelerator_config(accelerator), type, ifm_bits,
                                                     Shape4{1, h, w, c}, depth_first_1x1);
        return py::make_tuple(ub.height, ub.width, ub.depth, ethos_u85::micro_block_field(ub));
      },
      py::arg("accelerator"), py::arg("type"), py::arg("ifm_bits"), py::arg("ofm_shape"), py::arg("depth_first_1x1"),
      "(height, width, depth, ACC_FORMAT field) of the OFM micro-block an Ethos-U85 operation runs with.");
  m.def("u85_resize_description", &ethos_u85::resize_description, py::arg("op"), py::arg("accelerator"),
        py::arg("scale_n"), py::arg("scale_d"),
        "`op` (a resize's output-unit pass) as the Ethos-U85 runs a resize, with Vela's block for it.");
  m.def("u85_chained", &ethos_u85::chained, py::arg("first"), py::arg("next"), py::arg("ifm2_chained"),
        py::arg("arch"),
        "`first` (with its block config) keeping its OFM in the chaining buffer for `next[0]`, which reads\n"
        "it as its IFM (or IFM2, `ifm2_chained[0]`), and so on along `next`: the chain as the cycle model\n"
        "costs it, one operation.");
  m.def(
      "u85_try_block_config",
      [](const NpuOp& op, const AcceleratorConfig& a, const BlockShape& block) {
        return ethos_u85::try_block_config(op, a, block);
      },
      py::arg("op"), py::arg("accelerator"), py::arg("ofm_block"),
      "The Ethos-U85 block config of `op` with this OFM block, or None when the block is not valid for it.");
  m.def(
      "decode_weight_slices",
      [](const py::bytes& data) {
        size_t n;
        const uint8_t* p = data_of(data, n);
        py::list out;
        for (const auto& s : emit::decode_weight_slices(p, n)) out.append(slice_dict(s));
        return out;
      },
      py::arg("data"), "A weight stream's slices as coded: header fields, palette, indices and zero runs.");
  m.def(
      "encode_weight_slices",
      [](const py::list& slices) {
        std::vector<emit::WeightSlice> v;
        for (const auto& d : slices) v.push_back(slice_of(d.cast<py::dict>()));
        return as_bytes(emit::encode_weight_slices(v));
      },
      py::arg("slices"), "Writes recorded weight-stream slices (decode_weight_slices) back to bytes.");

  m.def(
      "decode_fast_weights",
      [](const py::bytes& data, size_t count) {
        size_t n;
        const uint8_t* p = data_of(data, n);
        const auto w = ethos_u85::decode_fast_weights(p, n, count);
        return py::dict(py::arg("raw") = w.raw, py::arg("small_palette") = w.small_palette,
                        py::arg("zero_adjust") = w.zero_adjust, py::arg("palette") = w.palette,
                        py::arg("values") = w.values);
      },
      py::arg("data"), py::arg("count"), "An Ethos-U85 fast-weight stream's header and `count` values.");
  m.def(
      "encode_fast_weights",
      [](const py::dict& d) {
        ethos_u85::FastWeights w;
        w.raw = d["raw"].cast<bool>();
        w.small_palette = d["small_palette"].cast<bool>();
        w.zero_adjust = d["zero_adjust"].cast<int>();
        w.palette = d["palette"].cast<std::array<int16_t, 16>>();
        w.values = d["values"].cast<std::vector<int16_t>>();
        return as_bytes(ethos_u85::encode_fast_weights(w));
      },
      py::arg("weights"), "Writes an Ethos-U85 fast-weight stream (decode_fast_weights' dict).");

  m.def(
      "decode_u85_scale_stream",
      [](const py::bytes& data, size_t count, bool acc48) {
        size_t n;
        const uint8_t* p = data_of(data, n);
        return channels_list(ethos_u85::decode_scale_stream(p, n, count, acc48));
      },
      py::arg("data"), py::arg("count"), py::arg("acc48") = false,
      "(bias, scale, shift) per channel of an Ethos-U85 scale stream (32- or 48-bit accumulators).");
  m.def(
      "encode_u85_scale_stream",
      [](const std::vector<std::tuple<int64_t, uint32_t, int>>& entries, bool acc48) {
        return as_bytes(ethos_u85::encode_scale_stream(channels_of(entries), acc48));
      },
      py::arg("entries"), py::arg("acc48") = false, "Writes (bias, scale, shift) entries as an Ethos-U85 scale stream.");

  m.def(
      "u85_operation_weights",
      [](const py::bytes& payload, const std::map<int, py::array_t<uint8_t, py::array::c_style>>& regions) {
        size_t n;
        const uint8_t* p = data_of(payload, n);
        const sim::DriverPayload dp = sim::parse_driver_payload(p, n);
        if (dp.config.product != static_cast<int>(Product::EthosU85)) throw InvalidArgument("not an Ethos-U85 payload");
        const sim::CommandStream cs = sim::decode_command_stream(dp.command_stream.data(), dp.command_stream.size(),
                                                                 Product::EthosU85);
        const AcceleratorConfig& acc = accelerator_config(dp.config.accelerator());
        // Copies of the regions: the DMAs (which bring streams from flash) run on them.
        std::map<int, std::vector<uint8_t>> mem;
        std::array<sim::RegionMemory, 8> bound{};
        for (const auto& [region, array] : regions) {
          if (region < 0 || region > 7) throw InvalidArgument("region numbers are 0..7, got " + std::to_string(region));
          auto& v = mem[region];
          v.assign(array.data(), array.data() + array.size());
          bound[static_cast<size_t>(region)] = {v.data(), v.size()};
        }
        sim::Executor dma(dp.config, bound);
        auto fetch = [&](const sim::AddressRange& r, const char* what) -> const uint8_t* {
          const auto& b = bound[static_cast<size_t>(r.region & 7)];
          if (b.data == nullptr || r.address > b.size || r.length > b.size - r.address) {
            throw BinaryError(std::string(what) + " beyond region " + std::to_string(r.region));
          }
          return b.data + r.address;
        };
        py::list out;
        for (const auto& op : cs.operations) {
          if (op.kind == sim::OpKind::Dma) {
            dma.execute(op);
            continue;
          }
          if (op.kind != sim::OpKind::Conv && op.kind != sim::OpKind::Depthwise) continue;
          const auto order = ethos_u85::weight_order_of(op, acc);
          const auto w = ethos_u85::load_operation_weights(op, acc, fetch);
          py::list streams;
          for (size_t s = 0; s < ethos_u85::stream_value_counts(order).size(); ++s) {
            const auto& r = op.u85.weight_streams[s];
            streams.append(py::bytes(reinterpret_cast<const char*>(fetch(r, "weight stream")), r.length));
          }
          const py::ssize_t kh = order.kernel_height, kw = order.kernel_width;
          py::array_t<int16_t> ohwi({static_cast<py::ssize_t>(order.ofm_depth), kh, kw,
                                     static_cast<py::ssize_t>(order.ifm_depth)});
          std::copy(w.ohwi.begin(), w.ohwi.end(), ohwi.mutable_data());
          out.append(py::dict(py::arg("word_offset") = op.word_offset, py::arg("ohwi") = ohwi,
                              py::arg("channels") = channels_list(w.channels), py::arg("streams") = streams,
                              py::arg("stream_values") = ethos_u85::stream_value_counts(order),
                              py::arg("fast") = order.fast, py::arg("acc48") = op.acc_format == 1,
                              py::arg("scales") = py::bytes(reinterpret_cast<const char*>(fetch(op.scales, "scale stream")),
                                                            op.scales.length)));
        }
        return out;
      },
      py::arg("payload"), py::arg("regions"),
      "Per Ethos-U85 convolution of a payload (its DMAs replayed on copies of the regions): the\n"
      "OHWI weights and (bias, scale, shift) per channel its streams decode to, and the raw streams.");
}

}  // namespace cascader::bindings
