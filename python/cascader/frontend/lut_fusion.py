"""Table lookups fused into the operation that produces their input.

An 8-bit unary operator (LOGISTIC, TANH, HARD_SWISH, ...) is lowered on its own as a 1x1
average pool whose activation is a table (`lower_lut`). When the only reader of its input is
that lookup, the producing operation can apply the table itself: the NPU looks the value up
after the producer's own rescale, zero point and clamp, which is exactly the 8-bit code the
reference kernel of the unary operator reads from the tensor between them. The producer then
writes the lookup's output directly: one pass over the feature map and one buffer fewer (Vela
fuses them the same way; MobileNetV3's hard-swishes cost 44k of 450k cycles as passes of their
own on u55-128).
"""

from __future__ import annotations

from dataclasses import replace

from .lowered import LUT_SLOT_0, LoweredOperation
from .lowering_context import LoweringContext

FUSABLE_KINDS = ("conv", "depthwise", "pool", "elementwise")
EIGHT_BIT = ("int8", "uint8")


def _is_lookup(op: LoweredOperation) -> bool:
    """A lookup as `lower_lut` makes it: a 1x1 average pool over raw codes into a table."""
    r = op.registers
    return (op.lut is not None and op.kind == "pool" and r.get("sub_op") == "AVERAGE" and op.ifm.zero_point == 0
            and (r["kernel"]["height"], r["kernel"]["width"]) == (1, 1) and tuple(r.get("ofm_scale", ())) == (1, 0)
            and not any(r.get("padding", (0, 0, 0, 0))) and op.ifm2 is None and op.ifm.dtype in EIGHT_BIT)


def fuse_table_lookups(lw: LoweringContext) -> set[int]:
    """Fuse every lookup whose input buffer only it reads into that buffer's one writer (see
    the module docstring); returns the buffers no operation uses any more."""
    gone: set[int] = set()
    for lookup in [op for op in lw.ops if _is_lookup(op)]:
        t = lookup.ifm.buffer
        writers = [op for op in lw.ops if op.ofm.buffer == t]
        readers = [op for op in lw.ops for v in (op.ifm, op.ifm2) if v is not None and v.buffer == t]
        if len(writers) != 1 or readers != [lookup] or _seen_outside(lw, t):
            continue
        producer = writers[0]
        act = producer.registers.get("activation", {})
        if (producer.kind not in FUSABLE_KINDS or producer.lut is not None or act.get("function", 0) != 0
                or producer.ofm.dtype != lookup.ofm.dtype
                or replace(producer.ofm, zero_point=0) != lookup.ifm
                or lw.ops.index(producer) > lw.ops.index(lookup)):
            continue
        # The producer still computes the input's codes (its zero point and clamp), then looks
        # them up: the table's index is the clamped code, its entries the output's codes.
        producer.ofm = replace(lookup.ofm, zero_point=producer.ofm.zero_point, scale=producer.ofm.scale)
        producer.registers = {**producer.registers, "activation": {**act, "function": LUT_SLOT_0}}
        producer.lut = lookup.lut
        producer.sources = (*producer.sources, *lookup.sources)
        producer.name = f"{producer.name}+{lookup.name}"
        lw.ops.remove(lookup)
        gone.add(t)
    return gone


def _seen_outside(lw: LoweringContext, buffer: int) -> bool:
    """Whether any tensor held in `buffer` is read outside the segment or is a model output."""
    for t in range(len(lw.graph.tensors)):
        if lw.buffer(t) != buffer:
            continue
        if t in lw.graph.outputs or any(c not in lw.members for c in lw.consumers.get(t, [])):
            return True
    return False
