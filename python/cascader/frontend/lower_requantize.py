"""QUANTIZE and the RELUs as one requantizing copy each: a 1x1 average pool that rescales
(TFL rounding, as TFLite's MultiplyByQuantizedMultiplier) and clamps (`operation_builder.pool_copy`).
"""

from __future__ import annotations

from .lowering_context import LoweringContext
from .operation_builder import clamp_record, pool_copy
from .operator_view import OperatorView

# The RELUs' real bounds (None: the type's own).
CLAMP_OPS = {"RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0), "RELU_0_TO_1": (0.0, 1.0)}


def lower_quantize(lw: LoweringContext, v: OperatorView) -> None:
    src, dst = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    pool_copy(lw, v.index, f"{v.index}:QUANTIZE", src, dst)


def lower_clamp(lw: LoweringContext, v: OperatorView) -> None:
    src, dst = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    lo, hi = CLAMP_OPS[v.opcode]
    pool_copy(lw, v.index, f"{v.index}:{v.opcode}", src, dst, clamp_record(v.ofm, lo, hi))
