"""TILE as raw copies that double the tiled block inside the output.

The input goes to the output's first tile; then, axis by axis from the channels outwards,
the block written so far is copied next to itself, doubling it until the axis holds its
multiple (the last copy takes only what is left). That is 1 + sum(ceil(log2 m)) copies for
multiples m, each element of the output written once. Vela 5.2 copies the block once per
multiple into a fresh intermediate per axis: sum(m) copies, each axis read and written
again. The channels go first so that the later, larger blocks cover whole rows or whole
pixels of the output.

TFLite's kernel copies codes as they are, so every copy is raw.

On the Ethos-U85 the cycle model also weighs Vela's order: the inner axes tiled in a scratch
map (the fast memory), then the outermost tiled axis one copy per tile from it, so that no
copy reads the output back (on the default Dedicated_Sram system a model output lives in
DRAM: zoo 4x4x16 tiled (2, 2) on U85-256, 3,195 cycles doubling in the output, Vela 3,054).
"""

from __future__ import annotations

import numpy as np

from ..arch import Accelerator
from ..errors import UnsupportedError
from .lower_movement import hwc_axis, raw_copy
from .lower_ofm_transpose import trial_cycles
from .lowered import FeatureMapView
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
    if Accelerator.is_u85(lw.accelerator) and any(m > 1 for m in multiples):
        doubled = trial_cycles(lw, lambda context: _doubled(context, v.index, name, src, dst, multiples))
        staged = trial_cycles(lw, lambda context: _staged(context, v.index, name, src, dst, multiples))
        if staged is not None and (doubled is None or staged < doubled):
            _staged(lw, v.index, name, src, dst, multiples)
            return
    _doubled(lw, v.index, name, src, dst, multiples)


def _doubled(lw: LoweringContext, index: int, name: str, src: FeatureMapView, dst: FeatureMapView,
             multiples: tuple[int, int, int]) -> None:
    """dst = src tiled `multiples` times: src into dst's first tile, then the block written so
    far copied next to itself, axis by axis from the channels outwards."""
    raw_copy(lw, index, name, src, dst.window((0, 0, 0), src.shape))
    block = list(src.shape)
    for axis in (2, 1, 0):
        total = block[axis] * multiples[axis]
        while block[axis] < total:
            n = min(block[axis], total - block[axis])
            extent, origin = list(block), [0, 0, 0]
            extent[axis], origin[axis] = n, block[axis]
            raw_copy(lw, index, f"{name}(axis {axis} at {block[axis]})", dst.window((0, 0, 0), tuple(extent)),
                     dst.window(tuple(origin), tuple(extent)))
            block[axis] += n


def _staged(lw: LoweringContext, index: int, name: str, src: FeatureMapView, dst: FeatureMapView,
            multiples: tuple[int, int, int]) -> None:
    """dst = src tiled, Vela's order: the inner tiled axes `_doubled` into a scratch map (none:
    src itself), then that block copied once per tile of the outermost tiled axis."""
    outer = next(a for a in (0, 1, 2) if multiples[a] > 1)
    inner = tuple(1 if a == outer else m for a, m in enumerate(multiples))
    block = tuple(d * m for d, m in zip(src.shape, inner))
    source = src
    if any(m > 1 for m in inner):
        source = lw.scratch(index, "tiled_block", block, dst.dtype, dst.zero_point, dst.scale)
        _doubled(lw, index, f"{name}(block)", src, source, inner)
    for k in range(multiples[outer]):
        origin = [0, 0, 0]
        origin[outer] = k * block[outer]
        raw_copy(lw, index, f"{name}(axis {outer} tile {k})", source, dst.window(tuple(origin), block))
