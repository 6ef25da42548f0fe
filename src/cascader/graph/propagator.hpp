// Propagators: which region of an input a region of the output reads.
//
// A region is a box over the NHWC axes (offset and extent per axis). A Propagator is an affine
// map from an output box to the input box its computation reads, before cropping to the input
// tensor: per axis, extent_in = a * extent_out + b and offset_in = a * offset_out + c. For a
// convolution along H: a = stride, b = dilated kernel - stride, c = -pad_top. The offset is
// scaled by the stride (TVM's cascader did not, and misplaced every stripe after the first);
// property-tested against the brute-force set of input elements a convolution reads.
//
// Axes with a = 0 read a fixed range whatever the output box: a convolution's input channels
// (b = input depth), a broadcast operand's size-1 axes (b = 1).
//
// An upscaling operation reads a fraction of an input row per output row: its axes map into
// the upscaled input, then divide by the `divisor`, the end rounded up. A 2x nearest-neighbour
// resize (the NPU repeats each IFM row and column) rounds the first row down; a transposed
// convolution (the NPU inserts a zero after each IFM row and column: upscaled row u is stored
// row u / 2 when u is even) rounds it up, the zero rows before it the stripe's padding.
//
// A transpose reads along each input axis what the output has along another: input axis i
// follows output axis `from[i]` (identity for every other operation).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>

namespace cascader {

struct Box {
  std::array<int64_t, 4> offset{0, 0, 0, 0};
  std::array<int64_t, 4> extent{1, 1, 1, 1};
  bool operator==(const Box& o) const { return offset == o.offset && extent == o.extent; }
  bool empty() const;
  // The part of this box inside [0, shape) per axis. Defined here: the planner's inner loop
  // crops every region it propagates.
  Box cropped(const std::array<int64_t, 4>& shape) const {
    Box b;
    for (int i = 0; i < 4; ++i) {
      const int64_t lo = std::clamp<int64_t>(offset[i], 0, shape[i]);
      const int64_t hi = std::clamp<int64_t>(offset[i] + extent[i], 0, shape[i]);
      b.offset[i] = lo;
      b.extent[i] = std::max<int64_t>(hi - lo, 0);
    }
    return b;
  }
};

struct AxisMap {
  int64_t scale = 1;         // a: input elements per output element
  int64_t extent_bias = 0;   // b
  int64_t offset_bias = 0;   // c
  int64_t divisor = 1;       // input elements per `divisor` upscaled ones
  bool inserts_zeros = false;  // upscaled by zero insertion (else by repetition)
  // The operation reads every `step`-th input element along the axis (a strided slice read in
  // place): its region spans the input's elements, its IFM holds (extent - 1) / step + 1.
  int64_t step = 1;
  // The input elements the operation may read along the axis, [lo, hi) (a box read in place:
  // a window reaching past the box pads there, as past the tensor's edge).
  int64_t lo = std::numeric_limits<int64_t>::min();
  int64_t hi = std::numeric_limits<int64_t>::max();
};

struct Propagator {
  std::array<AxisMap, 4> axes;
  std::array<int, 4> from{0, 1, 2, 3};  // the output axis each input axis follows

  // Defined here for the planner's inner loop, as Box::cropped.
  Box propagate(const Box& out) const {
    Box in = upscaled(out);
    for (int i = 0; i < 4; ++i) {
      const AxisMap& m = axes[i];
      if (m.divisor != 1) {
        const int64_t lo = floor_div(in.offset[i] + (m.inserts_zeros ? m.divisor - 1 : 0), m.divisor);
        in.extent[i] = floor_div(in.offset[i] + in.extent[i] + m.divisor - 1, m.divisor) - lo;
        in.offset[i] = lo;
      }
    }
    return in;
  }
  // The box in the upscaled input (before the divisors): where the stripe's padding is counted.
  Box upscaled(const Box& out) const {
    Box in;
    for (int i = 0; i < 4; ++i) {
      const AxisMap& m = axes[i];
      const size_t o = size_t(from[size_t(i)]);
      in.extent[i] = m.scale * out.extent[o] + m.extent_bias;
      in.offset[i] = m.scale * out.offset[o] + m.offset_bias;
    }
    return in;
  }
  // `want` (a propagated region) cropped to what the operation reads of an input of `shape`:
  // the tensor, and each axis's [lo, hi). Where it is smaller than `want`, the operation pads.
  Box readable(const Box& want, const std::array<int64_t, 4>& shape) const {
    Box b;
    for (size_t i = 0; i < 4; ++i) {
      const int64_t first = std::max<int64_t>(0, axes[i].lo);
      const int64_t end = std::max(first, std::min(shape[i], axes[i].hi));
      const int64_t lo = std::clamp<int64_t>(want.offset[i], first, end);
      const int64_t hi = std::clamp<int64_t>(want.offset[i] + want.extent[i], first, end);
      b.offset[i] = lo;
      b.extent[i] = std::max<int64_t>(hi - lo, 0);
    }
    return b;
  }
  bool upscales() const { return axes[1].divisor != 1 || axes[2].divisor != 1; }
  bool permutes() const { return from != std::array<int, 4>{0, 1, 2, 3}; }
  std::string repr() const;

  static Propagator identity();
  // A window operation (convolution, depthwise, pooling) along H and W. `depthwise` keeps the
  // channel mapping 1:1; otherwise every output channel reads all `input_depth` channels.
  static Propagator window(int kernel_h, int kernel_w, int stride_h, int stride_w, int dilation_h, int dilation_w,
                           int pad_top, int pad_left, bool depthwise, int input_depth);
  // An elementwise operand of shape `operand` broadcast to the output (size-1 axes read element 0).
  static Propagator broadcast(const std::array<int64_t, 4>& operand, const std::array<int64_t, 4>& output);
  // A 1x1 operation reading its input upscaled by `factor` along H and W (nearest neighbour).
  static Propagator upscale(int factor);
  // A stride-1 convolution over its input with `factor` - 1 zeros inserted after every row and
  // column (a transposed convolution), padded by `pad_top` and `pad_left` before.
  static Propagator transposed(int kernel_h, int kernel_w, int pad_top, int pad_left, int input_depth, int factor);
  // A TRANSPOSE: input axis i holds output axis `from[i]` (a permutation of NHWC that keeps N).
  static Propagator permutation(const std::array<int, 4>& from);

 private:
  static int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
};

}  // namespace cascader
