"""The per-layer table of a compile: every NPU operation and CPU operator in execution order.

The stripes of one operation in a cascade are one row (their cycles and MACs summed); its
stripe shape is the tallest band it computes. Cycles are the cycle model's prediction for the
schedule, the figures the planner and the scheduler chose by.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .frontend.lowered import FeatureMapView
from .frontend.partition import Partition
from .memory import MemoryConfig, MemoryLayout
from .records import Records
from .schedule import NpuSchedule, memory_schedule

if TYPE_CHECKING:
    from .schedule import ScheduledOperation


@dataclass(frozen=True)
class Layer:
    """One NPU operation (all its stripes) or one CPU operator."""

    index: int  # execution order
    name: str  # the operation's name: "<first TFLite operator>:<opcode>", with a suffix for multi-operation lowerings
    operators: str  # the TFLite operators it implements, e.g. "CONV_2D" or "SOFTMAX"
    target: str  # "NPU" or "CPU"
    reason: str | None  # why a CPU operator is not on the NPU
    cascade: int | None  # the cascade it runs in (None: alone, over whole tensors)
    stripes: int
    stripe: tuple[int, int, int] | None  # OFM rows x columns x channels of its tallest stripe
    ifm_buffer: str | None  # "whole" or "rolling N rows"
    ofm_buffer: str | None
    # None, "in place" (read where stored), "buffered", "double-buffered/N" (channels per slice)
    # or "cascade buffer" (copied once for all the stripes of a cascade)
    weights: str | None
    block: tuple[int, int, int] | None  # OFM block height x width x depth
    cycles: float | None
    macs: int
    weight_bytes: int  # encoded weight and scale streams
    sram_live: int | None  # SRAM bytes in use while it runs (addresses of live buffers, aliases once)


def _buffer_mode(view: FeatureMapView | None) -> str | None:
    if view is None:
        return None
    return f"rolling {view.wrap_rows} rows" if view.wrap_rows else "whole"


def _weights(sop: "ScheduledOperation") -> str | None:
    if sop.encoded is None:
        return None
    if sop.shared_weights is not None:
        return "cascade buffer"  # copied once, read by every stripe
    if sop.weight_buffer:
        return f"double-buffered/{sop.depth_step}" if sop.depth_step else "buffered"
    return "in place"


def _stream_bytes(sop: "ScheduledOperation") -> int:
    if sop.encoded is None:
        return 0
    return sum(r.weight_length + r.scale_length for streams in sop.encoded.slices for r in streams)


def _live_bytes(layout: MemoryLayout, arena: str, step: int) -> int:
    """Bytes of `arena` covered by buffers live at `step` (an in-place alias shares its bytes)."""
    spans = sorted((b.offset, b.offset + b.size) for b in layout.buffers
                   if b.arena == arena and b.start <= step < b.end)
    total, reach = 0, 0
    for lo, hi in spans:
        lo = max(lo, reach)
        if hi > lo:
            total += hi - lo
            reach = hi
    return total


def layers(schedule: NpuSchedule, partition: Partition, layout: MemoryLayout) -> Records:
    """The `Layer` rows of a compiled schedule, in execution order."""
    graph = partition.graph
    config = MemoryConfig.for_target(schedule.accelerator, schedule.system, schedule.memory_mode)
    arena = "scratch" if config.shared_sram else "scratch_fast"
    msched, _, op_steps = memory_schedule(schedule, graph)
    cpu_steps = {s.name: k for k, s in enumerate(msched.steps) if s.name.startswith("cpu ")}
    rows: list[dict] = []
    by_operation: dict[int, dict] = {}
    position = 0
    for kind, i in schedule.order:
        if kind == "cpu":
            verdict = partition.verdicts[i]
            step = cpu_steps.get(f"cpu {i}")
            rows.append(dict(name=f"{i}:{graph.operators[i].name}", operators=graph.operators[i].name,
                             target="CPU", reason=verdict.reason, cascade=None, stripes=0, stripe=None,
                             ifm_buffer=None, ofm_buffer=None, weights=None, block=None, cycles=None, macs=0,
                             weight_bytes=0, sram_live=None if step is None else _live_bytes(layout, arena, step)))
            continue
        for sop in schedule.segments[i].operations:
            whole = sop.stripe_of if sop.stripe_of is not None else sop.lowered
            step = op_steps[position]
            position += 1
            live = _live_bytes(layout, arena, step)
            row = by_operation.get(id(whole))
            if row is None:
                row = by_operation[id(whole)] = dict(
                    name=whole.name, operators="+".join(dict.fromkeys(graph.operators[s].name for s in whole.sources)),
                    target="NPU", reason=None, cascade=sop.cascade, stripes=0, stripe=sop.lowered.ofm.shape,
                    ifm_buffer=_buffer_mode(sop.lowered.ifm), ofm_buffer=_buffer_mode(sop.lowered.ofm),
                    weights=_weights(sop), block=sop.block, cycles=0.0, macs=0, weight_bytes=_stream_bytes(sop),
                    sram_live=live)
                rows.append(row)
            row["stripes"] += 1
            row["cycles"] += float(sop.cost.total_cycles)
            row["macs"] += int(sop.cost.macs)
            row["sram_live"] = max(row["sram_live"], live)
            if sop.lowered.ofm.shape[0] > row["stripe"][0]:
                row["stripe"] = sop.lowered.ofm.shape
    return Records(Layer(index=k, **row) for k, row in enumerate(rows))
