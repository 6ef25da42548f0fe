"""TILE as raw copies that double the tiled block inside the output.

The input goes to the output's first tile; then, axis by axis from the channels outwards,
the block written so far is copied next to itself, doubling it until the axis holds its
multiple (the last copy takes only what is left). That is 1 + sum(ceil(log2 m)) copies for
multiples m, each element of the output written once. Vela 5.2 copies the block once per
multiple into a fresh intermediate per axis: sum(m) copies, each axis read and written
again. The channels go first so that the later, larger blocks cover whole rows or whole
pixels of the output.

TFLite's kernel copies codes as they are, so every copy is raw.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from .lower_movement import hwc_axis, raw_copy
from .lowering_context import LoweringContext
from .operator_view import OperatorView


def tile_multiples(v: OperatorView) -> tuple[int, int, int]:
    """The multiples along H, W and C (the batch's must be 1)."""
    t = v.inputs[1]
    if t is None or not t.is_constant:
        raise UnsupportedError(f"operator {v.index} (TILE): the multiples are computed at run time")
    multiples = np.asarray(t.data).astype(np.int64).reshape(-1).tolist()
    hwc = [1, 1, 1]
    for axis, m in enumerate(multiples):
        k = hwc_axis(len(multiples), axis)
        if k is None:
            if m != 1:
                raise UnsupportedError(f"operator {v.index} (TILE): tiles the batch")
            continue
        hwc[k] = m
    return hwc[0], hwc[1], hwc[2]


def lower_tile(lw: LoweringContext, v: OperatorView) -> None:
    src, dst = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    multiples = tile_multiples(v)
    name = f"{v.index}:TILE"
    raw_copy(lw, v.index, name, src, dst.window((0, 0, 0), src.shape))
    block = list(src.shape)
    for axis in (2, 1, 0):
        total = block[axis] * multiples[axis]
        while block[axis] < total:
            n = min(block[axis], total - block[axis])
            extent, origin = list(block), [0, 0, 0]
            extent[axis], origin[axis] = n, block[axis]
            raw_copy(lw, v.index, f"{name}(axis {axis} at {block[axis]})", dst.window((0, 0, 0), tuple(extent)),
                     dst.window(tuple(origin), tuple(extent)))
            block[axis] += n
