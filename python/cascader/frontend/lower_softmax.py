"""SOFTMAX (int8, uint8) as NPU elementwise, pooling and table-lookup operations.

TFLite's reference kernel computes, per row of the last axis, in gemmlowp fixed point:

    diff  = x - max(row)                               (an integer in [-255, 0])
    e     = exp(diff * beta * scale), Q0.31, 0 where diff < diff_min
    sum   = sum(RoundingDivideByPOT(e, 12))            (Q12.19)
    recip = one_over_one_plus_x(sum normalised to [1, 2)), num_bits_over_unit = 12 - clz(sum)
    out   = RoundingDivideByPOT(SRDHM(recip, e), num_bits_over_unit + 23) + type minimum

`diff` has only 256 values, so `e` is a 32-bit table lookup on the NPU's SUB output. The
reciprocal is gemmlowp's three Newton-Raphson steps, each an NPU MUL (scaled by 2^-31: the
SaturatingRoundingDoublingHighMul), SUB or ADD on int32 scratch rows. Every step is the
reference's own arithmetic, so the result is bit-exact (Vela lowers the same way).

The rows are the tensor viewed as R x 1 x C (C the last axis): the row maximum is a 1 x C max
pool over the same bytes viewed as R x C x 1, the row sum a REDUCE_SUM over the channels.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ..errors import UnsupportedError
from . import fixed_point as fp
from .lowered import LUT_SLOT_0, FeatureMapView, dense_strides, full_range
from .operation_builder import OperationBuilder, require_8bit_in_out
from .operator_view import OperatorView

if TYPE_CHECKING:
    from .lower import _Lowering

SCALED_DIFF_INTEGER_BITS = 5  # the reference's Q5.26 input to exp()
ACCUMULATION_INTEGER_BITS = 12  # its Q12.19 sum of exponentials


def exp_table(beta: float, input_scale: float) -> np.ndarray:
    """exp(beta * scale * diff) in Q0.31 for diff = -255 .. 0, as TFLite's reference SOFTMAX
    prepares and evaluates it (PreprocessSoftmaxScaling, CalculateInputRadius,
    exp_on_negative_values); 0 below diff_min, where the reference skips the element."""
    real = min(beta * input_scale * (1 << (31 - SCALED_DIFF_INTEGER_BITS)), (1 << 31) - 1.0)
    if real <= 1.0:
        raise UnsupportedError(f"SOFTMAX with beta * input scale = {beta * input_scale:g}: the reference kernel "
                               "needs an input multiplier above 1")
    multiplier, left_shift = fp.quantize_multiplier_greater_than_one(real)
    radius = ((1 << SCALED_DIFF_INTEGER_BITS) - 1) * (1 << (31 - SCALED_DIFF_INTEGER_BITS)) / (1 << left_shift)
    diff_min = -int(np.floor(radius))
    diff = np.arange(-255, 1, dtype=np.int64)
    scaled = fp.multiply_by_quantized_multiplier_greater_than_one(diff, multiplier, left_shift)
    e = fp.exp_on_negative_values(scaled, SCALED_DIFF_INTEGER_BITS)
    return np.where(diff >= diff_min, e, 0).astype(np.int64)


def lower_softmax(lw: "_Lowering", v: OperatorView) -> None:
    require_8bit_in_out(v)
    ifm_t = v.ifm
    assert ifm_t is not None
    depth = int(ifm_t.shape[-1]) if len(ifm_t.shape) else 1
    rows = int(ifm_t.size) // depth
    x = lw.view(v.op.inputs[0], (rows, 1, depth))
    out = lw.view(v.op.outputs[0], (rows, 1, depth))
    if out.zero_point != (-128 if out.dtype == "int8" else 0):
        raise UnsupportedError(f"operator {v.index} (SOFTMAX): output zero point {out.zero_point}; TFLite's "
                               "reference writes the type's minimum as zero")
    table = exp_table(float(v.options.get("beta", 1.0)), x.scale)
    ops = OperationBuilder(lw, v.index, "SOFTMAX")
    row, vec = (rows, 1, 1), (rows, 1, depth)
    one = lambda value: lw.constant(np.array([value]), "int32")  # noqa: E731

    # The row maximum, on raw values: a 1 x C max pool over the rows viewed as R x C x 1.
    as_columns = FeatureMapView(x.buffer, (rows, depth, 1), x.dtype, 0, x.scale,
                                dense_strides((rows, depth, 1), x.element_size), x.offset)
    peak = ops.scratch("max", row, x.dtype)
    ops.pool("MAX", as_columns, peak, kernel=(1, depth))
    # diff = x - max, offset by 127 into the LUT's signed 8-bit index, looked up as exp(diff).
    exp = ops.scratch("exp", vec, "int32", zero_point=127)
    ops.elementwise("SUB", replace(x, zero_point=0), peak, exp, lut=table.astype("<i4").tobytes(),
                    activation=dict(function=LUT_SLOT_0, clip_range=3, min=-128, max=127))
    exp = replace(exp, zero_point=0)
    # Rescale<12>: into the Q12.19 accumulator, rounding half up (the values are >= 0).
    exp12 = ops.scratch("exp_q12", vec, "int32")
    ops.elementwise("SHR", exp, one(ACCUMULATION_INTEGER_BITS), exp12, rounding="NATURAL", global_scale=False)
    total = ops.scratch("sum", row, "int32")
    ops.pool("REDUCE_SUM", exp12, total, rounding="NATURAL")
    # GetReciprocal: normalise the sum to [1, 2) by its leading zeros.
    clz = ops.scratch("headroom_plus_one", row, "int32")
    ops.elementwise("CLZ", total, None, clz, global_scale=False)
    right_shift = ops.scratch("right_shift", row, "int32")
    bits = 8  # the output type's width
    ops.elementwise("SUB", one(ACCUMULATION_INTEGER_BITS + 31 - bits), clz, right_shift)
    headroom = ops.scratch("headroom", row, "int32")
    ops.elementwise("SUB", clz, one(1), headroom)
    # sum << headroom is in [2^30, 2^31): exactly the reference's RoundingHalfSum of
    # (sum << (headroom + 1)) - 2^31 and 1.0, the half denominator (no rounding is lost).
    half_denominator = ops.scratch("half_denominator", row, "int32")
    ops.elementwise("SHL", total, headroom, half_denominator, global_scale=False)
    # one_over_one_plus_x_for_x_in_0_1: x = 48/17 - 32/17 * d, then three Newton-Raphson steps
    # x += 4 * x * (1 - d * x) in Q2.29.
    x0 = ops.scratch("reciprocal_0", row, "int32")
    ops.multiply(half_denominator, one(-1010580540), x0)  # -32/17, Q2.29
    ops.elementwise("ADD", x0, one(1515870810), x0)  # 48/17, Q2.29
    estimate = x0
    for step in range(3):
        dx = ops.scratch(f"d_times_x_{step}", row, "int32")
        ops.multiply(estimate, half_denominator, dx)
        residual = ops.scratch(f"one_minus_dx_{step}", row, "int32")
        ops.elementwise("SUB", one(1 << 29), dx, residual)
        correction = ops.scratch(f"correction_{step}", row, "int32")
        ops.multiply(estimate, residual, correction)
        ops.elementwise("MUL", correction, one(4), correction)  # Rescale<2>: a saturating x4
        following = ops.scratch(f"reciprocal_{step + 1}", row, "int32")
        ops.elementwise("ADD", estimate, correction, following)
        estimate = following
    # Rescale<0>(ExactMulByPot<-1>(x)): Q2.29 -> Q0.31 is a saturating x2.
    scale = ops.scratch("reciprocal", row, "int32")
    ops.elementwise("MUL", estimate, one(2), scale)
    scaled = ops.scratch("scaled_exp", vec, "int32")
    ops.multiply(exp, scale, scaled)
    # RoundingDivideByPOT by num_bits_over_unit + 31 - 8, plus the type's minimum (the OFM
    # zero point), clamped to the type.
    ops.elementwise("SHR", scaled, right_shift, out, rounding="NATURAL", global_scale=False,
                    activation=full_range(out.dtype))
