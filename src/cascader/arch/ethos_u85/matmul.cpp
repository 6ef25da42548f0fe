#include "cascader/arch/ethos_u85/matmul.hpp"

#include "cascader/sim/register_file.hpp"

namespace cascader::ethos_u85 {

std::vector<int64_t> matmul(const sim::NpuOperation& op, const sim::Dense& ifm, const sim::Dense& ifm2) {
  if (op.kernel.width != 1 || op.kernel.height != 1 || op.kernel.stride_x != 1 || op.kernel.stride_y != 1) {
    sim::command_stream_error(op.word_offset, "a matrix multiply (weights from IFM2) needs a 1x1 kernel, stride 1");
  }
  if (!op.global_scale) {
    sim::command_stream_error(op.word_offset, "a matrix multiply (weights from IFM2) has no scale stream to scale per channel");
  }
  const int OH = ifm.h, OW = ifm.w, OC = ifm2.w, K = ifm.c;
  std::vector<int64_t> acc(static_cast<size_t>(OH) * OW * OC);
  for (int h = 0; h < OH; ++h) {
    for (int i = 0; i < OW; ++i) {
      const int64_t* a = ifm.at(h, i);
      for (int j = 0; j < OC; ++j) {
        const int64_t* b = ifm2.at(h, j);
        int64_t s = 0;
        for (int k = 0; k < K; ++k) s += a[k] * b[k];
        acc[(static_cast<size_t>(h) * OW + i) * OC + j] = s;
      }
    }
  }
  return acc;
}

}  // namespace cascader::ethos_u85
