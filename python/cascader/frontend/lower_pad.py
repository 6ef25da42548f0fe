"""PAD and PADV2 as a copy of the input into the output's interior plus fills of the border.

TFLite's kernels copy the input's codes as they are and fill the border with one code: the
output's zero point (PAD, and PADV2 without a value) or PADV2's constant, which the kernel
takes only in the output's quantization. So every copy is raw, whatever the zero points: the
interior from the input, and up to six border boxes (before and after along H, W and C, none
overlapping) from a constant fill.

A PAD that the core can fold into the padding of the convolutions reading it (`lower`'s
`_fold_pads`) never gets here; one along one axis whose input's producer writes it into the
interior in place (`lower`'s `_slice_pads`, `LoweringContext.slices`) has no copy.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from .lower_movement import hwc_axis, raw_copy
from .lowering_context import LoweringContext
from .operator_view import OperatorView


def pad_value(v: OperatorView) -> int:
    """The code TFLite fills the border with: PADV2's constant, else the output's zero point."""
    value = v.inputs[2] if len(v.inputs) > 2 else None
    if value is not None:
        if not value.is_constant:
            raise UnsupportedError(f"operator {v.index} ({v.opcode}): the pad value is computed at run time")
        return int(np.asarray(value.data).reshape(-1)[0])
    assert v.ofm is not None and v.ofm.quantization is not None
    return int(v.ofm.quantization.zero_point[0])


def lower_pad(lw: LoweringContext, v: OperatorView) -> None:
    src, dst = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    pads = np.asarray(lw.graph.tensors[v.op.inputs[1]].data).astype(np.int64).reshape(-1, 2)
    hwc = [(0, 0)] * 3
    for axis, (before, after) in enumerate(pads.tolist()):
        k = hwc_axis(len(pads), axis)
        if k is None:
            if before or after:
                raise UnsupportedError(f"operator {v.index} ({v.opcode}): pads the batch")
            continue
        hwc[k] = (before, after)
    (t0, t1), (l0, l1), (c0, c1) = hwc
    h, w, c = dst.shape
    sh, sw, sc = src.shape
    name = f"{v.index}:{v.opcode}"
    if lw.slices.get(v.op.inputs[0], (None,))[0] != v.op.outputs[0]:  # else its producer wrote it there
        raw_copy(lw, v.index, name, src, dst.window((t0, l0, c0), src.shape))
    value = pad_value(v)
    borders = [((0, 0, 0), (t0, w, c)), ((h - t1, 0, 0), (t1, w, c)),
               ((t0, 0, 0), (sh, l0, c)), ((t0, w - l1, 0), (sh, l1, c)),
               ((t0, l0, 0), (sh, sw, c0)), ((t0, l0, c - c1), (sh, sw, c1))]
    for origin, shape in borders:
        if all(shape):
            raw_copy(lw, v.index, f"{name}(border)", lw.fill(value, dst, shape), dst.window(origin, shape))
