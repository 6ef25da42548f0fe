"""Feature maps of a depth that is not a multiple of 16, stored as 16-channel bricks (NHCWB16)
on the targets where that is faster.

The lowering stores a map only the NPU sees as bricks when that costs no SRAM
(`frontend.lower`): a depth of 24 stored as 32 carries a third more bytes, and on most targets
the operations run as fast either way, so those stay NHWC. Not on all: on the U65-512 the two
cores read a 24-channel NHWC map in strided bursts, and MobileNetV1-0.75's first depthwise
(96 x 96 x 24) takes 65,280 cycles NHWC against 44,304 as bricks (Vela stores every such map
as bricks). Whether it pays depends on the accelerator and the memories, so it is decided here,
per target, on the cycle model the schedule costs operations with.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from . import _core
from .frontend.lowered import LoweredOperation, LoweredSegment, brick_strides, round16, views_whole_nhwc
from .perf import _memory

if TYPE_CHECKING:
    from .schedule import _Target

# A map is stored as bricks when that saves at least this share of the cycles of the
# operations that read or write it, and the compile keeps the bricks when together they save
# at least MIN_TOTAL_SAVING of the whole schedule's: bricks cost SRAM, and a saving within the
# cycle model's noise does not buy it (zoo MobileNetV1-0.75 at 32 x 32 on U55-128: 400 of
# 1.8M cycles for 10% more SRAM).
MIN_SAVING = 0.01
MIN_TOTAL_SAVING = 0.001


def _padded_candidates(seg: LoweredSegment, cpu_visible: set[int]) -> dict[int, tuple[list[int], int]]:
    """Buffers the NPU alone reads and writes, stored NHWC, viewed whole by every operation,
    with a depth that bricks would pad: each with the operations that view it and its element
    size."""
    users: dict[int, list[int]] = {}
    element_size: dict[int, int] = {}
    whole: dict[int, bool] = {}
    for k, op in enumerate(seg.operations):
        for v in (op.ifm, op.ifm2, op.ofm):
            if v is None or v.buffer in seg.constants:
                continue
            if k not in users.setdefault(v.buffer, []):
                users[v.buffer].append(k)
            element_size[v.buffer] = v.element_size
            ok = views_whole_nhwc(v, seg.shapes.get(v.buffer)) and op.kind != "dma"
            whole[v.buffer] = whole.get(v.buffer, True) and ok
    return {b: (ops, element_size[b]) for b, ops in users.items()
            if whole[b] and b not in cpu_visible and round16(seg.shapes[b][2]) != seg.shapes[b][2]}


def _as_bricks(op: LoweredOperation, buffer: int) -> LoweredOperation:
    def convert(v):
        if v is None or v.buffer != buffer:
            return v
        return replace(v, layout="NHCWB16", strides=brick_strides(v.shape, v.element_size))

    return replace(op, ifm=convert(op.ifm), ifm2=convert(op.ifm2), ofm=convert(op.ofm))


def _cycles(target: "_Target", op: LoweredOperation, buffer: int, memory: str | None) -> float:
    """`op`'s cycles on `target`, with its views of `buffer` in `memory` when given (else
    where the schedule costs them)."""
    if memory is None:
        return target.cost(op).total_cycles
    described = target.npu_op(op)  # a copy of the target's description
    area = _memory(memory)
    for name in ("ifm", "ofm"):
        if getattr(op, name).buffer == buffer:
            getattr(described, name).memory = area  # a reference into `described`
    if op.ifm2 is not None and op.ifm2.buffer == buffer:
        ifm2 = described.ifm2  # an optional: a copy, set back
        ifm2.memory = area
        described.ifm2 = ifm2
    return _core.estimate(described, target.arch).total_cycles


def brick_padded_maps(segments: list[LoweredSegment], target: "_Target", memory: str | None = None
                      ) -> list[LoweredSegment]:
    """`segments` with the padded maps that run faster as bricks on `target` stored so (new
    segments; those given are left as they are). `memory`: judge each map as living there (the
    slow memory a budget evicts maps to, `evicted_bricks`), not where the schedule costs it."""
    out = []
    for seg in segments:
        ops = list(seg.operations)
        buffers = dict(seg.buffers)
        changed = False
        for b, (users, element_size) in _padded_candidates(seg, target.cpu_visible).items():
            before = sum(_cycles(target, ops[k], b, memory) for k in users)
            trial = {k: _as_bricks(ops[k], b) for k in users}
            after = sum(_cycles(target, op, b, memory) for op in trial.values())
            if after < before * (1 - MIN_SAVING):
                changed = True
                for k, op in trial.items():
                    ops[k] = op
                h, w, c = seg.shapes[b]
                buffers[b] = h * w * round16(c) * element_size
        out.append(replace(seg, operations=ops, buffers=buffers) if changed else seg)
    return out
