// The planner's graph: NPU operations (Parts) over feature maps (tensors), in execution order.
//
// A Part is one lowered NPU operation: the NpuOp the cycle model costs (whole-tensor shapes),
// its feature-map inputs with one Propagator each, and its output. A tensor is one buffer; it
// can be cascaded through (kept as a rolling window of rows inside a cascade) only when its
// writers write it whole, or each a slice of its channels over all its rows and columns (a
// concatenation's inputs, a channel pad's copy and border: a cascade then holds all of them),
// and every reader reads it whole (`cascadable`): a row slice or a buffer re-viewed in another
// shape cannot. A part's op is then its own slice's (its propagators map regions of rows and
// columns, the same in every channel slice). Parts that are not `stripable` (their output
// rows are not a bounded window of their input rows: a fully connected layer, a softmax over a
// re-viewed tensor) run whole, outside cascades.
//
// Built from Python (cascader.planner) from the lowered model, or by hand.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cascader/graph/propagator.hpp"
#include "cascader/perf/npu_op.hpp"

namespace cascader {

class BlockConfigCache;

struct PlanTensor {
  std::string name;
  std::array<int64_t, 4> shape{1, 1, 1, 1};  // NHWC
  int64_t bytes = 0;                         // the whole buffer as laid out
  bool cascadable = true;
  // A tensor TFLM sees (a model or CPU operator's input or output): a cascade's output may
  // not be written over an input it consumes when both are (TFLM would see two of its tensors
  // share bytes; cascader.schedule._staircases).
  bool cpu_visible = false;
  std::string repr() const;
};

struct Part {
  std::string name;
  NpuOp op;  // weights where they live (flash); a plan may buffer them (PlanGraph)
  std::vector<int> inputs;               // feature-map tensors (not weights)
  std::vector<Propagator> propagators;   // one per input
  int output = -1;
  // The operand (0 IFM, 1 IFM2) `inputs[0]` is; the inputs fill the operands in order from it.
  // 1 where the IFM is a constant read element for element with the OFM and the IFM2 a feature
  // map the operation broadcasts (a 1x1 RESIZE: an ADD of its input to zeros of its output's
  // shape, the NPU broadcasting only its second operand).
  int first_operand = 0;
  bool stripable = true;
  // In a cascade the part computes rows and columns of its output from multiples of this on
  // (an upscaling operation: a stripe of a 2x nearest resize starts at an even row, where an
  // input row's first copy lands). A sink's stripes and column bands must be multiples of it.
  int alignment = 1;
  // The part can compute a slice of its output channels alone, whole in H and W (a depth-sliced
  // cascade, plan_depth_cascade): an operation whose output is its buffer whole and that reads no
  // constant map the slice would have to narrow (a convolution's weights are sliced with it).
  bool channel_sliceable = false;
  // A part run alone may copy its weights into SRAM first. When the scheduler has already
  // chosen how (cascader.planner sets these from the scheduled operation: one buffer, or depth
  // slices double-buffered), a plan takes that cost and those bytes as they are, so the plan
  // and the binary agree; `buffered_cycles` < 0 leaves it to the cycle model (one copy of the
  // whole streams). Not `bufferable`: the scheduler found no buffer worth it.
  bool bufferable = true;
  double buffered_cycles = -1;
  // The cycles of the scheduled operation over whole tensors, weights in place (< 0: the cycle
  // model's for `op`). They differ where the operation runs whole in another shape than the
  // one it stripes in: a per-element copy streamed 16 channels wide.
  double whole_cycles = -1;
  int64_t buffered_bytes = 0;
  // A double buffer of depth slices: `buffered_bytes` is its first slot (filled while the
  // operation before runs), this its second, live only while the part runs, with the copy of
  // an input staged in SRAM (cascader.input_staging, which a buffered part takes too). The
  // proposal layout counts it; the DP's memory bound does not (the allocator may shrink the
  // buffer to one slot, allocation.fit_weight_buffers, or read the input in place: the bound
  // stays a lower bound of any layout).
  int64_t buffered_second_slot_bytes = 0;
  int64_t weight_stream_bytes() const { return op.weight_bytes + op.scale_bytes; }
  std::string repr() const;
};

struct PlanGraph {
  // Where a cascade may copy its parts' weights (the fast arena's memory): a plan option, so
  // the trade between weight buffers and feature maps is made inside the proposal search.
  MemoryArea weight_buffer_memory = MemoryArea::Sram;
  std::vector<PlanTensor> tensors;
  std::vector<Part> parts;                 // execution order
  std::vector<int> inputs, outputs;        // live from the start / to the end
  // The block configs chosen for the stripes of its parts, shared by every StripeCoster of the
  // graph (the proposal search's workers, the lean proposals, each cascade striped again for a
  // layout): each stripe shape's block is a search of thousands of blocks, made once per graph.
  // Thread-safe; a copy of the graph shares it (a choice depends on the query and target alone).
  std::shared_ptr<BlockConfigCache> block_configs;

  PlanGraph();
  int add_tensor(PlanTensor t);
  int add_part(Part p);
  // Checks indices and shapes; throws InvalidArgument naming the first problem.
  void validate() const;

  // Derived once per graph (call after the last add): producers and consumers by position.
  struct Uses {
    std::vector<std::vector<int>> producers, consumers;  // part positions per tensor
    std::vector<int> first, last;                        // live interval in part positions
  };
  Uses uses() const;
};

}  // namespace cascader
