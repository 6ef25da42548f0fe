#include "cascader/arch/ethos_u85/bilinear_resize.hpp"

#include <algorithm>
#include <string>

#include "cascader/sim/register_file.hpp"

namespace cascader::ethos_u85 {

namespace {

// One output position's two IFM neighbours and the weight (in 1/n) of the second.
struct Taps {
  int i0, i1;
  int64_t r;
};

std::vector<Taps> axis_taps(const sim::NpuOperation::U85Fields::ResizeAxis& a, int out, int in) {
  std::vector<Taps> taps(static_cast<size_t>(out));
  for (int p = 0; p < out; ++p) {
    const int64_t pos = static_cast<int64_t>(p) * a.d + a.offset;
    const int64_t i = pos >= 0 ? pos / a.n : -((-pos + a.n - 1) / a.n);  // floor
    const int64_t r = pos - i * a.n;
    taps[static_cast<size_t>(p)] = {static_cast<int>(std::clamp<int64_t>(i, 0, in - 1)),
                                    static_cast<int>(std::clamp<int64_t>(i + 1, 0, in - 1)), r};
  }
  return taps;
}

}  // namespace

std::vector<int64_t> bilinear_resize(const sim::NpuOperation& op, const sim::Dense& ifm, int OH, int OW) {
  const auto& u = op.u85;
  for (const auto* a : {&u.resize_x, &u.resize_y}) {
    if (a->n < 1 || a->d < 1 || a->offset < -a->n || a->offset >= a->n) {
      sim::command_stream_error(op.word_offset, "BILINEAR resize with scale " + std::to_string(a->n) + "/" +
                                                    std::to_string(a->d) + " and offset " + std::to_string(a->offset) +
                                                    " outside the registers' range");
    }
  }
  const std::vector<Taps> ty = axis_taps(u.resize_y, OH, ifm.h), tx = axis_taps(u.resize_x, OW, ifm.w);
  const int64_t ny = u.resize_y.n, nx = u.resize_x.n;
  const int C = ifm.c;
  std::vector<int64_t> acc(static_cast<size_t>(OH) * OW * C);
  for (int y = 0; y < OH; ++y) {
    const Taps& a = ty[static_cast<size_t>(y)];
    for (int x = 0; x < OW; ++x) {
      const Taps& b = tx[static_cast<size_t>(x)];
      const int64_t w00 = (ny - a.r) * (nx - b.r), w01 = (ny - a.r) * b.r, w10 = a.r * (nx - b.r), w11 = a.r * b.r;
      const int64_t *p00 = ifm.at(a.i0, b.i0), *p01 = ifm.at(a.i0, b.i1), *p10 = ifm.at(a.i1, b.i0),
                    *p11 = ifm.at(a.i1, b.i1);
      int64_t* out = acc.data() + (static_cast<size_t>(y) * OW + x) * C;
      for (int c = 0; c < C; ++c) {
        out[c] = (p00[c] * w00 + p01[c] * w01 + p10[c] * w10 + p11[c] * w11) * (int64_t{1} << 16);
      }
    }
  }
  return acc;
}

}  // namespace cascader::ethos_u85
