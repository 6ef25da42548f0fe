"""MEAN (int8) as one NPU average pool, bit-exact.

TFLite's reference kernel (``QuantizedMeanOrSum``) computes, per output element,

    out = clamp(MBQM(sum(x) - zp_in * N, m', e') + zp_out)

where (m, e) = QuantizeMultiplier(s_in / s_out) (in double) and, for MEAN, the 1/N is folded
into the multiplier: with k = min(floor(log2 N), 32, 31 + e), m' = (m << k) // N and
e' = e - k. That is exactly an NPU average pool over the reduced window:
the pool sums x - zp_in, its output scale is (m', e') with TFL rounding (MBQM), and the
output zero point is added before the clamp.

The reduced axes must be a window of the H x W x C view: H and/or W (a pool over them), or
trailing axes (the tensor re-viewed so that they become the pool's width).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import UnsupportedError
from . import fixed_point as fp
from .lower_movement import hwc_axis
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder
from .operator_view import OperatorView

POOL_HEIGHT_MAX = 256
POOL_AREA_MAX = 256 * 256


def mean_scale(input_scale: float, output_scale: float, elements: int) -> tuple[int, int]:
    """The (multiplier, register shift) of the reference's output rescale, 1/N folded in."""
    m, e = fp.quantize_multiplier(float(np.float64(np.float32(input_scale)) / np.float64(np.float32(output_scale))))
    k = min(elements.bit_length() - 1, 32, 31 + e)
    m, e = (m << k) // elements, e - k
    shift = 31 - e
    if not 0 <= shift <= 63:
        raise UnsupportedError(f"a MEAN rescale of {input_scale / output_scale:g} is beyond the NPU's 6-bit shift")
    return m, shift


def lower_reduce(lw: LoweringContext, v: OperatorView) -> None:
    if v.ifm is None or v.ofm is None or v.ifm.dtype != "int8" or v.ofm.dtype != "int8":
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): the NPU lowering takes int8 in and out")
    src_t = v.ifm
    rank = len(src_t.shape)
    axes = {int(a) % max(rank, 1) for a in np.asarray(v.inputs[1].data).reshape(-1)} if v.inputs[1].is_constant else None
    if axes is None:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): the axes are computed at run time")
    reduced = set()
    for a in axes:
        k = hwc_axis(rank, a)
        if k is None:
            continue  # the batch, 1 here
        reduced.add(k)
    src = lw.view(v.op.inputs[0])
    h, w, c = src.shape
    if reduced <= {0, 1}:
        shape, kernel = (h, w, c), (h if 0 in reduced else 1, w if 1 in reduced else 1)
    elif reduced == {2}:
        shape, kernel = (h * w, c, 1), (1, c)
    elif reduced == {1, 2}:
        shape, kernel = (h, w * c, 1), (1, w * c)
    elif reduced == {0, 1, 2}:
        shape, kernel = (1, h * w * c, 1), (1, h * w * c)
    else:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): reduces H and C but not W")
    if kernel[0] > POOL_HEIGHT_MAX or kernel[0] * kernel[1] > POOL_AREA_MAX:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): a {kernel[0]}x{kernel[1]} window is beyond the "
                               "NPU's pooling limits")
    out_shape = (shape[0] // kernel[0], shape[1] // kernel[1], shape[2])
    ifm = lw.view(v.op.inputs[0], shape) if shape != src.shape else src
    out = lw.view(v.op.outputs[0])
    ofm = out if out.shape == out_shape else lw.view(v.op.outputs[0], out_shape)
    scale = mean_scale(ifm.scale, ofm.scale, math.prod(kernel))
    ops = OperationBuilder(lw, v.index, v.opcode)
    ops.pool("AVERAGE", ifm, ofm, kernel, ofm_scale=scale)
