"""PRELU (int8, uint8, and int16 with an int8 alpha) and int16 LEAKY_RELU as three or four NPU
operations, bit-exact (an 8-bit LEAKY_RELU is a table lookup, `lower_lut`).

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
lowering is three operations (Vela's U55 form, which assumes alpha >= 0).

On the Ethos-U85, with one quantization in and out (the positive branch is then x itself) and
every alpha at most 1 (after its multiplier's rounding: k M 2^-s <= 1 for every slope k), the
product lies on the far side of x from zp for both signs of x - zp (alpha <= 0 or between 0
and 1), so out = MAX(x, MUL(x, alpha)): two operations, the MUL chained into the MAX, as Vela
5.2's U85 PRELU (zoo 8x8x16 on U85-256: 2,074 -> 774 cycles; Vela's 775). Otherwise an
8-bit positive branch is a MUL by 1 scaled by m1 instead of the rescaling pool, which the U85
runs at under half an elementwise operation's speed.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..arch import Accelerator
from ..errors import UnsupportedError
from .lower_lut import lower_lut
from .lower_movement import raw_copy
from .lowered import TYPE_RANGE, full_range
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder, require_8bit_in_out
from .operator_view import OperatorView
from .quantization import multiply_scale, quantise_scale

# TFLite's 16x8 PRELU: int16 input and output, int8 alpha (TFLM's PreluPrepare requires it).
INT16_ALPHA_DTYPE = "int8"


def lower_prelu(lw: LoweringContext, v: OperatorView) -> None:
    assert v.ifm is not None and v.ofm is not None
    int16 = v.ifm.dtype == v.ofm.dtype == "int16"
    if not int16:
        require_8bit_in_out(v)
    x, out = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    alpha = lw.view(v.op.inputs[1])
    if alpha.dtype != (INT16_ALPHA_DTYPE if int16 else x.dtype) or x.shape != out.shape:
        raise UnsupportedError(f"operator {v.index} (PRELU): alpha is {alpha.dtype}, input {x.dtype}" + (
            "; int16 PRELU takes an int8 alpha (TFLM's kernel refuses any other, LiteRT's reads its bytes as int8)"
            if int16 else ""))
    if any(a not in (1, o) for a, o in zip(alpha.shape, out.shape)):
        raise UnsupportedError(f"operator {v.index} (PRELU): alpha {alpha.shape} does not broadcast to {out.shape}")
    ops = OperationBuilder(lw, v.index, "PRELU")
    if int16:
        # The NPU multiplies operands of one type: alpha's codes widened (raw) to int16.
        wide = ops.scratch("alpha_int16", alpha.shape, "int16", alpha.zero_point, alpha.scale)
        raw_copy(lw, v.index, f"{v.index}:PRELU(alpha to int16)", alpha, wide)
        alpha = wide
    # PreluPrepare forms the multiplier in float32.
    m2 = multiply_scale(x.scale, alpha.scale, out.scale)
    slopes = _constant_slopes(lw, v)
    if _max_of_branches(lw, x, out, slopes, m2):
        product = ops.scratch("product", out.shape, out.dtype, out.zero_point, out.scale)
        ops.elementwise("MUL", x, alpha, product, ofm_scale=m2)
        ops.elementwise("MAX", replace(x, zero_point=0), replace(product, zero_point=0), replace(out, zero_point=0))
        return
    positive = _positive_part(ops, x, out)
    negative = ops.scratch("negative", out.shape, out.dtype, out.zero_point, out.scale)
    if slopes is not None and ((slopes >= 0).all() or (slopes <= 0).all()):
        # One-signed alpha (the usual case): the product has the sign of x (or the opposite)
        # everywhere, so clamping the MUL at zp_out already zeroes it for x >= zp.
        ops.elementwise("MUL", x, alpha, negative, ofm_scale=m2, activation=_below(out, (slopes >= 0).all()))
    else:
        # An elementwise MIN against the zero point costs half a clamping pool.
        lo, _ = TYPE_RANGE[x.dtype]
        below = ops.scratch("input_below_zero", x.shape, x.dtype, x.zero_point, x.scale)
        zero = lw.constant(np.array([x.zero_point]), x.dtype)
        ops.elementwise("MIN", replace(x, zero_point=0), zero, replace(below, zero_point=0))
        ops.elementwise("MUL", below, alpha, negative, ofm_scale=m2)
    ops.elementwise("ADD", positive, negative, out, activation=full_range(out.dtype))


def lower_leaky_relu_int16(lw: LoweringContext, v: OperatorView) -> None:
    """int16 LEAKY_RELU (QuantizeLeakyRelu: the identity or the alpha rescale by sign), for
    alpha >= 0 one LRELU: on the U55/U65 with equal quantizations (alpha is its output scale),
    on the Ethos-U85 with any (its LRELU rescales the operand by IFM_SCALE, the identity
    multiplier, at or above zero and by IFM2_SCALE, alpha's, below; both TFLite's double
    rounding, which is MultiplyByQuantizedMultiplier: arch/ethos_u85/elementwise.hpp).
    Otherwise the same three operations as PRELU, alpha a MUL by the constant 1 scaled by
    alpha's multiplier."""
    x, out = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    if x.zero_point or out.zero_point:
        raise UnsupportedError(f"operator {v.index} (LEAKY_RELU): int16 with a non-zero zero point")
    alpha = float(v.options.get("alpha", 0.2))
    # LeakyReluPrepare forms both multipliers in float32.
    alpha_scale = float(np.float32(x.scale) * np.float32(alpha) / np.float32(out.scale))
    ops = OperationBuilder(lw, v.index, "LEAKY_RELU")
    if alpha >= 0 and Accelerator.is_u85(lw.accelerator):
        identity_scale = float(np.float32(x.scale) / np.float32(out.scale))
        # (multiplier, shift, round mode 0: DOUBLE_SYMMETRIC, DBL_RND 0: rounded at bit 31 first)
        ops.elementwise("LRELU", x, None, out, operand_scales=tuple(
            (*quantise_scale(s), 0, 0) for s in (identity_scale, alpha_scale)))
        return
    if x.scale == out.scale and alpha >= 0:
        ops.elementwise("LRELU", x, None, out, ofm_scale=quantise_scale(alpha_scale))
        return
    positive = _positive_part(ops, x, out)
    negative = ops.scratch("negative", out.shape, out.dtype, out.zero_point, out.scale)
    # For alpha < 0 the branch is x * |m| (x < 0: at most zero), taken away from the positive
    # part: the reference's x * m rounds a half towards zero as the NPU rounds the negative
    # x * |m| (s_in 0.0125, s_out 0.001, alpha -0.3 at x = -8734: 32752.5 is 32752), where
    # x * -1 scaled by |m| rounded it away from zero (32753).
    one = lw.constant(np.array([1]), "int16")
    ops.elementwise("MUL", x, one, negative, ofm_scale=quantise_scale(abs(alpha_scale)), activation=_below(out, True))
    ops.elementwise("ADD" if alpha >= 0 else "SUB", positive, negative, out, activation=full_range(out.dtype))


