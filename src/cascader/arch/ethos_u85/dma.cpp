#include "cascader/arch/ethos_u85/dma.hpp"

#include <cstring>
#include <string>

#include "cascader/arch/ethos_u85/registers.hpp"

namespace cascader::ethos_u85 {

namespace {

constexpr uint64_t kAddressMask = 0xFFFFFFFFFFull;  // 40-bit addresses
constexpr int kRegionMask = 0x1FF;                  // region 0-2 and the internal-memory bit 8

[[noreturn]] void fail(size_t offset, const std::string& what) { sim::command_stream_error(offset, what); }

// The farthest byte of rows (j, i) over j < size1, i < count along one side, plus one.
uint64_t span(uint64_t stride0, uint64_t stride1, int64_t count, int size1, uint64_t length) {
  return static_cast<uint64_t>(count - 1) * stride0 + static_cast<uint64_t>(size1 - 1) * stride1 + length;
}

}  // namespace

sim::NpuOperation read_dma(const sim::RegisterFile& r, size_t offset) {
  sim::NpuOperation op;
  op.kind = sim::OpKind::Dma;
  op.word_offset = offset;
  const int src = r.u16(DMA0_SRC_REGION), dst = r.u16(DMA0_DST_REGION);
  auto& d = op.u85.dma;
  d.stride_mode = (src >> kDmaStrideShift) & 3;
  d.src_indexed = (src >> kDmaIndexed) & 1;
  d.dst_indexed = (dst >> kDmaIndexed) & 1;
  d.length = r.r1[DMA0_LEN] & kAddressMask;
  op.dma_src = {src & kRegionMask, r.r1[DMA0_SRC] & kAddressMask, d.length};
  op.dma_dst = {dst & kRegionMask, r.r1[DMA0_DST] & kAddressMask, d.length};
  if (!d.strided_or_indexed()) return op;
  if (d.stride_mode == 3) fail(offset, "reserved DMA stride mode 3");
  if (d.src_indexed && d.dst_indexed) fail(offset, "a DMA indexed on both its source and its destination");
  d.size0 = d.stride_mode >= 1 ? r.u16(DMA0_SIZE0) : 1;
  d.size1 = d.stride_mode == 2 ? r.u16(DMA0_SIZE1) : 1;
  if (d.size0 < 1 || d.size1 < 1 || d.length == 0) fail(offset, "a strided or indexed DMA with a size of 0");
  // The stride registers apply in 2-D/3-D mode, and stride 0 to the indexed side in any mode.
  const bool rows = d.stride_mode >= 1;
  d.src_stride0 = rows || d.src_indexed ? r.r1[DMA0_SRC_STRIDE0] & kAddressMask : 0;
  d.dst_stride0 = rows || d.dst_indexed ? r.r1[DMA0_DST_STRIDE0] & kAddressMask : 0;
  d.src_stride1 = d.stride_mode == 2 ? r.r1[DMA0_SRC_STRIDE1] & kAddressMask : 0;
  d.dst_stride1 = d.stride_mode == 2 ? r.r1[DMA0_DST_STRIDE1] & kAddressMask : 0;
  if (d.src_indexed || d.dst_indexed) {
    d.index_max = static_cast<int64_t>(r.lo(DMA0_IDX_MAX));
    d.index_skip1 = d.stride_mode == 2 ? static_cast<int64_t>(r.lo(DMA0_IDX_SKIP1)) : 0;
    const uint64_t index_bytes = static_cast<uint64_t>(d.size1) * (4 * static_cast<uint64_t>(d.size0) + d.index_skip1);
    d.index = {r.u16(DMA0_IDX_REGION) & kRegionMask, r.r1[DMA0_IDX] & kAddressMask, index_bytes};
  }
  // Bound what each side may touch: the indexed side any row up to IDX_MAX.
  op.dma_src.length = span(d.src_stride0, d.src_stride1, d.src_indexed ? d.index_max + 1 : d.size0, d.size1, d.length);
  op.dma_dst.length = span(d.dst_stride0, d.dst_stride1, d.dst_indexed ? d.index_max + 1 : d.size0, d.size1, d.length);
  return op;
}

void run_dma(const sim::NpuOperation& op, const MemoryAccess& bytes) {
  const auto& d = op.u85.dma;
  const uint8_t* src = bytes(op.dma_src.region, op.dma_src.address, op.dma_src.length, "DMA source");
  uint8_t* dst = bytes(op.dma_dst.region, op.dma_dst.address, op.dma_dst.length, "DMA destination");
  const uint8_t* index = nullptr;
  if (d.src_indexed || d.dst_indexed) index = bytes(d.index.region, d.index.address, d.index.length, "DMA index");
  for (int j = 0; j < d.size1; ++j) {
    for (int i = 0; i < d.size0; ++i) {
      uint64_t s = static_cast<uint64_t>(j) * d.src_stride1, t = static_cast<uint64_t>(j) * d.dst_stride1;
      uint64_t si = static_cast<uint64_t>(i), ti = static_cast<uint64_t>(i);
      if (index != nullptr) {
        int32_t k;
        std::memcpy(&k, index + static_cast<uint64_t>(j) * (4 * static_cast<uint64_t>(d.size0) + d.index_skip1) +
                            4 * static_cast<uint64_t>(i), 4);
        if (k < 0 || k > d.index_max) {
          fail(op.word_offset, "DMA index " + std::to_string(k) + " (row " + std::to_string(j) + ", element " +
                                   std::to_string(i) + ") is outside 0.." + std::to_string(d.index_max) +
                                   " (DMA0_IDX_MAX)");
        }
        (d.src_indexed ? si : ti) = static_cast<uint64_t>(k);
      }
      s += si * d.src_stride0;
      t += ti * d.dst_stride0;
      std::memmove(dst + t, src + s, d.length);
    }
  }
}

}  // namespace cascader::ethos_u85
