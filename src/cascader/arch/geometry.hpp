// Feature-map shapes and convolution kernels as the NPU sees them (NHWC, batch 1 in practice).
#pragma once

#include <algorithm>
#include <cstdint>

namespace cascader {

struct Shape4 {
  int n = 1, h = 1, w = 1, c = 1;
  int64_t elements() const { return int64_t(n) * h * w * c; }
  int64_t elements_wh() const { return int64_t(h) * w; }
  bool operator==(const Shape4& o) const { return n == o.n && h == o.h && w == o.w && c == o.c; }
};

inline int div_round_up(int a, int b) { return (a + b - 1) / b; }
inline int round_up(int a, int b) { return div_round_up(a, b) * b; }

struct Kernel {
  int height = 1, width = 1;
  int stride_y = 1, stride_x = 1;
  int dilation_y = 1, dilation_x = 1;
  int elements_wh() const { return height * width; }
  // The input window one output element covers once dilation is applied.
  int area_height() const { return (height - 1) * dilation_y + 1; }
  int area_width() const { return (width - 1) * dilation_x + 1; }
  bool operator==(const Kernel& o) const {
    return height == o.height && width == o.width && stride_y == o.stride_y && stride_x == o.stride_x &&
           dilation_y == o.dilation_y && dilation_x == o.dilation_x;
  }
};

}  // namespace cascader
