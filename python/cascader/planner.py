"""The cascading planner: the SRAM-versus-cycles frontier of a model.

    frontier = cascader.plan("model.tflite", accelerator="ethos-u55-128")
    frontier.points[0]            # the least SRAM; .points[-1] the fewest cycles
    frontier.select(256 * 1024)   # the fastest point within 256 KiB

The model is lowered and scheduled as `cascader.compile` does (uncascaded), then turned into
the C++ planner's graph (`_core.PlanGraph`): one Part per NPU operation with its cycle-model
op and one Propagator per input, and one tensor per buffer; CPU operators are parts that
cannot stripe. `_core.generate_proposals` returns the Pareto set of proposals under the
planner's memory model (rolling buffers plus the whole tensors live across each cascade); each
surviving proposal is then laid out by the exact allocator, and that layout's SRAM is the
point's `sram_bytes`. On Dedicated_Sram, where every feature map may live in DRAM, the frontier
also holds the fastest proposals allocated under smaller budgets with feature maps moved to
DRAM as the compile moves them, the fastest down to none in SRAM (`evicting_points`), each
costed with that slower traffic, and so does the schedule with the padded maps that pay as
bricks in DRAM stored so, which the compile tries too (`evicted_bricks_points`).

`cascader.compile(model, sram=...)` turns the selected point into a binary: `stripes.py` builds
its stripe-level operations and rolling buffers from the proposal. The compiled binary carries
one figure, the estimator's; the compiled schedule's `total_cycles` is the planner's cost of what
was compiled (the planner and the stripes share the one cycle model), which differs from the
binary's stripes-as-run estimate where the binary's DMAs hide behind other operations than the
planner assumes (a cascade's first weight copies, the operation after a cascade: up to 2.4% on
zoo ResNet-8).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Union

from . import _core
from . import memory as mem
from .allocation import Lean, allocate, eviction_cost
from .arch import Accelerator, MemoryMode
from .errors import InfeasibleError
from .evicted_blocks import reblocked_allocations
from .floor import floor
from .gc_pause import paused_gc
from .frontend.lowered import (FeatureMapView, LoweredOperation, box_origin, channel_slice, dense_strides,
                               follows_ofm, round16, views_whole)
from .lowering import lower
from .schedule import (NpuSchedule, _Target, _buffer_size, memory_schedule, unflattened,
                       weight_buffer_bytes, with_overlapping_blocks, without_weight_buffers)
from .scheduling import evicted_bricks, schedule
from .stripes import cascaded_schedule, is_striped, proposal_schedules, with_buffered_weights
from .tflite import ModelLike, as_model
from .workers import capped_workers

STRIPABLE_KINDS = ("conv", "depthwise", "pool", "elementwise")
# The IFM upscale register's modes: nearest neighbour (a 2x RESIZE_NEAREST_NEIGHBOR: each IFM
# row and column read twice) and zero insertion (a stride-2 TRANSPOSE_CONV).
NEAREST_UPSCALE, ZEROS_UPSCALE = 1, 2
UPSCALE_FACTOR = 2  # both modes double the rows and columns
# The least SRAM (`lay_out_leanest`): of the LEAST_SCORED leanest proposals by the planner's
# bound, LEAST_LAID_OUT by that bound and as many by the one-step score are laid out stripe by
# stripe, as the compile does. Scoring a proposal costs about 0.5 ms, laying it out 20-60 ms.
# MobileNetV1-0.75's least (158,976 B) is not among the first 8 by bound (the least of those is
# 165,888 B), and is among the first 12; 16 gave every shared model the least an unbounded
# search gives.
LEAST_SCORED = 16
LEAST_LAID_OUT = 3
# A score's exact layout (`_layout_srams`) searches at most this many nodes, as the arena
# layout's fit checks do: a score ranks proposals, and one search that does not settle within
# them made a plan eight times slower (zoo lstm_kws on U65-256: one of its 35 proposals, 1,308
# buffers between a 4,960 B bound and the 5,024 B its greedy layout takes, searched 200,000
# nodes for 1.9 s and found nothing lower; nor do 1,000,000). Every score of the plans of the
# shared models and of the zoo's on U55-128 and U65-256 is the same SRAM as with 200,000.
SCORE_NODE_LIMIT = 10_000
# Dedicated_Sram: the budgets, as shares of a fast proposal's SRAM, under which that proposal
# is laid out again with feature maps moved to DRAM (`evicting_points`), the fastest down to
# none in SRAM. A greedy allocation with eviction takes 2-6 ms on MobileNetV2-224 (one round
# per buffer evicted; none under a budget of 0: every buffer goes at once).
EVICTING_SHARES = (3 / 4, 1 / 2, 1 / 4, 1 / 8, 1 / 16, 0.0)
# Budgets below this (but 0) are not laid out: a few hundred bytes of SRAM are not worth a
# layout's time (zoo lstm_kws's fastest proposal takes 1,024 B; its 767 buffers took 280 ms to
# lay out under shares of that).
EVICTING_LEAST_BUDGET = 2048
# The proposals but the fastest are laid out under the first this many shares only: the least
# SRAM is the fastest's (a slower one's smaller budgets took 40-140 ms each on coral movenet,
# of 1,670 stripe operations).
EVICTING_SLOWER_SHARES = 3
# The proposals laid out so: the fastest, and the next while the allocations' stripe operations
# together stay within EVICTING_LAYOUT_WORK (coral movenet's fastest proposal has 1,670, its 12
# allocations took 700 ms: the fastest only). `cascader.compile` tries the 6 fastest
# (`compiler.EVICTING_CANDIDATES`). Zoo MobileNetV2-224 on U65-256: the evicting points of 6
# proposals took 118 ms of its plan's 233, of 4 77 ms, of the fastest alone 27 ms; tf2
# MobileNetV2-224's frontier has 13 points with 6, 10 with 2, 8 with the fastest alone. Two:
# the whole plan of zoo MobileNetV2-224 on U65-256 takes 174 ms CPU (6: 297 ms; before DRAM points
# of cascades, 136 ms), and the same Vela points are dominated as with 6 (tf2's Size).
EVICTING_PROPOSALS = 2
EVICTING_LAYOUT_WORK = 20_000


@dataclass(frozen=True)
class PlanOptions:
    """Planner options.

    Defaults from `python -m cascader.bench.plan`: stripe heights above 8 rows changed neither
    the least SRAM nor the cycles at 1.3x it on MobileNetV2-224, ResNet (MLPerf Tiny), person
    detection and MobileNetV1-0.75, and cost a third of the planning time (54 -> 36 ms on
    MobileNetV2-224); cascades longer than 12 parts changed nothing there either.
    """

    max_cascade_parts: int = 12
    stripe_heights: tuple[int, ...] = (1, 2, 4, 8)
    max_proposals: int = 48
    # Cascades of one-row stripes may also split their width into this many column bands (1:
    # rows only). Bands took MobileNetV2-224's least SRAM from 301 to 247 KiB (Vela Size: 354).
    column_bands: tuple[int, ...] = (1, 2, 4)
    # Cascades may also run each part whole once per slice of the sink's channels, in these many
    # slices (`_core.plan_depth_cascade`; empty: none): a 1x1 convolution widening into a global
    # pool, say, where row stripes cannot help.
    depth_slices: tuple[int, ...] = (2, 4, 8)

    def to_core(self) -> "_core.ProposalOptions":
        o = _core.ProposalOptions()
        o.max_cascade_parts, o.stripe_heights, o.max_proposals = (self.max_cascade_parts, list(self.stripe_heights),
                                                                  self.max_proposals)
        o.column_bands = list(self.column_bands)
        o.depth_slices = list(self.depth_slices)
        return o


@dataclass
class PlanPoint:
    """One proposal: the SRAM its exact layout takes, its cycles, and the proposal itself."""

    sram_bytes: int | None  # None: not laid out (a `Frontier.candidates` point its bound shows dominated)
    cycles: float
    proposal: Any  # _core.Proposal
    estimated_bytes: int  # the planner's own peak (a lower bound of sram_bytes)
    least_scratch: bool = False  # of the least-scratch lowering (`lowering.lower(..., least_scratch=True)`)
    # Dedicated_Sram: laid out with some feature maps in DRAM to fit `sram_bytes` (its cycles
    # add what their slower traffic costs, `evicting_points`); else every one is in SRAM.
    evicting: bool = False
    # Of the schedule with the padded maps bricked for DRAM (`evicted_bricks_points`): its
    # proposal is of that schedule's planner graph, `graph`, not the frontier's.
    evicted_bricks: bool = False
    graph: Any = field(default=None, repr=False)  # _core.PlanGraph, where not the frontier's

    @property
    def cascades(self) -> int:
        return sum(1 for c in self.proposal.cascades if is_striped(c))

    def __repr__(self) -> str:
        sram = "not laid out" if self.sram_bytes is None else f"{self.sram_bytes:,} B"
        return (f"PlanPoint(sram={sram}, cycles={self.cycles:,.0f}, "
                f"{self.cascades} cascades of {len(self.proposal.cascades)} groups"
                f"{', feature maps in DRAM' if self.evicting else ''}"
                f"{', padded maps as bricks' if self.evicted_bricks else ''})")


class Stages:
    """Wall and CPU seconds (`time.process_time`: every thread's, the weight encoders' pool
    included) of each stage of a `plan` call, in the order they ran: `python -m
    cascader.bench.plan --stages` prints them. A stage timed twice adds up."""

    def __init__(self) -> None:
        self.seconds: dict[str, tuple[float, float]] = {}
        self._mark = (time.perf_counter(), time.process_time())

    def lap(self, stage: str) -> None:
        """The time since the last lap (or since made) goes to `stage`."""
        now = (time.perf_counter(), time.process_time())
        wall, cpu = self.seconds.get(stage, (0.0, 0.0))
        self.seconds[stage] = (wall + now[0] - self._mark[0], cpu + now[1] - self._mark[1])
        self._mark = now


@dataclass
class Frontier:
    """The Pareto frontier of a model's proposals, by increasing SRAM.

    `compiled`: the points are binaries (`cascader.plan`'s `CompiledPoint`s: each point's SRAM
    and cycles are its binary's, on the estimator), else the planner's predictions
    (`PlanPoint`s, `planner.plan`).
    """

    points: list[Any]  # PlanPoint, or compiler.CompiledPoint when `compiled`
    graph: Any  # _core.PlanGraph
    seconds: float  # `plan`: the whole call, model reading, lowering and scheduling included
    accelerator: str
    notes: list[str] = field(default_factory=list)
    # Every proposal, the dominated ones too: a proposal dominated by its planned bound may
    # still lay out in less than the one dominating it (the compile's least SRAM looks). Those
    # of `plan` are scored but the ones a scored one dominates by their bound (their
    # `sram_bytes` None, `_core.undominated_srams`).
    candidates: list[PlanPoint] = field(default_factory=list, repr=False)
    scored: bool = False  # the points' SRAM is their layout's (else the planner's own bound)
    # The planner's own part of `seconds`: from the uncascaded schedule to the frontier (the
    # stages before it are the compile's too).
    planner_seconds: float = 0.0
    compiled: bool = False
    # The least SRAM any schedule of the model needs, and the operator where it is reached
    # (`floor.floor`): the frontier's least point against it measures the planner.
    floor_bytes: int = 0
    floor_operator: str = ""
    # The floor with every feature map but TFLM's in SRAM (`floor(..., resident=True)`): the
    # floor itself but on Dedicated_Sram, where that is 0.
    resident_floor_bytes: int = 0
    # The least-SRAM point that keeps every feature map but TFLM's in SRAM (`plan`'s frontiers;
    # on Dedicated_Sram the points with feature maps in DRAM may dominate it).
    resident: Any = None
    # Each stage's (wall, CPU) seconds (`Stages`), for `plan`'s frontiers.
    stages: dict[str, tuple[float, float]] = field(default_factory=dict, repr=False)

    def select(self, budget: int | None) -> Any:
        """The fastest point whose SRAM fits `budget` (None: unlimited).

        Raises InfeasibleError naming the smallest SRAM on the frontier when none fits.
        """
        fitting = [p for p in self.points if budget is None or p.sram_bytes <= budget]
        if not fitting:
            least = self.points[0].sram_bytes
            raise InfeasibleError.below(least, budget, "the leanest proposal")
        return min(fitting, key=lambda p: (p.cycles, p.sram_bytes))

    def __repr__(self) -> str:
        lo, hi = self.points[0], self.points[-1]
        kind = "compiled" if self.compiled else "planned"
        return (f"Frontier({len(self.points)} {kind} points on {self.accelerator}: {lo.sram_bytes:,} B at "
                f"{lo.cycles:,.0f} cycles .. {hi.sram_bytes:,} B at {hi.cycles:,.0f} cycles; floor {self.floor_bytes:,} B "
                f"at {self.floor_operator}; made in "
                f"{self.seconds * 1000:.0f} ms, {self.planner_seconds * 1000:.0f} ms of it the planner's)")


def _propagator(lo: LoweredOperation, view: FeatureMapView, second: bool,
                box: tuple[int, int, int] | None = None) -> "_core.Propagator":
    """The propagator of operand `view`; `box`: the (origin, steps) of the box of its buffer
    it reads in place (`frontend.lowered.box_origin`): the regions of the box, every step-th
    row and column of the buffer from the origin on."""
    p = _operand_propagator(lo, view, second)
    if box is not None:
        axes = p.axes
        for axis, origin, step, n in zip((1, 2, 3), box[0], (*box[1], 1), view.shape):
            m = axes[axis]
            # Box elements [a*o + c, a*o + c + a*e + b) are buffer elements origin + step * i.
            m.offset_bias, m.extent_bias = step * m.offset_bias + origin, step * (m.extent_bias - 1) + 1
            m.scale, m.step = step * m.scale, step
            m.lo, m.hi = origin, origin + step * (n - 1) + 1  # past the box, the operation pads
        p.axes = axes
    return p


def _operand_propagator(lo: LoweredOperation, view: FeatureMapView, second: bool) -> "_core.Propagator":
    if lo.registers.get("ifm_upscale") == NEAREST_UPSCALE:
        # Its window over the input repeated twice (a nearest resize's 1x1, a bilinear's 2x2 sums).
        p = _window_propagator(lo, view)
        axes = p.axes
        for axis in (1, 2):
            axes[axis].divisor = UPSCALE_FACTOR
        p.axes = axes
        return p
    if lo.registers.get("ifm_upscale") == ZEROS_UPSCALE:
        k, (top, left, _, _) = lo.registers["kernel"], lo.registers["padding"]
        return _core.Propagator.transposed(k["height"], k["width"], top, left, view.shape[2], 2)
    if second and lo.registers.get("weights_ifm2"):
        # A matrix product's IFM2 (the Ethos-U85's weights from IFM2, OH x OC x K: see
        # lower_batch_matmul._multiply): OFM row h reads IFM2 row h, every column and channel.
        return _reads_whole({2: view.shape[1], 3: view.shape[2]})
    if lo.kind == "dma":  # a gather or scatter: any output row may need any row of its operands
        return _reads_whole({1: view.shape[0], 2: view.shape[1], 3: view.shape[2]})
    if lo.kind == "elementwise":
        operand = (1, *view.shape)
        if second:
            bshape = tuple(1 if b else d for b, d in zip(lo.registers.get("broadcast", (False,) * 3), lo.ofm.shape))
            operand = (1, *bshape)
        return _core.Propagator.broadcast(list(operand), [1, *lo.ofm.shape])
    return _window_propagator(lo, view)


def _reads_whole(extents: dict[int, int]) -> "_core.Propagator":
    """The identity, but along each axis of `extents` any output region reads all `n` of it."""
    p = _core.Propagator.identity()
    axes = p.axes
    for axis, n in extents.items():
        axes[axis] = _core.AxisMap()
        axes[axis].scale, axes[axis].extent_bias, axes[axis].offset_bias = 0, n, 0
    p.axes = axes
    return p


def _window_propagator(lo: LoweredOperation, view: FeatureMapView) -> "_core.Propagator":
    k = lo.registers["kernel"]
    d = k["dilation"]
    kh, kw = (k["height"] - 1) // d[0] + 1, (k["width"] - 1) // d[1] + 1
    top, left, _, _ = lo.registers.get("padding", (0, 0, 0, 0))
    depthwise = lo.kind == "depthwise" or (lo.kind == "pool" and lo.registers.get("sub_op") != "REDUCE_SUM")
    return _core.Propagator.window(kh, kw, k["stride"][0], k["stride"][1], d[0], d[1], top, left, depthwise,
                                   view.shape[2])


def _transpose_propagator(tag: dict) -> "_core.Propagator":
    """The propagator of one output channel of a transpose (`lower_movement.channel_planes`):
    output axis k (H, W, C) reads source axis `source_axis[k]`, so the source's axes follow the
    output's rows and columns, and the one the channels come from is read at that channel."""
    source_axis, channel = tag["source_axis"], tag["channel"]
    from_axes = [0, 0, 0, 0]
    for k_out, k_in in enumerate(source_axis):
        from_axes[1 + k_in] = 1 + k_out
    p = _core.Propagator.permutation(from_axes)
    axes = p.axes
    fixed = _core.AxisMap()
    fixed.scale, fixed.extent_bias, fixed.offset_bias = 0, 1, channel
    axes[1 + source_axis[2]] = fixed
    p.axes = axes
    return p


def build_graph(schedule: NpuSchedule, graph, target: _Target, buffered: NpuSchedule | None = None,
                memory: tuple | None = None) -> Any:
    """The planner's graph of an uncascaded schedule whose weights are read from flash. Its
    tensors are the buffers of `memory_schedule(schedule)`, in the same order, then an empty
    one for each CPU operator that writes no buffer.

    `buffered` is the same schedule with the scheduler's weight buffers: a part run alone may
    take its operation's buffering (cost and bytes) from there, and only where it has one.
    `memory`: `memory_schedule(schedule, graph)`, when the caller has it."""
    msched, index, op_steps = memory or memory_schedule(schedule, graph)
    shapes: dict[int, tuple[int, int, int]] = {}  # buffer id -> its own shape
    for seg in schedule.segments:
        shapes.update(seg.segment.shapes)
    operations = schedule.operations  # a property that flattens the segments: read once
    own_operations = buffered.operations if buffered is not None else None
    lowered = [unflattened(sop.lowered, shapes) for sop in operations]
    step_op = {step: k for k, step in enumerate(op_steps)}
    natural: dict[int, tuple[int, int, int]] = {index[b]: shape for b, shape in shapes.items() if b in index}

    def whole(v: FeatureMapView | None) -> bool:
        return v is None or v.buffer not in index or views_whole(v, natural.get(index[v.buffer]))

    def sliced(v: FeatureMapView | None) -> bool:
        """Whether a view is its buffer whole or a slice of its channels (every row and column):
        a concatenation's input, a pad's copy, a SPLIT's output read in place."""
        return whole(v) or channel_slice(v, natural.get(index[v.buffer])) is not None

    def transposes(lo: LoweredOperation) -> bool:
        """Whether an operation is one output channel of a transpose (`channel_planes`) read
        from its whole input buffer: the planner stripes it by its output's rows."""
        tag = lo.registers.get("transpose")
        if tag is None or lo.ifm.buffer not in index or lo.ifm.layout != "NHWC":
            return False
        source = natural.get(index[lo.ifm.buffer])
        if source is None:
            return False
        axes, e = tag["source_axis"], lo.ifm.element_size
        strides = dense_strides(source, e)
        return (lo.ifm.shape == (source[axes[0]], source[axes[1]], 1)
                and lo.ifm.offset == tag["channel"] * strides[axes[2]]
                and lo.ifm.strides == (strides[axes[0]], strides[axes[1]], e))

    def boxed(lo: LoweredOperation) -> tuple | None:
        """(origin, steps) of a window operation's IFM when it reads a box of rows and columns
        of its buffer in place (a SLICE's reader, `box_origin`), padding none along a stepped
        axis; else None. Its stripes pad where their regions leave the box (AxisMap lo, hi)."""
        v = lo.ifm
        if lo.kind not in ("conv", "depthwise", "pool") or lo.registers.get("ifm_upscale") or v.buffer not in index:
            return None
        source = natural.get(index[v.buffer])
        box = box_origin(v, source)
        if box is None or sliced(v):
            return None
        top, left, bottom, right = lo.registers.get("padding", (0, 0, 0, 0))
        (sy, sx) = box[1]
        if ((top or bottom) and sy > 1) or ((left or right) and sx > 1):
            return None
        return box

    readers_whole: dict[int, bool] = {}
    writers: dict[int, int] = {}
    for lo in lowered:
        transposed, box = transposes(lo), boxed(lo)
        for v in (lo.ifm, lo.ifm2, lo.ofm):
            if v is not None and v.buffer in index:
                # A transpose's input stays whole (a stripe reads it along other axes than its
                # rows: no rolling buffer holds that), and so does one read every step-th row or
                # column; a box of rows and columns rolls.
                stepped = box is not None and box[1] != (1, 1)
                ok = (sliced(v) or (box is not None and v is lo.ifm)) and not ((transposed or stepped) and v is lo.ifm)
                # A U85 copy that writes its OFM transposed writes no run of rows (its view's
                # strides are permuted): its output stays whole.
                ok = ok and not (v is lo.ofm and "ofm_transpose" in lo.registers)
                # A gather or scatter (an indexed DMA) reads and writes its maps whole.
                ok = ok and lo.kind != "dma"
                readers_whole[index[v.buffer]] = readers_whole.get(index[v.buffer], True) and ok
        b = index[lo.ofm.buffer]
        writers[b] = writers.get(b, 0) + 1
    # Buffers something reads (an operation, a CPU operator, the model's outputs). One nothing
    # reads (a SPLIT's copied output whose reader the partition removed as dead) is no rolling
    # buffer: a cascade would never compute its rows and drop the operation writing it.
    read = {b for step in msched.steps for b in step.reads}
    pg = _core.PlanGraph()
    pg.weight_buffer_memory = getattr(_core.MemoryArea, target.buffer_memory)
    # A tensor TFLM sees lives in TFLM's arena (`scratch`), which outside Shared_Sram is the slow
    # memory (the layout pins it there): it takes no SRAM. Counted, DeepLabV3's 513 x 513 x 21
    # logits before its CPU RESIZE and the ARG_MAX output after it (7.9 MB) were the DP's peak
    # on U65-256, so every proposal tied there and the fastest (3.97 MB laid out) was the only one.
    sram_resident = lambda buf: not buf.cpu_visible or target.arena_memory == target.buffer_memory  # noqa: E731
    for b, buf in enumerate(msched.buffers):
        t = _core.PlanTensor()
        t.name = buf.name
        t.shape = [1, *natural.get(b, (1, 1, max(buf.size, 1)))]
        t.bytes = (buf.size + 15) // 16 * 16 if sram_resident(buf) else 0
        # State (persistent) is read before it is written: no cascade passes through it. Several
        # writers each write a slice of its channels (`sliced`): a cascade holds them all.
        t.cascadable = (readers_whole.get(b, False) and writers.get(b, 0) >= 1 and b in read and not buf.cpu_visible
                        and not buf.persistent)
        t.cpu_visible = buf.cpu_visible
        pg.add_tensor(t)
    n_tensors = len(msched.buffers)
    for s, step in enumerate(msched.steps):
        if s == 0 or s == len(msched.steps) - 1:
            continue  # the inputs and outputs pseudo steps
        part = _core.Part()
        part.name = step.name
        if s in step_op:
            sop, lo = operations[step_op[s]], lowered[step_op[s]]
            w = sum(r.weight_length for streams in sop.encoded.slices for r in streams) if sop.encoded else 0
            sc = sum(r.scale_length for streams in sop.encoded.slices for r in streams) if sop.encoded else 0
            # Costed as the stripes will be emitted (see stripes._stripe).
            part.op = target.npu_op(lo, w, sc, part_kernel_first=sop.part_kernel_first if lo.kind == "conv" else None,
                                    block_depth=sop.stripe_block_depth, ifm2_in_flash=sop.constant_ifm2 == "flash")
            # As scheduled (a copy runs 16 channels wide; a constant's copy, or a staged input, DMA'd in first).
            part.whole_cycles = float(sop.cost.total_cycles + sop.copy_cycles + sop.staged_cycles)
            inputs, props = [], []
            transposed, box = transposes(lo), boxed(lo)
            for v, second in ((lo.ifm, False), (lo.ifm2, True)):
                if v is not None and v.buffer in index:
                    inputs.append(index[v.buffer])
                    if transposed:
                        props.append(_transpose_propagator(lo.registers["transpose"]))
                    else:
                        props.append(_propagator(lo, v, second, box if v is lo.ifm else None))
            part.inputs, part.propagators = inputs, props
            # A constant IFM before a feature-map IFM2 (a 1x1 resize's zeros): the inputs start
            # at the second operand.
            part.first_operand = int(lo.ifm.buffer not in index and bool(inputs))
            part.output = index[lo.ofm.buffer]
            # A constant operand is no plan tensor, so nothing propagates a stripe's region to it:
            # only one the operation broadcasts over H and W (read whole by every stripe) stripes,
            # or one read element for element (`follows_ofm`: a stripe reads its own region).
            constant_map = any(v is not None and v.buffer not in index and v.shape[:2] != (1, 1)
                               and not follows_ofm(lo, v) for v in (lo.ifm, lo.ifm2))
            upscale = lo.registers.get("ifm_upscale", 0)
            part.stripable = (lo.kind in STRIPABLE_KINDS and not constant_map and "ofm_transpose" not in lo.registers
                              and all(sliced(v) or ((transposed or box is not None) and v is lo.ifm)
                                      for v in (lo.ifm, lo.ifm2, lo.ofm)))
            # A slice of its OFM channels alone (a depth-sliced cascade): its OFM its buffer whole,
            # and no constant operand deeper than a channel (the slice would have to narrow it; a
            # convolution's weights are encoded in slices instead, stripes._slice_sources). Not a
            # transpose's channel plane or a box reader: their IFM views are no channel slices.
            # Not a matrix product: its OFM channels are its IFM2's columns, which no slice narrows.
            part.channel_sliceable = (lo.kind in STRIPABLE_KINDS and whole(lo.ofm) and not lo.registers.get("ifm_upscale")
                                      and "ofm_transpose" not in lo.registers
                                      and not lo.registers.get("weights_ifm2")
                                      and not transposed and box is None
                                      and not any(v is not None and v.buffer not in index and v.shape[2] > 1
                                                  for v in (lo.ifm, lo.ifm2)))
            if upscale == NEAREST_UPSCALE:
                # A stripe starts where an IFM row's first copy lands.
                part.alignment = UPSCALE_FACTOR
            elif upscale == ZEROS_UPSCALE:
                # Two rows and columns of a transposed convolution's OFM always read a stored IFM
                # row and column (one alone may see only inserted zeros: no IFM to stripe).
                part.alignment = 2
            if buffered is not None:
                # The scheduler's extras for the operation run alone, which the allocator keeps
                # where the budget holds them: its weight buffer, and its input staged in the fast
                # memory (`input_staging`). A plan that buffers the part takes both, as
                # `stripes.with_buffered_weights` compiles it. Costed with its input read in
                # place, coral MobileNetV1-0.75 at 192 on U65-256 was planned 92k cycles (5.4%)
                # slower uncascaded than it compiled, and so was every proposal that runs its
                # first convolution alone (its 192 x 192 x 3 input: 185,984 cycles read in place
                # from DRAM, 84,223 + a 9,716-cycle copy staged).
                own = own_operations[step_op[s]]
                part.bufferable = own.weight_buffer or own.staged_cycles > 0
                if part.bufferable:
                    part.buffered_cycles = float(own.cost.total_cycles + own.copy_cycles + own.staged_cycles)
                    part.buffered_bytes = (weight_buffer_bytes(own) + 15) // 16 * 16 if own.weight_buffer else 0
                    # A double buffer of depth slices holds a second slot while it runs, and a
                    # staged input its copy (`memory_schedule`: live over the operation alone).
                    second_slot = _buffer_size(own) - part.buffered_bytes if own.weight_buffer else 0
                    staged_copy = round16(target.buffer_bytes[own.lowered.ifm.buffer]) if own.staged_cycles else 0
                    part.buffered_second_slot_bytes = second_slot + staged_copy
        else:
            # A CPU operator: it reads and writes whole tensors, in no time the NPU sees.
            part.op = _core.NpuOp()
            part.op.type = _core.NpuOpType.Dma
            part.inputs = list(step.reads)
            part.propagators = [_core.Propagator.identity() for _ in step.reads]
            if step.writes:
                part.output = step.writes[0]
            else:
                # It writes no tensor the NPU sees: its output is an empty tensor of its own.
                # (It was one of its inputs, or tensor 0: the planner then took that tensor for
                # one this part makes, rolled it inside a cascade and left its bytes out of
                # the layout: movenet's least point scored 317,952 B and compiled to 385,360.)
                empty = _core.PlanTensor()
                empty.name, empty.shape, empty.bytes, empty.cascadable = f"{step.name} (no NPU output)", [1, 1, 1, 1], 0, False
                pg.add_tensor(empty)
                part.output = n_tensors
                n_tensors += 1
            part.stripable = False
        pg.add_part(part)
    pg.inputs = list(msched.steps[0].writes)
    pg.outputs = list(msched.steps[-1].reads)
    return pg


def _scoring(config: mem.MemoryConfig) -> "_core.MemoryConfig":
    """The core's `config` for a score: its exact layout searches at most SCORE_NODE_LIMIT nodes."""
    return replace(config, node_limit=min(config.node_limit, SCORE_NODE_LIMIT)).to_core()


def _layout_srams(pg, proposals: list, uncascaded: "_core.BufferSchedule", config: mem.MemoryConfig) -> list[int]:
    """The SRAM the exact allocator lays out for each proposal, each cascade one step
    (proposal/proposal_layout.hpp), within SCORE_NODE_LIMIT search nodes; `uncascaded` is the
    core's copy of the uncascaded schedule's `memory_schedule` (`mem.core_schedule`)."""
    return _core.proposal_srams(pg, proposals, uncascaded, _scoring(config))


def _scores_in_background(pg, points: list[PlanPoint], uncascaded: "_core.BufferSchedule", config: mem.MemoryConfig,
                          settled: list[tuple[float, int]] | None = None) -> "_core.PendingSrams":
    """`_layout_srams` of `points`, made by the core's background threads while this one goes on
    (`take()` gives them, made here if no thread has started them): with `settled`, the
    (cycles, SRAM) of points scored already, only of the points that no point dominates by its
    bound where it is one (`_bounded`), -1 for the others (`_core.undominated_srams`); without,
    of every point."""
    bounded = settled is not None and _bounded(config)
    return _core.queue_undominated_srams(pg, [p.proposal for p in points], settled or [], bounded, uncascaded,
                                         _scoring(config))


def _bounded(config: mem.MemoryConfig) -> bool:
    """Whether a proposal's bound (the planner's peak) is a lower bound of its score, within the
    15 bytes of a 16-byte alignment: on Shared_Sram, where a point whose bound is above the SRAM
    of one at most as slow lays out above it too, and is on no frontier (MobileNetV2-224 on
    U55-128: 30 of 76 proposals need no score). Elsewhere the peak leaves out the tensors TFLM
    places, and is no bound (zoo lstm_kws on U65-256 scores a proposal of a 1,024 B peak at
    964 B)."""
    return config.shared_sram and config.fast_capacity is None


def _near_least(by_bound: list[PlanPoint]) -> list[PlanPoint]:
    """Of points sorted by the planner's bound, those `lay_out_leanest` scores: the
    LEAST_SCORED leanest, within a quarter of the least bound."""
    return [p for p in by_bound[:LEAST_SCORED] if p.estimated_bytes <= 1.25 * by_bound[0].estimated_bytes]


def _least_by_bound(points: list[PlanPoint]) -> list[PlanPoint]:
    """The points whose scores `lay_out_leanest` reads or may keep: those it scores
    (`_near_least`) and the LEAST_LAID_OUT leanest by bound, in `points`' order."""
    by_bound = sorted(points, key=lambda p: (p.estimated_bytes, p.cycles))
    chosen = {id(p) for p in _near_least(by_bound) + by_bound[:LEAST_LAID_OUT]}
    return [p for p in points if id(p) in chosen]


@paused_gc()
def plan(model: ModelLike, accelerator: str = "ethos-u55-128", system: str | None = None,
         memory_mode: Union[str, MemoryMode, None] = None, options: PlanOptions | None = None) -> Frontier:
    """The planner's SRAM-versus-cycles frontier of `model`'s cascading proposals (see the
    module docstring): its predictions, each point's SRAM laid out by the exact allocator and
    its cycles costed stripe by stripe as they run. `cascader.plan` compiles each point (its
    figures are then the binaries'); this is the planner alone.

    Raises the errors `cascader.compile` raises for a bad model or target.
    """
    start = time.perf_counter()
    stages = Stages()
    acc = Accelerator(accelerator)
    acc.require_compiles()
    mode = (MemoryMode.parse(memory_mode) if memory_mode is not None else acc.default_memory_mode).value
    system = system if system is not None else acc.default_system
    m = as_model(model)
    stages.lap("read")
    part, segments = lower(m, acc.name)
    stages.lap("lower")
    buffered = schedule(part, segments, acc.name, system, mode)
    stages.lap("schedule")
    frontier = plan_scheduled(part, buffered, options, start, stages=stages)
    # The least-scratch variant (`compiler._Prepared.least_scratch`): the lowering that takes
    # the least scratch, its OFMs written over their IFMs on the blocks that let them run
    # furthest.
    if part.trades_scratch:
        frugal_part, frugal_segments = lower(m, acc.name, least_scratch=True)
        frugal_sched = with_overlapping_blocks(schedule(frugal_part, frugal_segments, acc.name, system, mode),
                                               frugal_part.graph, frontier.resident_floor_bytes)
    else:
        frugal_part, frugal_sched = part, with_overlapping_blocks(buffered, part.graph, frontier.resident_floor_bytes)
    if frugal_sched is not buffered:
        # Its points join the frontier (`cascader.compile` takes that variant where the budget
        # needs it); its proposals are of its own graph, kept apart.
        # Without feature maps in DRAM: a compile within a budget takes the variant only where
        # the model's own lowering does not fit it, which moving maps to DRAM makes it do.
        frugal = plan_scheduled(frugal_part, frugal_sched, options, evict=False)
        for p in frugal.points + ([frugal.resident] if frugal.resident is not None else []):
            p.least_scratch = True
        both = frontier.points + frugal.points
        frontier.points = [both[k] for k in _core.pareto_frontier([(p.sram_bytes, p.cycles) for p in both])]
        if frugal.resident is not None and (frontier.resident is None
                                            or frugal.resident.sram_bytes < frontier.resident.sram_bytes):
            frontier.resident = frugal.resident
        if frugal.floor_bytes < frontier.floor_bytes:
            frontier.floor_bytes, frontier.floor_operator = frugal.floor_bytes, frugal.floor_operator
        frontier.resident_floor_bytes = min(frontier.resident_floor_bytes, frugal.resident_floor_bytes)
        frontier.notes.append("points marked least_scratch are of the least-scratch variant (the lowering of "
                              "lowering.SCRATCH_TRADING_OPERATORS, blocks of schedule.with_overlapping_blocks)")
        frontier.seconds = time.perf_counter() - start
        frontier.planner_seconds += frugal.planner_seconds
    return frontier


def plan_scheduled(part, buffered: NpuSchedule, options: PlanOptions | None = None,
                   start: float | None = None, lean: NpuSchedule | None = None,
                   stages: Stages | None = None, evict: bool = True) -> Frontier:
    """`plan`'s work after the lower and schedule stages: the frontier of the uncascaded
    schedule `buffered` (with its weight buffers) of partition `part`. `start`: when the whole
    call began (`Frontier.seconds`), if before this; `lean`: `without_weight_buffers(buffered)`,
    when the caller has it; `stages`: the stopwatch of the stages before; `evict`: on
    Dedicated_Sram, with points that move feature maps to DRAM (`evicting_points`)."""
    scheduled = time.perf_counter()
    start = scheduled if start is None else start
    stages = stages or Stages()
    options = options or PlanOptions()
    lean = lean or without_weight_buffers(buffered)
    target = _Target.of(buffered)
    memory = memory_schedule(lean, part.graph)  # the score's uncascaded layout, and the floor's
    config = mem.MemoryConfig.for_target(target.accelerator, target.system, target.memory_mode)
    frontier = plan_schedule(lean, part.graph, target, options, score=False, buffered=buffered, stages=stages,
                             memory=memory)
    uncascaded = mem.core_schedule(memory[0])
    # The point `budgeted_points` starts from is nearly always the fastest proposal that
    # cascades nothing (cascades cost cycles): scored first, it is budgeted while the leanest by
    # bound are scored on another thread (the leanest layouts start from their scores), and
    # budgeted again below in the rare case the frontier's is another.
    guess = _fastest_uncascaded(frontier.candidates, key=lambda p: (p.cycles, p.estimated_bytes))
    if guess is not None:
        guess.sram_bytes = _layout_srams(frontier.graph, [guess.proposal], uncascaded, config)[0]
    first = _least_by_bound(frontier.candidates)
    leanest_scores = _scores_in_background(frontier.graph, first, uncascaded, config)
    with capped_workers(1):  # the scores' thread holds the other cores (common/pending.hpp)
        guessed = None if guess is None else (guess, guess.sram_bytes, budgeted_points(
            guess, part, buffered, lean, frontier.graph, config, memory))
    stages.lap("budgeted points")
    scores = dict(zip(map(id, first), leanest_scores.take()))
    for p in frontier.candidates:
        p.sram_bytes = scores.get(id(p))
    frontier.scored = True
    stages.lap("proposals laid out (C++)")
    # The points that may be on the frontier are scored on another thread (in the core) while
    # this one lays out the leanest stripe by stripe (the score takes each cascade as one step:
    # chained staircases and in-place operations come out otherwise). The points that layout
    # may change prune no others (`_core.undominated_srams`): their SRAM is not final yet.
    by_bound = sorted(frontier.candidates, key=lambda p: (p.estimated_bytes, p.cycles))
    tries = {id(p) for p in _leanest_tries(by_bound, scores)}
    settled = [(p.cycles, scores[id(p)]) for p in first if id(p) not in tries]
    todo = [p for p in frontier.candidates if id(p) not in scores]
    scoring = _scores_in_background(frontier.graph, todo, uncascaded, config, settled)
    with capped_workers(1):  # the scores' thread holds the other cores (common/pending.hpp)
        leanest = lay_out_leanest(frontier, part.graph, lean, config)
    stages.lap("leanest laid out")
    for p, sram in zip(todo, scoring.take()):
        p.sram_bytes = sram if sram >= 0 else None
    for sram, point, _, _ in leanest:
        point.sram_bytes = sram
    stages.lap("proposals laid out (C++)")
    evicting = []
    if evict and not config.shared_sram:
        evicting = (evicting_points(frontier, part, buffered, lean, config)
                    + evicted_bricks_points(part, buffered, options, config))
    stages.lap("evicting points")
    laid = [p for p in frontier.candidates if p.sram_bytes is not None]
    frontier.resident = min(laid, key=lambda p: (p.sram_bytes, p.cycles), default=None)
    pool = laid + evicting
    front = _core.pareto_frontier([(p.sram_bytes, p.cycles) for p in pool])
    fastest = _fastest_uncascaded([pool[k] for k in front])
    if guessed is not None and fastest is guessed[0] and fastest.sram_bytes == guessed[1]:
        pool += guessed[2]
    elif fastest is not None:
        pool += budgeted_points(fastest, part, buffered, lean, frontier.graph, config, memory)
    stages.lap("budgeted points")
    front = _core.pareto_frontier([(p.sram_bytes, p.cycles) for p in pool])
    frontier.points = [pool[k] for k in front]
    least = floor(part, lean, resident=True, memory=memory)
    frontier.resident_floor_bytes = least.bytes
    if config.shared_sram:
        frontier.floor_bytes, frontier.floor_operator = least.bytes, least.operator
    stages.lap("floor, frontier")
    frontier.seconds = time.perf_counter() - start
    frontier.planner_seconds = time.perf_counter() - scheduled
    frontier.stages = stages.seconds
    return frontier


def unscored(frontier: Frontier) -> Frontier:
    """The frontier `plan_schedule(..., score=False)` makes of the same schedule, from a scored
    one's candidates (the same proposals, in the same order): each point's SRAM the planner's
    own bound."""
    points = [PlanPoint(p.estimated_bytes, p.cycles, p.proposal, p.estimated_bytes) for p in frontier.candidates]
    front = _core.pareto_frontier([(p.sram_bytes, p.cycles) for p in points])
    return Frontier([points[k] for k in front], frontier.graph, frontier.seconds, frontier.accelerator,
                    candidates=points, scored=False)


def lay_out_leanest(frontier: Frontier, graph, lean: NpuSchedule, config: mem.MemoryConfig,
                    fits: int | None = None) -> list[tuple]:
    """The leanest proposals as the compile lays them out (`laid_out`): (SRAM bytes, point,
    stripe-level schedule, memory schedule) each. Taken are the LEAST_LAID_OUT leanest by the
    planner's bound (a lower bound of a layout: skipped once above the least found) and as
    many by the one-step-per-cascade score (neither bound nor exact, but it sees chained
    staircases drift, which the bound does not). With `fits`, the first by bound that fits
    that many bytes ends the search (before any is scored)."""
    pool = frontier.candidates or frontier.points
    by_bound = sorted(pool, key=lambda p: (p.estimated_bytes, p.cycles))
    out, tried = [], set()

    def lay_out(point: PlanPoint) -> None:
        tried.add(id(point))
        sram, striped, memory = laid_out(point, graph, lean, frontier.graph, config)
        out.append((sram, point, striped, memory))

    if fits is not None:
        for point in by_bound[:LEAST_LAID_OUT]:
            lay_out(point)
            if out[-1][0] <= fits:
                return out[-1:]
    # Scored only near the least bound (the rest cannot be the least), a few; `plan`'s points
    # are scored already.
    near = _near_least(by_bound)
    if frontier.scored:
        scores = {id(p): p.sram_bytes for p in near}
    else:
        lean_memory = mem.core_schedule(memory_schedule(lean, graph)[0])
        srams = _layout_srams(frontier.graph, [p.proposal for p in near], lean_memory, config)
        scores = {id(p): sram for p, sram in zip(near, srams)}
    for point in _leanest_tries(by_bound, scores):
        if id(point) not in tried and not (out and point.estimated_bytes - 15 >= min(o[0] for o in out)):
            lay_out(point)
    return out


def _leanest_tries(by_bound: list[PlanPoint], scores: dict[int, int]) -> list[PlanPoint]:
    """The points `lay_out_leanest` lays out, in order, unless laid out already or skipped:
    of `by_bound` (the points by the planner's bound), the LEAST_LAID_OUT leanest near the
    least bound (`_near_least`) by their `scores` (by id), and the LEAST_LAID_OUT first."""
    by_score = sorted(_near_least(by_bound), key=lambda p: (scores[id(p)], p.cycles))
    return by_score[:LEAST_LAID_OUT] + by_bound[:LEAST_LAID_OUT]


def evicting_points(frontier: Frontier, part, buffered: NpuSchedule, lean: NpuSchedule,
                    config: mem.MemoryConfig) -> list[PlanPoint]:
    """Dedicated_Sram: points with feature maps in DRAM, as `cascader.compile` makes them under
    a budget a proposal does not fit (`compiler._evicting_cascades`): the proposal with the
    weight buffers of its operations run alone (`stripes.proposal_schedules` of `lean`, an
    uncascaded schedule without weight buffers, and `buffered`, the same with them) allocated
    within the budget by the greedy planner (`allocation.allocate`), which moves feature maps
    to DRAM until the rest fit, the cheapest per byte first, and drops the weight buffers it
    evicts. A point's SRAM is that layout's; its cycles are the allocated schedule's (the
    stripes as run, the buffering the allocation kept) plus what the eviction costs
    (`allocation.eviction_cost`: each operation costed again by the cycle model with its
    evicted operands in DRAM, the model the estimator runs).

    The fastest proposals of the frontier by the planner's bound (as the compile tries them,
    within EVICTING_PROPOSALS and EVICTING_LAYOUT_WORK), each under EVICTING_SHARES of its
    laid-out SRAM; only the fastest down to none in SRAM (the slower DRAM traffic costs less
    than a deep cascade's stripes: MobileNetV2-224 on U65-256 with no feature map in SRAM,
    about 3.6M cycles from the fastest proposal, 7.2M from the leanest). A faster cascade with
    a few maps in DRAM can beat a leaner one with all in SRAM (coral tf2 MobileNetV2-224 on
    U65-256: the third fastest, 2 cascades, within 602,112 B at 3,190,192 cycles, where with
    every map in SRAM 689,344 B took 3,227,491). Costed
    without the weight buffers the allocation keeps, as the fastest alone was before, such
    points were 78k cycles slower on coral tf2 MobileNetV2-224 (its fastest proposal within
    376,320 B: 3,285,004 cycles, now 3,206,781; Vela's Size binary, 389,184 B at 3,270,918)."""
    pool = [p for p in frontier.candidates or frontier.points if p.sram_bytes is not None]
    by_bound = [pool[k] for k in _core.pareto_frontier([(p.estimated_bytes, p.cycles) for p in pool])]
    pg, target, graph = frontier.graph, _Target.of(lean), part.graph
    out, work = [], 0
    for rank, point in enumerate(sorted(by_bound, key=lambda p: (p.cycles, p.sram_bytes))[:EVICTING_PROPOSALS]):
        if rank > 0 and work > EVICTING_LAYOUT_WORK:
            break
        striped, proposed = proposal_schedules(lean, pg, point.proposal, target, buffered)
        # `striped` is `proposed` without its weight buffers: their memory schedules and the
        # weight-buffer choices serve every budget.
        shared = Lean(proposed, graph, memory_schedule(striped, graph), striped, memory_schedule(proposed, graph))
        seen = set()
        for share in EVICTING_SHARES if rank == 0 else EVICTING_SHARES[:EVICTING_SLOWER_SHARES]:
            budget = int(point.sram_bytes * share) // 16 * 16
            if 0 < budget < EVICTING_LEAST_BUDGET:
                continue
            try:
                allocated = allocate(proposed, part, budget, solver="greedy", lean=shared)
                work += len(striped.operations)
                sram = mem.sram_bytes(allocated[1], config)
                if not allocated[1].evicted or sram in seen:
                    # It fitted without DRAM (the budgeted points'), or as under a larger budget.
                    # Not the eviction's cycles: maps in DRAM at no cost are a point too (random
                    # network uint8 seed 1204 on U85-256: 0 B at the 13,068 B point's cycles).
                    continue
                seen.add(sram)
                if sram < budget:
                    # The compile within the point's SRAM allocates anew, and a tighter budget
                    # may evict other maps (coral tf2 MobileNetV2-224's fastest proposal within
                    # 188,160 B lays out in 163,072 B, planned 3,244,029 cycles; within that,
                    # 3,246,537): the point is that allocation's.
                    allocated = allocate(proposed, part, sram, solver="greedy", lean=shared)
                    work += len(striped.operations)
            except InfeasibleError:  # a buffer that may not leave SRAM: no point under this budget
                continue
            cycles = allocated[0].total_cycles + eviction_cost(allocated, graph)
            # As the compile does, the operations on the maps moved to DRAM may take the blocks
            # that run fastest there (`evicted_blocks.reblocked`), laid out anew within the SRAM.
            for again in reblocked_allocations(allocated, part, sram):
                work += len(striped.operations)
                if mem.sram_bytes(again[1], config) <= sram:
                    cycles = min(cycles, again[0].total_cycles + eviction_cost(again, graph))
            # Its bound is its layout (the planner's own peak counts every feature map in SRAM).
            out.append(PlanPoint(sram, cycles, point.proposal, sram, point.least_scratch, evicting=True))
    return out


def evicted_bricks_points(part, buffered: NpuSchedule, options: PlanOptions, config: mem.MemoryConfig
                          ) -> list[PlanPoint]:
    """Dedicated_Sram: `evicting_points` of the schedule with the padded maps that run faster as
    bricks in DRAM stored so (`scheduling.evicted_bricks`), which `cascader.compile` tries
    beside the dense one under a budget that moves maps to DRAM (its uncascaded schedule and
    its proposals' frontier, `compiler._evicting_cascades`); none where no map pays as bricks
    there. Such points are marked `evicted_bricks`: their proposals are of that schedule's own
    graph. Coral MobileNetV1-0.75 at 192 on U65-256: its 96 x 96 x 24 maps written to DRAM as
    NHWC in 16-byte bursts made the dense schedule's points within Vela's Perf@0.7x SRAM
    (236,752 B) 1.80M cycles, where the compile there takes 1.62M with them as bricks."""
    bricks = evicted_bricks(part, buffered)
    if bricks is None:
        return []
    lean = without_weight_buffers(bricks)
    frontier = plan_schedule(lean, part.graph, _Target.of(bricks), options, score=False, buffered=bricks)
    points = evicting_points(frontier, part, bricks, lean, config)
    for p in points:
        p.evicted_bricks, p.graph = True, frontier.graph
    return points


def _fastest_uncascaded(points: list[PlanPoint], key=lambda p: (p.cycles, p.sram_bytes)) -> PlanPoint | None:
    """Of `points`, the first by `key` (the fastest, then the leanest) that cascades nothing and
    keeps every feature map in SRAM: the point `budgeted_points` starts from."""
    # The fastest first: each read of a proposal's cascades copies them out of the core.
    return next((p for p in sorted(points, key=key)
                 if not p.evicting and not any(is_striped(c) for c in p.proposal.cascades)), None)


def budgeted_points(fastest: PlanPoint, part, buffered: NpuSchedule, lean: NpuSchedule, pg,
                    config: mem.MemoryConfig, memory: tuple | None = None) -> list[PlanPoint]:
    """The point `cascader.compile` reaches below `fastest`, the fastest uncascaded point of a
    frontier (`_fastest_uncascaded`): the uncascaded schedule allocated within a budget just
    below that point's SRAM, as `compiler._uncascaded` allocates it (`allocation.allocate` with
    `reslice`: the weight buffers that fit, re-sliced thinner or into one slot where that makes
    them fit, and an operation after a dropped buffer hiding a weight DMA of its own under it),
    where the planner offers each operation one buffering, the scheduler's. Zoo fc_autoencoder on U65-256: the fastest
    proposal lays out in 35,040 B, and in 34,928 B at the same 42,640 cycles with its last
    buffer re-sliced (Vela's Performance point: 34,928 B at 42,762); zoo lstm_kws: within 4,000 B
    at 526,293 cycles against the planner's fastest, 5,024 B at 559,066 (Vela: 4,704 B at
    638,159); tflm hello_world: 96 B at 1,738 cycles, its last FC's weights buffered under the
    one before (Vela: 112 B at 1,738).

    The budget is the planner's bound of the fastest proposal (the least its layout with every
    buffer can take: within it the allocator must re-slice or drop some), or just below its
    SRAM where that is its bound, else the first of the two where no feature map moves to DRAM.
    A point is a promise that compiling within its SRAM gives its cycles, and an allocation
    within a smaller budget may choose thinner, slower buffers (lstm_kws within 3,216 B, the SRAM
    it laid out in within 4,000 B: 705,904 cycles): the point claims the budget, or the layout's
    SRAM where the budget was just below the fastest point's and the allocation within the
    layout's SRAM is as fast. An allocation lays the schedule out once per weight-buffer choice
    it tries; the two share `lean` (`memory`: its `memory_schedule`, when the caller has it) and
    the choices they both make (`allocation.Lean`).
    Its cycles are the fastest point's with what the allocator's buffering changed (as
    `compiler._cascade` accounts them). An allocation that moves feature maps to DRAM is no
    such point (those are `evicting_points`')."""
    if not any(op.weight_buffer for op in buffered.operations):
        return []
    striped = cascaded_schedule(lean, pg, fastest.proposal, _Target.of(lean))
    proposed = with_buffered_weights(striped, lean, pg, fastest.proposal, buffered)
    shared = Lean(buffered, part.graph, memory, lean)

    def allocated(budget: int) -> tuple[int, float] | None:
        """(SRAM, cycles) of the allocation within `budget` with every feature map in SRAM,
        None if none fits so."""
        try:
            sched, layout = allocate(buffered, part, budget, reslice=True, lean=shared)[:2]
        except InfeasibleError:
            return None
        if layout.eviction_cycles > 0:
            return None
        return mem.sram_bytes(layout, config), fastest.cycles + sched.total_cycles - proposed.total_cycles

    below = (fastest.sram_bytes - 1) // 16 * 16
    for budget in sorted({min(fastest.estimated_bytes, below), below}):
        first = allocated(budget) if budget > 0 else None
        if first is not None:
            break
    else:
        return []
    sram, cycles = budget, first[1]
    if budget == below and first[0] < budget:
        again = allocated(first[0])
        if again is not None and again[1] <= cycles:
            sram, cycles = first[0], again[1]
    return [PlanPoint(sram, cycles, fastest.proposal, min(sram, fastest.estimated_bytes), fastest.least_scratch)]


def laid_out(point: PlanPoint, graph, lean: NpuSchedule, pg, config: mem.MemoryConfig) -> tuple:
    """A point's proposal as the compile lays it out, without weight buffers: (SRAM bytes, its
    stripe-level schedule, that schedule's `memory_schedule`)."""
    striped = cascaded_schedule(lean, pg, point.proposal, _Target.of(lean))
    memory = memory_schedule(striped, graph)
    return mem.sram_bytes(mem.layout(memory[0], config), config), striped, memory


def plan_schedule(sched: NpuSchedule, graph, target: _Target, options: PlanOptions | None = None,
                  score: bool = True, buffered: NpuSchedule | None = None, stages: Stages | None = None,
                  memory: tuple | None = None) -> Frontier:
    """The frontier of an uncascaded schedule whose weights are read in place (`plan`'s work
    after lowering and scheduling; `cascader.compile` calls it when a budget needs cascades),
    with `buffered` the same schedule's weight buffers (see `build_graph`). Without `score`,
    points keep the planner's own memory bound as `sram_bytes` (the compile lays out only the
    proposals it tries). `stages`: a stopwatch to time the steps on; `memory`:
    `memory_schedule(sched, graph)`, when the caller has it."""
    start = time.perf_counter()
    stages = stages or Stages()
    options = options or PlanOptions()
    memory = memory or memory_schedule(sched, graph)  # the graph's tensors, and the score's uncascaded layout
    pg = build_graph(sched, graph, target, buffered, memory)
    stages.lap("planner graph")
    proposals = _core.generate_proposals(pg, target.arch, options.to_core())
    # A weight buffer that fits beside the peak is free to the planner's memory model but can
    # fragment the real layout: the allocator also scores each proposal without them.
    proposals += _core.without_weight_buffers(pg, target.arch, proposals)
    stages.lap("proposals (C++)")
    if score:
        msched = mem.core_schedule(memory[0])
        config = mem.MemoryConfig.for_target(target.accelerator, target.system, target.memory_mode)
        srams = _layout_srams(pg, proposals, msched, config)
        scored = [PlanPoint(sram, p.cycles, p, p.memory) for p, sram in zip(proposals, srams)]
        stages.lap("proposals laid out (C++)")
    else:
        scored = [PlanPoint(p.memory, p.cycles, p, p.memory) for p in proposals]
    front = _core.pareto_frontier([(p.sram_bytes, p.cycles) for p in scored])
    points = [scored[k] for k in front]
    return Frontier(points, pg, time.perf_counter() - start, target.accelerator, candidates=scored, scored=score)
