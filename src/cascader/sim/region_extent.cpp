#include "cascader/sim/region_extent.hpp"

#include <algorithm>
#include <array>

#include "cascader/arch/ethos_u85/ofm_order.hpp"
#include "cascader/arch/ethos_u85/registers.hpp"

namespace cascader::sim {

namespace {

constexpr int kInternalRegionBit = 0x100;  // a DMA region with this bit set is the SHRAM

void reach(std::array<RegionExtent, 8>& out, int region, uint64_t end, size_t op, const char* what) {
  RegionExtent& e = out[static_cast<size_t>(region & 0x7)];
  if (!e.used || end > e.end) e = {true, end, op, what};
}

void range(std::array<RegionExtent, 8>& out, const AddressRange& r, size_t op, const char* what) {
  if (r.length) reach(out, r.region, r.address + r.length, op, what);
}

}  // namespace

std::array<RegionExtent, 8> region_extents(const CommandStream& stream) {
  std::array<RegionExtent, 8> out{};
  for (size_t i = 0; i < stream.operations.size(); ++i) {
    const NpuOperation& op = stream.operations[i];
    if (op.kind == OpKind::Dma) {
      if (!(op.dma_src.region & kInternalRegionBit)) range(out, op.dma_src, i, "DMA src");
      if (!(op.dma_dst.region & kInternalRegionBit)) range(out, op.dma_dst, i, "DMA dst");
      continue;
    }
    range(out, op.weights, i, "weights");
    range(out, op.scales, i, "scales");
    range(out, op.weights1, i, "weights (core 1)");
    range(out, op.scales1, i, "scales (core 1)");
    // An IFM's height and width follow from the OFM and kernel; its base is what is certain.
    // A map in the Ethos-U85's chaining buffer is in no memory (its REGION names the buffer).
    const auto& u = op.u85;
    if (u.ifm_storage != ethos_u85::CHAINED) reach(out, op.ifm.region, op.ifm.base[0] + 1, i, "ifm");
    if (op.has_ifm2() && !op.ifm2_is_scalar && u.ifm2_storage != ethos_u85::CHAINED) {
      reach(out, op.ifm2.region, op.ifm2.base[0] + 1, i, "ifm2");
    }
    if (u.ofm_storage == ethos_u85::CHAINED) continue;
    // The OFM as it lies in memory: an Ethos-U85 OFM written transposed has the stored map's
    // extent (its registers' height, width and depth are the computed map's).
    const FeatureMap& f = op.ofm;
    const std::array<int, 3> e = ethos_u85::OfmOrder(op).stored_extent();
    const uint64_t last = f.address(e[0] - 1, e[1] - 1, e[2] - 1) + static_cast<uint64_t>(element_size(f.dtype));
    reach(out, f.region, std::max(last, f.base[0] + 1), i, "ofm");
  }
  return out;
}

}  // namespace cascader::sim
