"""MIRROR_PAD along H and W as raw copies, bit-exact.

TFLite's reference kernel fills output position p of an axis padded by (before, after) from
input position

    before + offset - 1 - p          p < before            (the mirror of the leading edge)
    p - before                       inside
    2 * size - 1 - offset - (p - before)   past the input  (the mirror of the trailing edge)

with offset 1 for REFLECT (the edge itself is not repeated) and 0 for SYMMETRIC, and copies
the stored codes as they are. An NPU view cannot step backwards, so each mirrored column and
row is its own copy: the interior first, then each padded column of the interior rows (from
the input), then each padded row, whole width, from the output row it mirrors, which by then
holds its own padded columns. 1 + top + bottom + left + right raw copies (1x1 pools).

On the Ethos-U85 each padded side is one copy of the block of input columns (output rows) it
mirrors, written mirrored along its axis (`lower_reverse.mirrored_copy`, OFM_PRECISION's
reverse field): at most 5 copies, as Vela 5.2's (zoo 8x8x16 padded (1, 2) x (2, 1) on U85-256:
7 copies, 7,174 cycles -> 5).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import UnsupportedError
from .lower_movement import raw_copy
from .lower_reverse import mirrored_copy
from .lowered import FeatureMapView
from .lowering_context import LoweringContext
from .operator_view import OperatorView

REFLECT, SYMMETRIC = 0, 1  # tflite.MirrorPadMode


def mirror_source(p: int, before: int, size: int, offset: int) -> int:
    """The input position TFLite's MIRROR_PAD reads for output position `p` of one axis."""
    if p < before:
        return before + offset - 1 - p
    p -= before
    return p if p < size else 2 * size - 1 - offset - p


def _box(view: FeatureMapView, y: int, x: int, rows: int, cols: int) -> FeatureMapView:
    sy, sx, _ = view.strides
    return replace(view, shape=(rows, cols, view.shape[2]), offset=view.offset + y * sy + x * sx)


def lower_mirror_pad(lw: LoweringContext, v: OperatorView) -> None:
    src, dst = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    paddings = v.inputs[1]
    if paddings is None or not paddings.is_constant:
        raise UnsupportedError(f"operator {v.index} (MIRROR_PAD): the paddings are computed at run time")
    pads = np.asarray(paddings.data).astype(np.int64).reshape(-1, 2)
    rank = len(pads)
    if rank > 4 or (rank == 4 and pads[0].any()):
        raise UnsupportedError(f"operator {v.index} (MIRROR_PAD): pads the batch")
    (top, bottom), (left, right), (front, back) = [(0, 0)] * (3 - min(rank, 3)) + [tuple(p) for p in pads[-3:]]
    if front or back:
        raise UnsupportedError(f"operator {v.index} (MIRROR_PAD): pads the channels")
    mode = int(v.options.get("mode", REFLECT))
    offset = 1 if mode == REFLECT else 0
    h, w, c = src.shape
    if max(top, bottom) > h - offset or max(left, right) > w - offset:
        raise UnsupportedError(f"operator {v.index} (MIRROR_PAD): pads {top, bottom} x {left, right} reach past a "
                               f"{h}x{w} input ({'REFLECT' if offset else 'SYMMETRIC'})")
    name = f"{v.index}:MIRROR_PAD"
    raw_copy(lw, v.index, f"{name}(interior)", src, _box(dst, top, left, h, w))
    for first, n in ((0, left), (left + w, right)):  # each side's columns, from the input
        # Its columns mirror the input's `n` from the one output column `first + n - 1` reads.
        start = mirror_source(first + n - 1, left, w, offset)
        if n > 1 and mirrored_copy(lw, v.index, f"{name}(columns {first}+{n})", _box(src, 0, start, h, n),
                                   _box(dst, top, first, h, n), 1):
            continue
        for x in range(first, first + n):
            column = mirror_source(x, left, w, offset)
            raw_copy(lw, v.index, f"{name}(column {x})", _box(src, 0, column, h, 1), _box(dst, top, x, h, 1))
    width = dst.shape[1]
    for first, n in ((0, top), (top + h, bottom)):  # each side's rows, whole width, from the output
        start = top + mirror_source(first + n - 1, top, h, offset)
        if n > 1 and mirrored_copy(lw, v.index, f"{name}(rows {first}+{n})", _box(dst, start, 0, n, width),
                                   _box(dst, first, 0, n, width), 0):
            continue
        for y in range(first, first + n):
            row = top + mirror_source(y, top, h, offset)
            raw_copy(lw, v.index, f"{name}(row {y})", _box(dst, row, 0, 1, width), _box(dst, y, 0, 1, width))
