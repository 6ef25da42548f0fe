"""SQUARED_DIFFERENCE (int8) as NPU elementwise operations on int32 scratch maps.

TFLite's reference kernel (``reference_integer_ops`` SquaredDifference, int8):

    x_i   = (q_i - zp_i) << 7                          (left_shift 7)
    s_i   = MultiplyByQuantizedMultiplierSmallerThanOneExp(x_i, m_i, e_i)
            with m_i, e_i from scale_i / (2 * max(scale_1, scale_2))
    diff  = s_1 - s_2
    out   = MultiplyByQuantizedMultiplierSmallerThanOneExp(diff * diff, m_o, e_o) + zp_out
            with m_o, e_o from (2 * max(scale_1, scale_2))^2 / (2^14 * scale_out), clamped

Each multiply is the reference's two roundings done as two NPU operations, so the result is
bit-exact: the high multiply (SaturatingRoundingDoublingHighMul, which rounds halves up) is a
32-bit MUL by the multiplier shifted right by 31 with NATURAL rounding, and the division by a
power of two (RoundingDivideByPOT, halves away from zero) an SHR with TFL rounding. Vela
does each multiply in one MUL with a single rounding, which can differ from the reference by
one where the two roundings do not compose.

The cast (q - zp) << 7 is an ADD of zero into an int32 map with the output scale 128 (the
elementwise unit subtracts the zero point). The output multiplier must be below one (the
reference kernel cannot run otherwise).
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from . import fixed_point as fp
from .lowered import FeatureMapView, full_range
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder, broadcast_order
from .operator_view import OperatorView

LEFT_SHIFT = 7  # the reference's, for 8-bit inputs


def _multiplier_below_one(real: float, what: str, index: int) -> tuple[int, int]:
    """TFLite's QuantizeMultiplierSmallerThanOneExp: (Q0.31 multiplier, right shift >= 0)."""
    if not 0.0 < real < 1.0:
        raise UnsupportedError(f"operator {index} (SQUARED_DIFFERENCE): the {what} multiplier {real:g} is not "
                               "below one, which TFLite's reference kernel requires")
    multiplier, exponent = fp.quantize_multiplier(real)
    return multiplier, -exponent


def lower_squared_difference(lw: LoweringContext, v: OperatorView) -> None:
    a, b, out = lw.view(v.op.inputs[0]), lw.view(v.op.inputs[1]), lw.view(v.op.outputs[0])
    if {a.dtype, b.dtype, out.dtype} != {"int8"}:
        raise UnsupportedError(f"operator {v.index} (SQUARED_DIFFERENCE): lowered for int8 only")
    broadcast_order(v, a, b, out)  # one operand must have the output's shape, the other broadcast
    twice_max = 2.0 * max(float(np.float32(a.scale)), float(np.float32(b.scale)))
    scales = [_multiplier_below_one(float(np.float32(x.scale)) / twice_max, f"input {i + 1}", v.index)
              for i, x in enumerate((a, b))]
    output = _multiplier_below_one(twice_max * twice_max / ((1 << (2 * LEFT_SHIFT)) * float(np.float32(out.scale))),
                                   "output", v.index)
    ops = OperationBuilder(lw, v.index, "SQUARED_DIFFERENCE")
    one = lambda value, dtype="int32": lw.constant(np.array([value]), dtype)  # noqa: E731

    def divide(x: FeatureMapView, multiplier: int, shift: int, result: FeatureMapView, name: str) -> None:
        """result = MultiplyByQuantizedMultiplierSmallerThanOneExp(x, multiplier, -shift)."""
        high = ops.scratch(f"{name}_high", x.shape, "int32")
        ops.elementwise("MUL", x, one(multiplier), high, ofm_scale=(1 << 30, 31), rounding="NATURAL")
        ops.elementwise("SHR", high, one(shift), result, rounding="TFL", global_scale=False,
                        activation=full_range(result.dtype))

    scaled = []
    for i, (x, (multiplier, shift)) in enumerate(zip((a, b), scales)):
        wide = ops.scratch(f"input{i + 1}_shifted", x.shape, "int32")
        ops.elementwise("ADD", x, one(0, "int8"), wide, ofm_scale=(1 << LEFT_SHIFT, 0))
        s = ops.scratch(f"input{i + 1}_scaled", x.shape, "int32")
        divide(wide, multiplier, shift, s, f"input{i + 1}")
        scaled.append(s)
    diff = ops.scratch("raw_diff", out.shape, "int32")
    ops.elementwise("SUB", scaled[0], scaled[1], diff)
    squared = ops.scratch("squared", out.shape, "int32")
    ops.elementwise("MUL", diff, diff, squared)
    divide(squared, *output, out, "output")
