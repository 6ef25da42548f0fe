#include "cascader/graph/propagator.hpp"

#include <algorithm>
#include <sstream>

#include "cascader/common/error.hpp"

namespace cascader {

bool Box::empty() const {
  return std::any_of(extent.begin(), extent.end(), [](int64_t e) { return e <= 0; });
}

std::string Propagator::repr() const {
  static const char* names = "NHWC";
  std::ostringstream s;
  s << "Propagator(";
  for (int i = 0; i < 4; ++i) {
    const AxisMap& m = axes[i];
    s << (i ? ", " : "") << names[i] << ": extent " << m.scale << "x";
    if (m.extent_bias) s << (m.extent_bias > 0 ? "+" : "") << m.extent_bias;
    s << " offset " << m.scale << "x";
    if (m.offset_bias) s << (m.offset_bias > 0 ? "+" : "") << m.offset_bias;
    if (m.divisor != 1) s << " /" << m.divisor << (m.inserts_zeros ? " (zeros inserted)" : "");
    if (from[size_t(i)] != i) s << " of " << names[from[size_t(i)]];
  }
  s << ")";
  return s.str();
}

Propagator Propagator::identity() { return Propagator{}; }

Propagator Propagator::window(int kernel_h, int kernel_w, int stride_h, int stride_w, int dilation_h, int dilation_w,
                              int pad_top, int pad_left, bool depthwise, int input_depth) {
  if (kernel_h < 1 || kernel_w < 1 || stride_h < 1 || stride_w < 1 || dilation_h < 1 || dilation_w < 1 ||
      input_depth < 1 || pad_top < 0 || pad_left < 0) {
    throw InvalidArgument("window propagator: kernel, stride, dilation and depth must be >= 1, padding >= 0");
  }
  Propagator p;
  const int64_t dk_h = int64_t(kernel_h - 1) * dilation_h + 1, dk_w = int64_t(kernel_w - 1) * dilation_w + 1;
  // Output rows [o, o + e) read input rows [o*s - pad, (o + e - 1)*s - pad + dk).
  p.axes[1] = AxisMap{stride_h, dk_h - stride_h, -pad_top};
  p.axes[2] = AxisMap{stride_w, dk_w - stride_w, -pad_left};
  p.axes[3] = depthwise ? AxisMap{1, 0, 0} : AxisMap{0, input_depth, 0};
  return p;
}

Propagator Propagator::upscale(int factor) {
  if (factor < 1) throw InvalidArgument("upscale propagator: the factor must be >= 1");
  Propagator p;
  p.axes[1].divisor = p.axes[2].divisor = factor;
  return p;
}

Propagator Propagator::transposed(int kernel_h, int kernel_w, int pad_top, int pad_left, int input_depth,
                                  int factor) {
  if (factor < 1) throw InvalidArgument("transposed propagator: the factor must be >= 1");
  Propagator p = window(kernel_h, kernel_w, 1, 1, 1, 1, pad_top, pad_left, false, input_depth);
  for (int i : {1, 2}) p.axes[size_t(i)].divisor = factor, p.axes[size_t(i)].inserts_zeros = true;
  return p;
}

Propagator Propagator::permutation(const std::array<int, 4>& from) {
  std::array<int, 4> sorted = from;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != std::array<int, 4>{0, 1, 2, 3} || from[0] != 0) {
    throw InvalidArgument("permutation propagator: `from` must be a permutation of 0..3 that keeps axis 0");
  }
  Propagator p;
  p.from = from;
  return p;
}

Propagator Propagator::broadcast(const std::array<int64_t, 4>& operand, const std::array<int64_t, 4>& output) {
  Propagator p;
  for (int i = 0; i < 4; ++i) {
    if (operand[i] == output[i]) continue;
    if (operand[i] != 1) throw InvalidArgument("broadcast propagator: operand axes must equal the output's or be 1");
    p.axes[i] = AxisMap{0, 1, 0};
  }
  return p;
}

}  // namespace cascader
