#include "cascader/arch/ethos_u85/argmax_pool.hpp"

#include "cascader/sim/register_file.hpp"

namespace cascader::ethos_u85 {

std::vector<int64_t> argmax_pool(const sim::NpuOperation& op, const sim::Dense& ifm, int OH, int OW) {
  const bool along_x = static_cast<sim::PoolMode>(op.sub_op) == sim::PoolMode::ArgmaxX;
  const auto& k = op.kernel;
  if ((along_x ? k.height : k.width) != 1) {
    sim::command_stream_error(op.word_offset, "an ARGMAX window must be one row (ARGMAX_X) or one column (ARGMAX_Y)");
  }
  const int taps = along_x ? k.undilated_width() : k.undilated_height();
  const int step = along_x ? k.dilation_x : k.dilation_y;
  const int C = ifm.c;
  std::vector<int64_t> acc(static_cast<size_t>(OH) * OW * C);
  for (int oy = 0; oy < OH; ++oy) {
    for (int ox = 0; ox < OW; ++ox) {
      const int y0 = oy * k.stride_y - op.padding.top, x0 = ox * k.stride_x - op.padding.left;
      for (int c = 0; c < C; ++c) {
        int best = 0;
        int64_t best_value = 0;
        for (int t = 0; t < taps; ++t) {
          const int y = along_x ? y0 : y0 + t * step, x = along_x ? x0 + t * step : x0;
          if (y < 0 || y >= ifm.h || x < 0 || x >= ifm.w) {
            sim::command_stream_error(op.word_offset, "an ARGMAX window reaching outside the IFM is not simulated");
          }
          const int64_t v = ifm.at(y, x)[c];
          if (t == 0 || v > best_value) {
            best = t;
            best_value = v;
          }
        }
        acc[(static_cast<size_t>(oy) * OW + ox) * C + c] = static_cast<int64_t>(best) << 16;
      }
    }
  }
  return acc;
}

}  // namespace cascader::ethos_u85
