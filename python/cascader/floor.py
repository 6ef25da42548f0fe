"""The floor: the least SRAM any schedule of a model needs, and the operator where it is reached.

Cascades shrink what is live to stripes and rolling buffers, but some tensors are whole in
every schedule:

- **The tensors TFLM sees** (model inputs and outputs, the tensors between NPU segments and CPU
  operators): TFLM hands them to the NPU, and CPU kernels read and write them, whole. They are
  live from their first to their last use; in Shared_Sram they sit in the scratch arena, which
  is the SRAM (`memory.layout`), elsewhere in the slow memory and cost no SRAM. Tensors only CPU
  operators touch are not in the NPU's arena at all: TFLM plans them beside it, and no SRAM
  figure of a frontier point counts them, so neither does the floor.
- **The inputs reductions need whole.** An operator whose output position depends on every row
  and column of an input (a global pool, MEAN, a dense layer, SOFTMAX's maximum and sum) cannot
  produce anything before all of that input exists, and the same holds of every operator
  downstream of one: the squeeze-excite gate depends on all of the features it multiplies.
  When the operator first writes, a tensor it depends on all of is complete; if that operator
  or one after it still reads every element of the tensor, none has been freed, so the tensor
  is whole in memory then (the planner never recomputes rows to free them early).

At each step of the model's execution order (the planner keeps it) the floor adds up the
tensors whole there, each at the 16-byte alignment the layout gives it but the topmost; the
floor is the largest such sum. An operation's output may share bytes with an operand it reads
for the last time (in place, or a cascade's staircase), so the larger of the two counts there.
The result is a lower bound of every frontier point's laid-out SRAM, and equals it where a
whole tensor dominates (a model whose peak is its input and output, say).

Not counted beside a whole tensor: the input window its producer's last block reads. The NPU
reads a job's IFM footprint before it writes that job's OFM block, so an output may run over
the input rows behind its window and the last band of rows over its own window
(`schedule._overlapping_operations`): tflm micro_speech's 10x8 stride-2 convolution writes its
4,000 B output over all of its 1,960 B input in blocks of 5 rows spanning the width, and the
model runs in 4,004 B, this floor, on U55-128. A floor adding that window (200 B there) would
lie above that binary. What the sharing cannot remove is counted: an output position that
reads all of an operand (a dense layer's) keeps the two apart.

**Dedicated_Sram** (the U65's and U85's default): the SRAM is the NPU's fast scratch beside
DRAM, and every feature map, stripe and rolling buffer may live in DRAM (the memory planner
evicts them, `memory.layout`), where the NPU reads and writes it more slowly: a schedule with
every buffer in DRAM takes no SRAM at all, so the floor there is 0 (`cascader.compile(model,
sram=0)` compiles). What the tensors above would hold *with every feature map in SRAM* is
`floor(..., resident=True)`: the least SRAM of the schedules that evict nothing.

A reduction that reads channel by channel (a global pool: each output channel reads only its
own input channel) needs its input whole one channel slice at a time: a depth-sliced cascade
(`_core.plan_depth_cascade`) runs a 1x1 convolution and the pool after it once per slice of 16
channels (the planner's granule), and the convolution's output is never whole, but the
cascade's first part then reads its inputs whole. Such an input counts here as the least of
itself whole and, for each part the chain of channel-by-channel operations before it could
start at, a 16-channel slice of every tensor in between plus that part's inputs whole.

Cost: one pass over the operations with bitsets of buffers and operations, O(operations x live
buffers) big-integer steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .frontend.lowered import FeatureMapView, LoweredOperation, brick_strides, dense_strides, position_reads_all
from .frontend.partition import Partition
from .memory import MemoryConfig
from .schedule import NpuSchedule, memory_schedule, unflattened, without_weight_buffers

ALIGNMENT = 16  # every scratch buffer's (`memory.ScheduledBuffer`)
SLICE_CHANNELS = 16  # the planner's depth slices are multiples of this (`_core.plan_depth_cascade`)


@dataclass(frozen=True)
class Floor:
    """The least SRAM any schedule needs (`bytes`), the operator where it is reached and the
    tensors whole there."""

    bytes: int
    operator: str
    tensors: tuple[str, ...]

    def __repr__(self) -> str:
        return f"Floor({self.bytes:,} B at {self.operator}: {', '.join(self.tensors) or 'nothing whole'})"


def _spans(v: FeatureMapView, size: int) -> bool:
    """The view covers every byte of its buffer (`size` bytes), in its own shape."""
    strides = (brick_strides if v.layout == "NHCWB16" else dense_strides)(v.shape, v.element_size)
    return v.offset == 0 and v.strides == strides and v.shape[0] * v.strides[0] >= size


def _channelwise(lo: LoweredOperation, v: FeatureMapView) -> bool:
    """Each output channel of `lo` reads only the same channel of `v` (a depthwise or pooling
    window, not a convolution's nor a channel sum's)."""
    return (lo.kind == "depthwise" or (lo.kind == "pool" and lo.registers.get("sub_op") != "REDUCE_SUM")) \
        and v.shape[2] == lo.ofm.shape[2]


def _reads_every_element(lo: LoweredOperation, v: FeatureMapView) -> bool:
    """`lo`'s output positions together read every row and column of `v`: no stride skips one."""
    if lo.kind == "elementwise" or v.shape[:2] == (1, 1):
        return True
    if lo.kind not in ("conv", "depthwise", "pool") or v is lo.ifm2:
        return False
    if lo.registers.get("ifm_upscale"):
        return True  # an upsampled input: every row and column is read (repeated)
    k = lo.registers["kernel"]
    top, left, _, _ = lo.registers.get("padding", (0, 0, 0, 0))
    for axis, extent, pad in ((0, k["height"], top), (1, k["width"], left)):
        stride, dilation = k["stride"][axis], k["dilation"][axis]
        if stride > (extent if dilation == 1 else 1):
            return False
        if (lo.ofm.shape[axis] - 1) * stride + extent - pad < v.shape[axis]:
            return False
    return True


