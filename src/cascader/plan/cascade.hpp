// Cascades: a run of consecutive parts executed stripe by stripe.
//
// The last part's output (the sink) is produced in stripes of `stripe_height` rows. Going
// backwards through the cascade, each stripe's rows propagate to the rows every internal
// tensor must hold (the union over its readers in the cascade: residual blocks, whose input
// feeds both a convolution and the ADD, cascade too). Internal tensors are rolling buffers: a
// row is computed once, when a stripe first needs it, and kept while a later stripe still
// does, so a buffer holds the largest window of rows any stripe needs. Cycles are the cycle
// model's, per part and stripe (each stripe re-reads the part's weights, as the NPU does).
//
// Column bands split the sink's width too: the whole H-striped cascade runs once per band of
// columns, over the columns that band needs of every tensor (the halo columns at a band's edge
// are computed by both neighbours). Rolling buffers are then only as wide as a band's columns,
// at the price of the halo recompute and of more, narrower operations.
//
// Tensors that enter the cascade from outside or leave it are whole buffers; the proposal DP
// accounts for them. The sink may be written over an input that dies in the cascade, as a
// staircase (memory/staircase.hpp): rows bands of one column band only, since every band reads
// the input from its top again.
//
// Depth slices split the channels instead (plan_depth_cascade): every part runs whole in H and W
// once per slice of the sink's channels, its first part reading its inputs' every channel (a 1x1
// convolution computing a slice of its output channels from its weights' slice) and every later
// part channel by channel (depthwise, pooling, elementwise). Internal tensors then hold one slice
// of channels over all their rows and columns: a 1x1 convolution widening into a global pool
// holds 16 of its channels at a time, where row stripes cannot help (the pool reads every row).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cascader/arch/arch_config.hpp"
#include "cascader/common/flat_map.hpp"
#include "cascader/graph/plan_graph.hpp"
#include "cascader/perf/cycle_model.hpp"

namespace cascader {

// A region of a tensor's rows [begin, end) and columns [column_begin, column_end).
struct RowsColumns {
  int64_t begin = 0, end = 0;
  int64_t column_begin = 0, column_end = 0;
};

// What part `k` reads to compute `out` of its output: per input (at most two, IFM and IFM2) the
// region its propagator gives, cropped to the input, and the padding (top, left, bottom, right)
// where the first input's region reaches past that input's edges. The cost model and the
// stripes of the binary both take their shapes and padding from here.
struct StripeInputs {
  std::array<RowsColumns, 2> regions;
  int count = 0;
  Padding padding;
};
StripeInputs stripe_inputs(const PlanGraph& graph, int k, const RowsColumns& out, int inputs = 2);

// One NPU operation of a cascade: part `part` computing rows [begin, end) and columns
// [column_begin, column_end) of its output; `inputs` what it reads (recorded runs only).
struct StripeRun {
  int part = 0;
  int64_t begin = 0, end = 0;
  int64_t column_begin = 0, column_end = 0;
  StripeInputs inputs;
  // Output channels [channel_begin, channel_end) in a depth-sliced cascade (channel_end -1:
  // all); its inputs read through a channel-local propagator are those same channels.
  int64_t channel_begin = 0, channel_end = -1;
};

// An internal tensor's rolling buffer: `rows` x `columns` of the tensor's elements.
struct RollingBuffer {
  int tensor = 0;
  int64_t rows = 0, columns = 0;
  int64_t bytes = 0;  // as the planner counts it: the tensor's bytes per element, rounded up to 16
  int64_t channels = 0;  // channels held: one depth slice of a depth-sliced cascade (0: all)
};

struct CascadePlan {
  int first = 0, last = 0;    // parts [first, last)
  int stripe_height = 0;      // sink rows per stripe (its height: one stripe)
  int stripes = 0;
  int column_bands = 1;       // the sink's columns in this many bands, each a pass over all stripes
  // The sink's channels in this many slices of `slice_depth` (the last may be shallower), each
  // a pass over every part whole in H and W (plan_depth_cascade); 1: all channels at once.
  int depth_slices = 1;
  int64_t slice_depth = 0;
  int64_t buffer_bytes = 0;   // rolling buffers of the internal tensors
  // With buffered weights: every part's weight and scale streams are copied into one SRAM
  // buffer when the part first runs and read from there by every later stripe.
  bool buffered_weights = false;
  int64_t weight_buffer_bytes = 0;
  // Beyond `weight_buffer_bytes` (filled while the operation before the cascade runs), the
  // second slot of a part's double buffer, live during the cascade only (Part::
  // buffered_second_slot_bytes): in the proposal layout, not in cascade_memory.
  int64_t weight_second_slot_bytes = 0;
  std::vector<RollingBuffer> buffers;
  // The input the sink may be written over, `staircase_shift` bytes below it (-1: none).
  int staircase_tensor = -1;
  int64_t staircase_shift = 0;
  double cycles = 0;
  int operations = 0;         // NPU operations: non-empty (part, stripe) pairs
  std::vector<StripeRun> runs;  // those operations in execution order (when asked for)
  std::string repr() const;
};

// Costs a part on a band of its output rows, cached. Not thread-safe.
class StripeCoster {
 public:
  // Its block configs are the graph's (PlanGraph::block_configs), shared with the graph's other costers.
  StripeCoster(const PlanGraph& graph, const ArchConfig& arch)
      : graph_(graph), arch_(arch), blocks_(*graph.block_configs) {}
  // Where part `k` reads its weights on one run: where they live, copied into the buffer
  // first (the DMA is costed), or already in the buffer.
  enum class Weights { InPlace, CopiedIn, Buffered };
  // Output rows [begin, end) and columns [column_begin, column_end) of part `k` (column_end
  // -1: all); the inputs' regions and edge padding follow from the propagators.
  double cost(int k, int64_t begin, int64_t end, Weights weights = Weights::InPlace, int64_t column_begin = 0,
              int64_t column_end = -1);
  // Part `k` whole in H and W on `channels` of its output channels, weights in place: its
  // weight and scale streams that slice's share, every input a channel-local propagator reads
  // as deep as the slice.
  double cost_channels(int k, int64_t channels);

