"""The schedule: what runs on the NPU, in which order, with which block config, over which buffers.

A `NpuSchedule` is the value every later stage consumes (memory layout, emission). The
uncascaded scheduler here fills it with one whole-tensor stripe per lowered operation; the
cascading planner fills the same type with stripes, rolling buffers and DMAs. Block configs and
traversals come from the cycle model (`cascader.estimate_op`), the same model the estimator
costs binaries with, so the choice and the report cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import memory as mem
from .arch import Accelerator, arch_config
from .frontend.lower import LoweredOperation, LoweredSegment
from .perf import OpCost, estimate_op
from .tflite.model import SubGraph
from . import _core


@dataclass
class ScheduledOperation:
    """One NPU operation with its hardware choices."""

    lowered: LoweredOperation
    block: tuple[int, int, int]  # OFM block height, width, depth
    part_kernel_first: bool
    cost: OpCost


@dataclass
class SegmentSchedule:
    """One NPU segment (one `ethos-u` operator) in execution order."""

    segment: LoweredSegment
    operations: list[ScheduledOperation]


@dataclass
class NpuSchedule:
    """The whole inference: segments and CPU operators in execution order.

    `order` lists, per position, either a segment index (into `segments`) or a CPU operator
    index prefixed by the string "cpu" (``("cpu", i)``).
    """

    segments: list[SegmentSchedule]
    order: list[tuple[str, int]]
    accelerator: str
    system: str | None = None
    memory_mode: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def operations(self) -> list[ScheduledOperation]:
        return [op for s in self.segments for op in s.operations]


def _cost(op: LoweredOperation, accelerator: str, system, memory_mode, weight_memory: str,
          arena_memory: str) -> OpCost:
    ifm, ofm = op.ifm, op.ofm
    args: dict = dict(
        ifm_dtype=ifm.dtype, ofm_dtype=ofm.dtype, ifm_memory=arena_memory, ofm_memory=arena_memory,
        accelerator=accelerator, system=system, memory_mode=memory_mode,
    )
    k = op.registers.get("kernel")
    if op.kind in ("conv", "depthwise", "pool"):
        d = k["dilation"]
        kh, kw = (k["height"] - 1) // d[0] + 1, (k["width"] - 1) // d[1] + 1
        args.update(kernel=(kh, kw), stride=k["stride"], dilation=d, padding=op.registers["padding"])
    if op.weights is not None:
        w = op.weights.values
        # Block choice needs a size before the encoder has run: the raw weight bytes (the
        # encoder compresses them, the ranking between configs is what matters here).
        args.update(weight_bytes=int(w.size), scale_bytes=10 * int(w.shape[0]), weight_memory=weight_memory)
    if op.ifm2 is not None:
        args.update(ifm2_shape=(1, *op.ifm2.shape), ifm2_dtype=op.ifm2.dtype)
    return estimate_op(op.cost_kind, (1, *ifm.shape), (1, *ofm.shape), **args)


def schedule_uncascaded(segments: list[LoweredSegment], order: list[tuple[str, int]], accelerator: str = "ethos-u55-128",
                        system=None, memory_mode=None) -> NpuSchedule:
    """Every lowered operation as its own whole-tensor stripe, with the best block config the
    cycle model finds for it."""
    arch = arch_config(accelerator, system, memory_mode)
    weight_memory = arch.region_memory(_core.Region.Constants).name
    arena_memory = arch.region_memory(_core.Region.Arena).name
    out = []
    for seg in segments:
        ops = []
        for op in seg.operations:
            cost = _cost(op, accelerator, system, memory_mode, weight_memory, arena_memory)
            b = cost.block_config
            ops.append(ScheduledOperation(op, b.ofm_block, b.part_kernel_first if op.kind == "conv" else False, cost))
        out.append(SegmentSchedule(seg, ops))
    return NpuSchedule(out, order, Accelerator(accelerator).name, system, memory_mode)


def memory_schedule(schedule: NpuSchedule, graph: SubGraph) -> tuple[mem.Schedule, dict[int, int]]:
    """The memory planner's view: one buffer per feature-map buffer, one step per operation.

    CPU operators are steps too, so the NPU subgraphs' IFMs and OFMs stay live across them.
    Returns the schedule and, per buffer (a tensor index), its index in `schedule.buffers`.
    """
    buffers: list[mem.ScheduledBuffer] = []
    index: dict[int, int] = {}
    cpu_visible: set[int] = set()
    for s in schedule.segments:
        seg = s.segment
        cpu_visible.update(seg.aliases[t] for t in (*seg.ifms, *seg.ofms))
    for s in schedule.segments:
        for b, size in s.segment.buffers.items():
            if b not in index:
                index[b] = len(buffers)
                buffers.append(mem.ScheduledBuffer(graph.tensors[b].name, "feature_map", size,
                                                   cpu_visible=b in cpu_visible))
    steps: list[mem.Step] = [mem.Step(writes=tuple(index[t] for t in graph.inputs if t in index), name="inputs")]
    # A tensor the CPU hands over is alive from where a CPU operator (or the model input) writes it.
    for kind, i in schedule.order:
        if kind == "cpu":
            op = graph.operators[i]
            steps.append(mem.Step(tuple(index[t] for t in op.inputs if t in index),
                                  tuple(index[t] for t in op.outputs if t in index), f"cpu {i}"))
            continue
        for sop in schedule.segments[i].operations:
            lo = sop.lowered
            reads = tuple(index[v.buffer] for v in (lo.ifm, lo.ifm2) if v is not None and v.buffer in index)
            steps.append(mem.Step(reads, (index[lo.ofm.buffer],), lo.name))
    steps.append(mem.Step(tuple(index[t] for t in graph.outputs if t in index), name="outputs"))
    return mem.Schedule(buffers, steps, []), index
