"""PAD as a copy of the input into the output's interior plus fills of the border from a constant.

A PAD that the core can fold into the padding of the convolutions reading it (`lower`'s
`_fold_pads`) never gets here.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import UnsupportedError
from .lowering_context import LoweringContext
from .operation_builder import pool_copy
from .operator_view import OperatorView


def lower_pad(lw: LoweringContext, v: OperatorView) -> None:
    src, dst = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    pads = np.asarray(lw.graph.tensors[v.op.inputs[1]].data).reshape(-1, 2)
    rank = len(v.ofm.shape)
    if rank == 4 and pads[0].any():
        raise UnsupportedError(f"operator {v.index}: PAD along the batch")
    hwc = [(0, 0)] * (3 - min(rank, 3)) + [tuple(int(p) for p in row) for row in pads[-3:]]
    pad_value = dst.zero_point
    if len(v.op.inputs) > 2 and v.op.inputs[2] >= 0:  # PADV2's constant
        pad_value = int(np.asarray(lw.graph.tensors[v.op.inputs[2]].data).reshape(-1)[0])
    h, w, c = dst.shape
    (top, _), (left, _), (front, _) = hwc
    interior = dst.offset + top * dst.strides[0] + left * dst.strides[1] + front * dst.strides[2]
    pool_copy(lw, v.index, f"{v.index}:PAD", src, replace(dst, shape=src.shape, offset=interior), requantize=False)
    # The border: up to six boxes around the interior, filled from a constant.
    boxes = []
    (t0, t1), (l0, l1), (c0, c1) = hwc
    sh, sw, sc = src.shape
    if t0:
        boxes.append(((0, 0, 0), (t0, w, c)))
    if t1:
        boxes.append(((h - t1, 0, 0), (t1, w, c)))
    if l0:
        boxes.append(((t0, 0, 0), (sh, l0, c)))
    if l1:
        boxes.append(((t0, w - l1, 0), (sh, l1, c)))
    if c0:
        boxes.append(((t0, l0, 0), (sh, sw, c0)))
    if c1:
        boxes.append(((t0, l0, c - c1), (sh, sw, c1)))
    for origin, shape in boxes:
        fill = lw.fill(pad_value, dst, shape)
        offset = dst.offset + sum(o * s for o, s in zip(origin, dst.strides))
        pool_copy(lw, v.index, f"{v.index}:PAD(border)", fill, replace(dst, shape=shape, offset=offset),
                  requantize=False)