 private:
  const PlanGraph& graph_;
  const ArchConfig& arch_;
  BlockConfigCache& blocks_;
  // part, rows, columns, top/bottom/left/right padding, weights
  using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int>;
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  FlatMap<Key, double, KeyHash> cache_;
};

// The cascade of parts [first, last) with the sink striped `stripe_height` rows at a time, or
// nullopt when those parts cannot cascade (a part that is not stripable, a tensor produced
// inside that escapes before the sink, an internal tensor that is not cascadable or that a
// part before `first` writes a channel slice of), or when
// `buffer_weights` is asked of parts without weights. `column_bands` > 1 also splits the
// sink's width (clamped to its width; a single part or a single stripe is never split).
std::optional<CascadePlan> plan_cascade(const PlanGraph& graph, const PlanGraph::Uses& uses, int first, int last,
                                        int stripe_height, StripeCoster& coster, bool buffer_weights = false,
                                        bool record_runs = false, int column_bands = 1);

// Whether a propagator maps every channel to that same channel (depthwise, pooling, an
// elementwise operand as deep as the output).
bool channel_local(const Propagator& p);

// Whether parts [first, last) can run as a depth-sliced cascade (plan_depth_cascade's
// conditions on the graph alone). O(parts in it x their inputs).
bool depth_sliceable(const PlanGraph& graph, const PlanGraph::Uses& uses, int first, int last);

// The cascade of parts [first, last) run `depth_slices` times, once per slice of the sink's
// channels (16-channel multiples, all but the last as deep), every part whole in H and W; or
// nullopt when it cannot: fewer than two parts, a first part that reads every input channel
// by channel (nothing to gain over rows), a part not `Part::channel_sliceable`, an
// internal tensor (the outputs of all parts but the sink) that is not cascadable, escapes
// the cascade, has several writers, is not as deep as the sink, or is read through a
// propagator that is not channel-local, or when that many slices of 16-channel multiples do
// not make the sink's depth or are not whole blocks of a part's fixed OFM block depth (its
// weights are encoded for that block depth), or when a part has no block config for a slice.
// Its internal tensors are buffers of one slice over all rows and
// columns; its weights are read in place (each slice reads its own streams). O(parts x slices).
std::optional<CascadePlan> plan_depth_cascade(const PlanGraph& graph, const PlanGraph::Uses& uses, int first,
                                              int last, int depth_slices, StripeCoster& coster,
                                              bool record_runs = false);

// plan_cascade for every first part in [first_lo, first_hi] (first_hi < last) at once: element
// first - first_lo. The cascades share their sink, and a part's stripes propagate back from it
// through the parts after it only, so one simulation of the longest that can cascade gives
// them all (cycles summed in the same order as each alone: the same plans, bit for bit).
std::vector<std::optional<CascadePlan>> plan_cascades(const PlanGraph& graph, const PlanGraph::Uses& uses,
                                                      int first_lo, int first_hi, int last, int stripe_height,
                                                      StripeCoster& coster, bool buffer_weights = false,
                                                      int column_bands = 1);

}  // namespace cascader
