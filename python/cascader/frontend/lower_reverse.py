"""REVERSE_V2 as raw copies of rows or columns, and a channel permutation.

Vela 5.2 leaves REVERSE_V2 on the CPU for Ethos-U55/U65 ("Unsupported reverse mask"). An NPU
view cannot step backwards here (the command encoder writes no negative stride), so along H
or W row (column) p is copied to row (column) n - 1 - p, n copies. The channels would take
one depth-1 copy each, the NPU's slowest shape (64 channels of 8x8: 64 copies, 32,882 cycles
on U55-128), so they go through one 1x1 convolution whose weights are the reversing
permutation: every output channel is one input channel times 1, exact at unit scale, and
the mostly-zero weights compress well (the same 64 channels: 1 operation, 3,904 cycles).
Several reversed axes (TFLite takes a contiguous run of them) go one after the other through
scratch maps, sum(n) operations rather than the product. An axis of size 1 reverses to
itself; reversing nothing is one copy.

The Ethos-U85 writes an OFM mirrored along H, W or C (OFM_PRECISION's reverse field), as
Vela 5.2's U85 REVERSE_V2 does: each axis is one copy reversed on write instead (zoo 8x8x16
along H on U85-256: 8 copies, 6,928 cycles -> 1, 1,414; Vela's 1,688). Its registers carry the identity
transpose too (`ofm_transpose` 0), the mark by which the planner, the layout and the chaining
keep an OFM written out of order whole, in NHWC and out of chains.

TFLite's kernel moves codes as they are, so every operation is raw (zero points 0).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..arch import Accelerator
from ..errors import UnsupportedError
from .lower_movement import hwc_axis, raw_copy
from .lowered import FeatureMapView
from .lowering_context import LoweringContext
from .operation_builder import channel_selection, pool_copy
from .operator_view import OperatorView

# Past this depth the permutation's C x C weights (1 MiB at 1024) are more than the
# per-channel copies are worth keeping off: the channels are copied one by one instead.
PERMUTATION_MAX_CHANNELS = 1024


def reversed_axes(v: OperatorView) -> list[int]:
    """The H/W/C axes (0, 1, 2) REVERSE_V2 reverses, in the order given."""
    t, ifm = v.inputs[1], v.ifm
    assert ifm is not None
    if t is None or not t.is_constant:
        raise UnsupportedError(f"operator {v.index} (REVERSE_V2): the axes are computed at run time")
    rank = len(ifm.shape)
    axes = []
    for axis in np.asarray(t.data).astype(np.int64).reshape(-1).tolist():
        k = hwc_axis(rank, axis)
        if k is None:  # the batch, 1 on the NPU: reversed, it is itself
            continue
        axes.append(k)
    return axes


def lower_reverse(lw: LoweringContext, v: OperatorView) -> None:
    src, dst = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    name = f"{v.index}:REVERSE_V2"
    axes = [k for k in reversed_axes(v) if src.shape[k] > 1]
    if not axes:
        raw_copy(lw, v.index, name, src, dst)
        return
    current = src
    for i, axis in enumerate(axes):
        out = dst if i == len(axes) - 1 else lw.scratch(v.index, f"reversed{i}", dst.shape, dst.dtype)
        if mirrored_copy(lw, v.index, f"{name}(axis {axis})", current, out, axis):
            pass  # the U85's one copy
        elif axis == 2 and src.shape[2] <= PERMUTATION_MAX_CHANNELS:
            _reverse_channels(lw, v.index, f"{name}(channels)", current, out)
        else:
            _reverse_slices(lw, v.index, f"{name}(axis {axis})", current, out, axis)
        current = out


# OFM_PRECISION's reverse field by reversed axis (H, W, C).
OFM_REVERSE_MODES = {0: 1, 1: 2, 2: 3}


def mirrored_copy(lw: LoweringContext, index: int, name: str, src: FeatureMapView, dst: FeatureMapView,
                       axis: int) -> bool:
    """dst = src reversed along `axis` in one U85 copy that writes its OFM mirrored; False (and
    nothing added) where the target is no U85 or the map is int32 (our pools move no 32-bit
    values: `raw_copy`)."""
    if not Accelerator.is_u85(lw.accelerator) or src.dtype == "int32":
        return False
    pool_copy(lw, index, name, replace(src, zero_point=0), replace(dst, zero_point=0), requantize=False,
              tags={"ofm_transpose": 0, "ofm_reverse": OFM_REVERSE_MODES[axis]})
    return True


def _reverse_slices(lw: LoweringContext, index: int, name: str, src: FeatureMapView, dst: FeatureMapView,
                    axis: int) -> None:
    """dst = src reversed along `axis`: slice p to slice n - 1 - p, one raw copy each."""
    n = src.shape[axis]
    extent = list(src.shape)
    extent[axis] = 1
    for p in range(n):
        origin, target = [0, 0, 0], [0, 0, 0]
        origin[axis], target[axis] = p, n - 1 - p
        raw_copy(lw, index, f"{name}[{p}]", src.window(tuple(origin), tuple(extent)),
                 dst.window(tuple(target), tuple(extent)))


def _reverse_channels(lw: LoweringContext, index: int, name: str, src: FeatureMapView, dst: FeatureMapView) -> None:
    """dst = src with its channels in reverse order: a 1x1 convolution by the anti-diagonal."""
    c = src.shape[2]
    channel_selection(lw, index, name, src, dst, c - 1 - np.arange(c))
