"""PRELU (int8, uint8) as three or four NPU operations, bit-exact.

TFLite's reference PRELU picks one of two rescales by the input's sign:

    out = zp_out + MBQM(x - zp, m1)                     if x >= zp   (m1 = s_in / s_out)
    out = zp_out + MBQM((x - zp) * (a - zp_a), m2)      otherwise    (m2 = s_in * s_a / s_out)

The NPU has no select, but each branch can be made to contribute nothing outside its half:

    positive = clamp(zp_out + MBQM(x - zp, m1), min=zp_out)     a rescaling 1x1 pool
    x_neg    = min(x, zp)                                       an elementwise MIN (raw values)
    negative = zp_out + MBQM((x_neg - zp) * (a - zp_a), m2)     a MUL, alpha broadcast
    out      = (positive - zp_out) + (negative - zp_out) + zp_out   an unscaled ADD

For x >= zp, x_neg - zp is 0 and so is the negative branch; for x < zp the rescaled value is
negative and the clamp leaves zp_out. One term is always zero, so the ADD is exact and its
clamp is the reference's. MBQM (MultiplyByQuantizedMultiplier) is the NPU's TFL rounding.
When every alpha has one sign, a clamp of the MUL at zp_out does what x_neg does, and the
lowering is three operations (Vela's, which assumes alpha >= 0).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ..errors import UnsupportedError
from .lowered import full_range
from .operation_builder import EIGHT_BIT_RANGE, OperationBuilder, require_8bit_in_out
from .operator_view import OperatorView
from .quantization import multiply_scale, quantise_scale

if TYPE_CHECKING:
    from .lower import _Lowering

def lower_prelu(lw: "_Lowering", v: OperatorView) -> None:
    require_8bit_in_out(v)
    x, out = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    alpha = lw.view(v.op.inputs[1])
    if alpha.dtype != x.dtype or x.shape != out.shape:
        raise UnsupportedError(f"operator {v.index} (PRELU): alpha is {alpha.dtype}, input {x.dtype}")
    if any(a not in (1, o) for a, o in zip(alpha.shape, out.shape)):
        raise UnsupportedError(f"operator {v.index} (PRELU): alpha {alpha.shape} does not broadcast to {out.shape}")
    lo, hi = EIGHT_BIT_RANGE[x.dtype]
    ops = OperationBuilder(lw, v.index, "PRELU")
    # PreluPrepare forms both multipliers in float32.
    identity = quantise_scale(float(np.float32(x.scale) / np.float32(out.scale)))
    positive = ops.scratch("positive", out.shape, out.dtype, out.zero_point, out.scale)
    ops.pool("AVERAGE", x, positive, ofm_scale=identity,
             activation=dict(function=0, clip_range=0, min=max(out.zero_point, lo), max=hi))
    negative = ops.scratch("negative", out.shape, out.dtype, out.zero_point, out.scale)
    m2 = multiply_scale(x.scale, alpha.scale, out.scale)
    slopes = _constant_slopes(lw, v)
    if slopes is not None and ((slopes >= 0).all() or (slopes <= 0).all()):
        # One-signed alpha (the usual case): the product has the sign of x (or the opposite)
        # everywhere, so clamping the MUL at zp_out already zeroes it for x >= zp.
        keep = dict(min=lo, max=out.zero_point) if (slopes >= 0).all() else dict(min=out.zero_point, max=hi)
        ops.elementwise("MUL", x, alpha, negative, ofm_scale=m2, activation=dict(function=0, clip_range=0, **keep))
    else:
        # An elementwise MIN against the zero point costs half a clamping pool.
        below = ops.scratch("input_below_zero", x.shape, x.dtype, x.zero_point, x.scale)
        zero = lw.constant(np.array([x.zero_point]), x.dtype)
        ops.elementwise("MIN", replace(x, zero_point=0), zero, replace(below, zero_point=0))
        ops.elementwise("MUL", below, alpha, negative, ofm_scale=m2)
    ops.elementwise("ADD", positive, negative, out, activation=full_range(out.dtype))


def _constant_slopes(lw: "_Lowering", v: OperatorView) -> np.ndarray | None:
    """alpha - zp_alpha when alpha is a constant, else None."""
    t = lw.graph.tensors[v.op.inputs[1]]
    if not t.is_constant:
        return None
    return np.asarray(t.data).astype(np.int64) - int(t.quantization.zero_point[0])
