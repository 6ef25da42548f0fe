#include "cascader/perf/npu_op.hpp"

namespace cascader {

NpuBlockType block_type_of(NpuOpType t) {
  switch (t) {
    case NpuOpType::Conv2D: return NpuBlockType::ConvolutionMxN;
    case NpuOpType::DepthwiseConv2D: return NpuBlockType::ConvolutionDepthWise;
    case NpuOpType::MaxPool:
    case NpuOpType::AvgPool: return NpuBlockType::Pooling;
    case NpuOpType::FullyConnected: return NpuBlockType::VectorProduct;
    case NpuOpType::ReduceSum: return NpuBlockType::ReduceSum;
    case NpuOpType::Add:
    case NpuOpType::Sub:
    case NpuOpType::Mul:
    case NpuOpType::Minimum:
    case NpuOpType::Maximum:
    case NpuOpType::Dma: return NpuBlockType::ElementWise;
  }
  return NpuBlockType::ElementWise;
}

bool is_elementwise(NpuOpType t) {
  return t == NpuOpType::Add || t == NpuOpType::Sub || t == NpuOpType::Mul || t == NpuOpType::Minimum ||
         t == NpuOpType::Maximum;
}

}  // namespace cascader
