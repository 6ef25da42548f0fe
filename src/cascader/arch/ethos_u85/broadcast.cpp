#include "cascader/arch/ethos_u85/broadcast.hpp"

namespace cascader::ethos_u85 {

std::array<int, 3> broadcast_extent(int mode, int H, int W, int C) {
  return {(mode & 1) ? 1 : H, (mode & 2) ? 1 : W, (mode & 4) ? 1 : C};
}

sim::Dense broadcast_to(const sim::Dense& d, int H, int W, int C) {
  sim::Dense out;
  out.h = H;
  out.w = W;
  out.c = C;
  out.v.resize(static_cast<size_t>(H) * W * C);
  for (int y = 0; y < H; ++y) {
    for (int x = 0; x < W; ++x) {
      const int64_t* in = d.at(d.h == 1 ? 0 : y, d.w == 1 ? 0 : x);
      int64_t* o = out.v.data() + (static_cast<size_t>(y) * W + x) * C;
      for (int c = 0; c < C; ++c) o[c] = in[d.c == 1 ? 0 : c];
    }
  }
  return out;
}

}  // namespace cascader::ethos_u85
