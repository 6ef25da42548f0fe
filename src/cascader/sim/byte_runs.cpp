#include "cascader/sim/byte_runs.hpp"

#include <algorithm>

#include "cascader/common/error.hpp"

namespace cascader::sim {

void append_byte_runs(const FeatureMap& fm, const FeatureBox& box, std::vector<ByteRun>& out, size_t first) {
  if (box.empty()) return;
  const int64_t es = element_size(fm.dtype);
  auto push = [&](int y, int x, int c) {
    const auto a = static_cast<int64_t>(fm.address(y, x, c));
    if (out.size() > first && out.back().end == a) {
      out.back().end = a + es;
    } else {
      if (out.size() >= kMaxByteRuns) throw BinaryError("a feature map access with too many byte runs to track");
      out.push_back({a, a + es});
    }
  };
  // Walk in address order for the layout: channels within a pixel for NHWC, 16-channel bricks
  // along x for NHCWB16.
  for (int y = box.y0; y < box.y1; ++y) {
    if (fm.layout == Layout::NHWC) {
      for (int x = box.x0; x < box.x1; ++x) {
        for (int c = box.c0; c < box.c1; ++c) push(y, x, c);
      }
      continue;
    }
    for (int brick = box.c0 / 16; brick * 16 < box.c1; ++brick) {
      const int c0 = std::max(box.c0, brick * 16), c1 = std::min(box.c1, brick * 16 + 16);
      for (int x = box.x0; x < box.x1; ++x) {
        for (int c = c0; c < c1; ++c) push(y, x, c);
      }
    }
  }
}

}  // namespace cascader::sim