def lower_leaky_relu(lw: LoweringContext, v: OperatorView) -> None:
    """LEAKY_RELU: int16 by `lower_leaky_relu_int16`, 8-bit as a table (`lower_lut`)."""
    (lower_leaky_relu_int16 if v.ifm is not None and v.ifm.dtype == "int16" else lower_lut)(lw, v)


def _max_of_branches(lw: LoweringContext, x, out, slopes: np.ndarray | None, m2: tuple[int, int]) -> bool:
    """Whether out = MAX(x, MUL(x, alpha)) is the reference on this target (module docstring):
    a U85, one quantization in and out, constant slopes k with k M 2^-s <= 1."""
    if not Accelerator.is_u85(lw.accelerator) or slopes is None:
        return False
    same = np.float32(x.scale) == np.float32(out.scale) and x.zero_point == out.zero_point and x.dtype == out.dtype
    multiplier, shift = m2
    return bool(same and (slopes.astype(object) * multiplier <= (1 << shift)).all())


def _positive_part(ops: OperationBuilder, x, out):
    """clamp(zp_out + MBQM(x - zp, s_in / s_out), min=zp_out): the x >= zp branch, zp_out
    elsewhere. A rescaling 1x1 pool; on the Ethos-U85 an 8-bit map's is a MUL by 1 with that
    scale, the same rounding at an elementwise operation's speed (a 16-bit MUL is the slower:
    8x8x16 int16 on U85-256, 2,051 cycles against the pool's 1,474)."""
    lo, hi = TYPE_RANGE[out.dtype]
    identity = quantise_scale(float(np.float32(x.scale) / np.float32(out.scale)))
    positive = ops.scratch("positive", out.shape, out.dtype, out.zero_point, out.scale)
    clamp = dict(function=0, clip_range=0, min=max(out.zero_point, lo), max=hi)
    if Accelerator.is_u85(ops.lw.accelerator) and x.dtype != "int16":
        one = ops.lw.constant(np.array([1]), x.dtype)
        ops.elementwise("MUL", x, one, positive, ofm_scale=identity, activation=clamp)
    else:
        ops.pool("AVERAGE", x, positive, ofm_scale=identity, activation=clamp)
    return positive


def _below(out, alpha_positive: bool) -> dict:
    """The clamp that keeps a one-signed alpha branch on its side of zp_out."""
    lo, hi = TYPE_RANGE[out.dtype]
    keep = dict(min=lo, max=out.zero_point) if alpha_positive else dict(min=out.zero_point, max=hi)
    return dict(function=0, clip_range=0, **keep)


def _constant_slopes(lw: LoweringContext, v: OperatorView) -> np.ndarray | None:
    """alpha - zp_alpha when alpha is a constant, else None."""
    t = lw.graph.tensors[v.op.inputs[1]]
    if not t.is_constant:
        return None
    return np.asarray(t.data).astype(np.int64) - int(t.quantization.zero_point[0])
