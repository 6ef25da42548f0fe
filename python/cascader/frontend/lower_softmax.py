"""SOFTMAX (int8, uint8; out in the same type or int16) as NPU elementwise, pooling and
table-lookup operations.

TFLite's reference kernel computes, per row of the last axis, in gemmlowp fixed point:

    diff  = x - max(row)                               (an integer in [-255, 0])
    e     = exp(diff * beta * scale), Q0.31, 0 where diff < diff_min
    sum   = sum(RoundingDivideByPOT(e, 12))            (Q12.19)
    recip = one_over_one_plus_x(sum normalised to [1, 2)), num_bits_over_unit = 12 - clz(sum)
    out   = RoundingDivideByPOT(SRDHM(recip, e), num_bits_over_unit + 31 - output bits) + type minimum

`diff` has only 256 values, so `e` is a 32-bit table lookup on the NPU's SUB output. The
reciprocal is gemmlowp's three Newton-Raphson steps, each an NPU MUL (scaled by 2^-31: the
SaturatingRoundingDoublingHighMul), SUB or ADD on int32 scratch rows. Every step is the
reference's own arithmetic, so the result is bit-exact (Vela lowers the same way).

The rows are the tensor's positions on a G1 x G2 grid (its last two non-channel axes; C the
last axis): the row maximum is a 1 x C max pool over the same bytes viewed as R x C x 1 (R =
G1 x G2), the row sum a REDUCE_SUM over the channels of the grid. (On an R x 1 column the
NPU's blocks are one pixel wide: YOLOv8's 4 x 756 x 16 row sum cost 8x Vela's.) On the
Ethos-U85 the maximum may instead be a C x 1 pool down the rows copied C outermost by the OFM
transpose, whichever the cycle model finds faster (`_row_max`).

int16 (`lower_softmax_int16`) follows TFLite's SoftmaxInt16: the scaled difference looked up in
a 513-sample exp table over [-10, 0], summed, normalised by its leading zeros and looked up in
a 1 / (1 + x) table over [0, 1]; the NPU's 16-bit interpolating LUT is the reference's
generic_int16_table_lookup, so both tables are TFLite's own (`lower_lut.int16_range_table`).
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from ..arch import Accelerator
from ..errors import UnsupportedError
from . import fixed_point as fp
from .lower_lut import int16_range_table
from .lower_ofm_transpose import ofm_transpose_copy, trial_cycles
from .lowered import LUT_SLOT_0, TENSOR_DIM_MAX, TYPE_RANGE, FeatureMapView, dense_strides, full_range
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder, require_8bit_in_out
from .operator_view import OperatorView

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


def _rows(lw: LoweringContext, v: OperatorView) -> tuple[FeatureMapView, FeatureMapView, int, int]:
    """The input and output on the grid of rows, G1 x G2 x C (C the last axis); R and C."""
    ifm_t = v.ifm
    assert ifm_t is not None
    depth = int(ifm_t.shape[-1]) if len(ifm_t.shape) else 1
    rows = int(ifm_t.size) // depth
    across = int(ifm_t.shape[-2]) if len(ifm_t.shape) >= 2 else 1
    grid = (rows // across, across, depth)
    return lw.view(v.op.inputs[0], grid), lw.view(v.op.outputs[0], grid), rows, depth


def _dense(view: FeatureMapView, shape: tuple[int, int, int]) -> FeatureMapView:
    """The same dense NHWC bytes in another shape."""
    return replace(view, shape=shape, strides=dense_strides(shape, view.element_size))


def _row_max(ops: OperationBuilder, x: FeatureMapView, rows: int, depth: int) -> FeatureMapView:
    """The row maximum, on raw values: a 1 x C max pool over the rows viewed as R x C x 1, or on
    the Ethos-U85, where the cycle model finds it faster, a C x 1 max pool down a copy of the
    rows the OFM transpose wrote with C outermost (`_transposed_row_max`). The depth-1 pool
    runs one-element-deep blocks: 2,146 cycles for transformer_block's 32 x 16 scores on
    U85-128, 835 as the copy (595) and a 16 x 1 pool 16 deep (240); Vela 5.2 transposes too."""
    peak = ops.scratch("max", x.shape[:2] + (1,), x.dtype)
    x = replace(x, zero_point=0)

    def depth_one(context: LoweringContext) -> None:
        OperationBuilder(context, ops.index, ops.opcode).pool("MAX", _dense(x, (rows, depth, 1)),
                                                              _dense(peak, (rows, 1, 1)), kernel=(1, depth))

    ways = [depth_one]
    if depth > 1 and Accelerator.is_u85(ops.lw.accelerator):  # its kernel height register takes any C
        # The rows on their grid (G1 x G2) or in one line (1 x R): the pool's OFM depth differs.
        for grid in dict.fromkeys((x.shape[:2], (1, rows))):
            if grid[1] <= TENSOR_DIM_MAX:
                ways.append(functools.partial(_transposed_row_max, ops, x, peak, grid))
    # One way needs no costing; without a cycle model to choose by, the pool any target runs.
    costs = [trial_cycles(ops.lw, way) for way in ways] if len(ways) > 1 else [None]
    if costs[0] is None:
        depth_one(ops.lw)
    else:
        ways[min((c, k) for k, c in enumerate(costs) if c is not None)[1]](ops.lw)
    return peak


def _transposed_row_max(ops: OperationBuilder, x: FeatureMapView, peak: FeatureMapView, grid: tuple[int, int],
                        context: LoweringContext) -> bool:
    """The row maximum as a U85 copy of the rows (A x B x C, `grid` A x B) with an OFM transpose
    to C x A x B and a C x 1 max pool down its columns into 1 x A x B: the same bytes as the R
    row maxima. False (nothing made) where the target has no such copy."""
    a, b = grid
    depth = x.shape[2]
    columns = context.scratch(ops.index, "max_columns", (depth, a, b), x.dtype)
    made = ofm_transpose_copy(context, ops.index, f"{ops.index}:{ops.opcode}(max_columns)", _dense(x, (a, b, depth)),
                              columns, (2, 0, 1))
    if made is None:
        return False
    context.add(made[1])
    OperationBuilder(context, ops.index, ops.opcode).pool("MAX", columns, _dense(peak, (1, a, b)), kernel=(depth, 1))
    return True


def lower_softmax(lw: LoweringContext, v: OperatorView) -> None:
    if v.ifm is not None and v.ifm.dtype == "int16":
        lower_softmax_int16(lw, v)
        return
    if v.ofm is None or v.ofm.dtype != "int16":
        require_8bit_in_out(v)
    x, out, rows, depth = _rows(lw, v)
    if out.zero_point != TYPE_RANGE[out.dtype][0]:
        raise UnsupportedError(f"operator {v.index} (SOFTMAX): output zero point {out.zero_point}; TFLite's "
                               "reference writes the type's minimum as zero")
    table = exp_table(float(v.options.get("beta", 1.0)), x.scale)
    ops = OperationBuilder(lw, v.index, "SOFTMAX")
    vec = x.shape
    row = vec[:2] + (1,)
    one = lambda value: lw.constant(np.array([value]), "int32")  # noqa: E731

    peak = _row_max(ops, x, rows, depth)
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
    bits = 8 * out.element_size  # the output type's width: int16 for Softmax<int8, int16_t>
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
    # RoundingDivideByPOT by num_bits_over_unit + 31 - bits, plus the type's minimum (the OFM
    # zero point), clamped to the type.
    ops.elementwise("SHR", scaled, right_shift, out, rounding="NATURAL", global_scale=False,
                    activation=full_range(out.dtype))


# The reference's int16 tables: exp over [-10, 0] (the scaled difference's range) and
# 1 / (1 + x) over [0, 1], both onto [-1, 1] (Q0.15 after the interpolation), in double: built
# so, the reciprocal table equals the one the reference's results need (seeds 0-9 exact; the
# float32 LUTPopulate form differs in two entries and misses on 3 of 10 seeds).
EXP_RANGE, RECIPROCAL_RANGE, TABLE_OUTPUT = (-10.0, 0.0), (0.0, 1.0), (-1.0, 1.0)


def _one_over_one_plus_x(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + x)


def lower_softmax_int16(lw: LoweringContext, v: OperatorView) -> None:
    """SoftmaxInt16 step by step; see the module docstring."""
    x, out, rows, depth = _rows(lw, v)
    if out.dtype != "int16" or x.zero_point != 0 or out.zero_point != 0:
        raise UnsupportedError(f"operator {v.index} (SOFTMAX): int16 needs an int16 output and zero points 0 "
                               f"(TFLite's kernel requires them), not {out.dtype} with {x.zero_point}, {out.zero_point}")
    beta = float(v.options.get("beta", 1.0))
    # QuantizeMultiplier(input_scale * beta / (10 / 65535)), the scale times beta a float
    # product divided in double; the MULs below are the reference's MultiplyByQuantizedMultiplier
    # (a 32-bit MUL keeps only its output shift, with TFL rounding).
    real = float(np.float32(x.scale) * np.float32(beta)) / (10.0 / 65535.0)
    multiplier, shift = fp.quantize_multiplier(real)
    if not -31 <= shift <= 31:
        raise UnsupportedError(f"operator {v.index} (SOFTMAX): input scale x beta = {real * 10 / 65535:g} is out of "
                               "the NPU's shift range")
    exp_table16 = int16_range_table(np.exp, EXP_RANGE, TABLE_OUTPUT)
    reciprocal_table = int16_range_table(_one_over_one_plus_x, RECIPROCAL_RANGE, TABLE_OUTPUT)
    ops = OperationBuilder(lw, v.index, "SOFTMAX")
    vec = x.shape
    row = vec[:2] + (1,)
    one = lambda value: lw.constant(np.array([value]), "int32")  # noqa: E731
    lookup = dict(function=LUT_SLOT_0, clip_range=0, min=-32768, max=32767)

    peak = _row_max(ops, x, rows, depth)
    diff = ops.scratch("diff", vec, "int32")
    ops.elementwise("SUB", x, peak, diff)
    scaled = ops.scratch("scaled_diff", vec, "int32")
    if shift >= 0:
        # SRDHM(diff << shift, M) is one rounding of diff * M / 2^(31 - shift).
        ops.elementwise("MUL", diff, one(multiplier), scaled, ofm_scale=(1, 31 - shift))
    else:
        # RoundingDivideByPOT(SRDHM(diff, M), -shift) rounds twice: one shift of 31 - shift
        # would round once, and miss by one where the first rounding carries (beta 0.05 here;
        # Vela's binaries miss there).
        high = ops.scratch("scaled_diff_high", vec, "int32")
        ops.multiply(diff, one(multiplier), high)
        ops.elementwise("SHR", high, one(-shift), scaled, global_scale=False)
    # + 32767 recentres [-65535, 0] on the int16 range; the OFM saturates to int16 and the
    # table looks the result up.
    exp = ops.scratch("exp", vec, "int16")
    ops.elementwise("ADD", scaled, one(32767), exp, activation=lookup, lut=exp_table16)
    total = ops.scratch("sum", row, "int32")
    ops.pool("REDUCE_SUM", exp, total, rounding="NATURAL")
    headroom_plus_one = ops.scratch("headroom_plus_one", row, "int32")
    ops.elementwise("CLZ", total, None, headroom_plus_one, global_scale=False)
    right_shift = ops.scratch("right_shift", row, "int32")
    ops.elementwise("SUB", one(31), headroom_plus_one, right_shift)
    # ((sum << (h - 1)) + 2^13) >> 14 - 98304 without leaving 32 bits: (sum - 2^(31 - h)) << h
    # is (sum << h) - 2^31, and >> 15 rounding half up, minus 32768, gives the same value.
    unit = ops.scratch("unit", row, "int32")
    ops.elementwise("SHL", one(1), right_shift, unit, global_scale=False)
    sum_minus_unit = ops.scratch("sum_minus_unit", row, "int32")
    ops.elementwise("SUB", total, unit, sum_minus_unit)
    normalised = ops.scratch("normalised", row, "int32")
    ops.elementwise("SHL", sum_minus_unit, headroom_plus_one, normalised, global_scale=False)
    halved = ops.scratch("normalised_q15", row, "int32")
    ops.elementwise("SHR", normalised, one(15), halved, rounding="NATURAL", global_scale=False)
    reciprocal = ops.scratch("reciprocal", row, "int16")
    ops.elementwise("SUB", halved, one(32768), reciprocal, activation=lookup, lut=reciprocal_table)
    # (exp * reciprocal + 2^(right_shift - 1)) >> right_shift, clamped to the int16 range (the
    # product is not negative, so the reference's clamp at 0 never acts).
    product = ops.scratch("product", vec, "int32")
    ops.elementwise("MUL", exp, reciprocal, product)
    ops.elementwise("SHR", product, right_shift, out, rounding="NATURAL", global_scale=False,
                    activation=full_range("int16"))