def floor(part: Partition, sched: NpuSchedule, resident: bool = False, memory: tuple | None = None) -> Floor:
    """The floor of `sched`, an uncascaded schedule of `part` (see the module docstring), on
    the schedule's target and memory mode: 0 on Dedicated_Sram, where every feature map may
    live in DRAM, unless `resident` (the floor of the schedules that keep every feature map
    but TFLM's in SRAM). `memory`: `memory_schedule` of `sched` without its weight buffers,
    when the caller has it."""
    config = MemoryConfig.for_target(sched.accelerator, sched.system, sched.memory_mode)
    if not (config.shared_sram or resident):
        return Floor(0, "", ())
    lean = without_weight_buffers(sched)
    msched, index, op_steps = memory or memory_schedule(lean, part.graph)
    buffers = msched.buffers
    shapes: dict[int, tuple[int, int, int]] = {}
    for seg in lean.segments:
        shapes.update(seg.segment.shapes)
    lowered = {step: unflattened(sop.lowered, shapes) for sop, step in zip(lean.operations, op_steps)}
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for s, step in enumerate(msched.steps):
        for b in (*step.reads, *step.writes):
            first.setdefault(b, s)
            last[b] = s

    # Per buffer: `full`, the buffers all of which each of its elements depends on; `cover`,
    # those all of which the whole buffer depends on (bitsets of buffers). Per step: what its
    # output depends on all of (`depends`), the buffers it reads every element of, and the
    # steps that read its output.
    full: dict[int, int] = {}
    cover: dict[int, int] = {}
    depends: dict[int, int] = {}
    readers_all: dict[int, int] = {}  # per buffer: a bitset of the steps that read every element of it
    # Per buffer an output position reads all of: the share of it a depth slice holds (1 unless
    # every such reader reads channel by channel, see the module docstring).
    slice_share: dict[int, float] = {}
    readers: dict[int, list[int]] = {}
    outputs: list[list[int]] = []
    for s, step in enumerate(msched.steps):
        lo = lowered.get(s)
        if lo is not None:
            operands = [(v, index[v.buffer]) for v in (lo.ifm, lo.ifm2) if v is not None and v.buffer in index]
            outputs.append([index[lo.ofm.buffer]])
        else:  # a CPU operator or the inputs/outputs pseudo steps: whole tensors, no reduction claimed
            operands = [(None, b) for b in step.reads]
            outputs.append(list(step.writes))
        needs, whole_in = 0, 0
        for v, b in operands:
            readers.setdefault(b, []).append(s)
            needs |= full.get(b, 0)
            if v is not None and _spans(v, buffers[b].size):
                if position_reads_all(lo, v):
                    needs |= cover.get(b, 1 << b)
                    # Sliced only where this reduction is its last reader: a reader after it (a
                    # squeeze-excite MUL) needs it whole again, every channel at once.
                    sliceable = _channelwise(lo, v) and last[b] == s
                    share = min(SLICE_CHANNELS, v.shape[2]) / v.shape[2] if sliceable else 1.0
                    slice_share[b] = max(slice_share.get(b, 0.0), share)
                if _reads_every_element(lo, v):
                    whole_in |= cover.get(b, 1 << b)
                    readers_all[b] = readers_all.get(b, 0) | 1 << s
        depends[s] = needs
        for out in outputs[s]:
            full[out] = full[out] & needs if out in full else needs
            cover[out] = cover.get(out, 1 << out) | whole_in
    # Per step, the steps after it that depend on it (a bitset).
    later: list[int] = [0] * len(msched.steps)
    for s in range(len(msched.steps) - 1, -1, -1):
        for b in outputs[s]:
            for r in readers.get(b, ()):
                if r > s:
                    later[s] |= 1 << r | later[r]

    live_at: list[list[int]] = [[] for _ in msched.steps]
    for b in first:
        if not buffers[b].persistent:
            for s in range(first[b], last[b] + 1):
                live_at[s].append(b)
    # The buffers whole at some step: in SRAM, and seen by TFLM or needed whole by a reduction.
    whole: set[int] = set()
    for s, live in enumerate(live_at):
        here = (1 << s) | later[s]
        whole.update(b for b in live if config.shared_sram or not buffers[b].cpu_visible
                     if buffers[b].cpu_visible or (depends[s] >> b & 1 and readers_all.get(b, 0) & here))
    padded = {b: math.ceil(buffers[b].size / ALIGNMENT) * ALIGNMENT for b in whole}
    writer = {index[lo.ofm.buffer]: lo for lo in lowered.values()}

    def sliced(b: int, here: set[int]) -> int:
        """The least bytes buffer `b`, whole at this step only for channel-by-channel
        reductions, can take in a depth-sliced cascade ending here (the module docstring):
        the slices of the tensors of a chain back from it, plus the inputs of the chain's
        first part that are not whole here already."""
        best, slices, t = padded[b], 0, b
        while t in writer and not buffers[t].cpu_visible:
            slices += math.ceil(buffers[t].size * slice_share.get(t, SLICE_CHANNELS / writer[t].ofm.shape[2])
                                / ALIGNMENT) * ALIGNMENT
            lo = writer[t]
            inputs = [index[v.buffer] for v in (lo.ifm, lo.ifm2) if v is not None and v.buffer in index]
            best = min(best, slices + sum(math.ceil(buffers[a].size / ALIGNMENT) * ALIGNMENT
                                          for a in inputs if a not in here))
            if len(inputs) != 1 or not _channelwise(lo, lo.ifm) or lo.ofm.shape[2] <= SLICE_CHANNELS:
                break
            t = inputs[0]
        return best

    # A whole buffer holds its bytes from its first use to its last, in every schedule: a
    # cascade runs its operations within that span too (cascades are runs of consecutive
    # operations), so at each step all the whole buffers live there are live together.
    best = (0, "", ())
    for s, step in enumerate(msched.steps):
        here = [b for b in live_at[s] if b in whole]
        if not here:
            continue
        counted = {b: sliced(b, set(here)) if slice_share.get(b, 1.0) < 1 else padded[b] for b in here}
        # The topmost whole buffer needs no padding after it.
        total = sum(counted.values()) - max((padded[b] - buffers[b].size for b in here if counted[b] == padded[b]),
                                            default=0)
        lo = lowered.get(s)
        out = index[lo.ofm.buffer] if lo is not None else None
        if out in whole:
            # Its output may be written over an operand that dies here (in place, or a
            # staircase), unless one output position reads all of that operand.
            shared = [min(padded[out], padded[index[v.buffer]]) for v in (lo.ifm, lo.ifm2)
                      if v is not None and v.buffer in index and index[v.buffer] in here and index[v.buffer] != out
                      and last[index[v.buffer]] == s
                      # An elementwise output element reads its own operand element only, even
                      # where one position is the whole map (a 1 x 1 x N vector).
                      and (not position_reads_all(lo, v) or (lo.kind == "elementwise" and v.shape == lo.ofm.shape))
                      and (lo.kind == "elementwise" or not (buffers[index[v.buffer]].cpu_visible and buffers[out].cpu_visible))]
            total -= max(shared, default=0)
        if total > best[0]:
            best = (total, _operator_name(step.name, part), tuple(buffers[b].name for b in here))
    return Floor(*best)


def _operator_name(step_name: str, part: Partition) -> str:
    """The TFLite operator of a memory-schedule step: "7:SOFTMAX(max)" as it is, "cpu 3" as
    "3:RESHAPE (CPU)"."""
    if step_name.startswith("cpu "):
        i = int(step_name[4:])
        return f"{i}:{part.graph.operators[i].opcode} (CPU)"
    return step_name
