"""MINIMUM, MAXIMUM and ABS as one NPU elementwise operation each, bit-exact.

- MINIMUM, MAXIMUM: TFLite's reference kernel (``MaximumMinimumBroadcastSlow``) compares the
  stored codes and stores the winner as it is: no zero point, no rescale, whatever the
  tensors' quantizations. The NPU's MIN/MAX subtracts the zero points and rescales the result;
  with every zero point taken as 0 and an output scale of 1 it compares and stores raw codes
  too. So any quantization is exact (Vela requires equal ones; the reference does not look).
  The NPU broadcasts only its second operand, so the operand of the output's shape goes first
  (MIN and MAX commute).
- ABS: the reference takes |x - zp_in| and, when the input and output scales (float32)
  differ, rescales it with MultiplyByQuantizedMultiplier(s_in / s_out, the quotient formed
  in float32), then adds zp_out and clamps. The NPU's ABS subtracts zp_in, takes the
  magnitude, applies OFM_SCALE with TFL rounding (MBQM) and adds zp_out: the same steps.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import UnsupportedError
from .lowered import FeatureMapView
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder, broadcast_order
from .operator_view import OperatorView
from .quantization import quantise_scale

NPU_MODE = {"MINIMUM": "MIN", "MAXIMUM": "MAX"}


def _raw(view: FeatureMapView) -> FeatureMapView:
    return replace(view, zero_point=0)


def lower_min_max(lw: LoweringContext, v: OperatorView) -> None:
    a, b = lw.view(v.op.inputs[0]), lw.view(v.op.inputs[1])
    ofm = lw.view(v.op.outputs[0])
    if not a.dtype == b.dtype == ofm.dtype:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): {a.dtype}, {b.dtype} -> {ofm.dtype}; the codes are "
                               "compared and stored as they are, so the types must agree")
    ifm, ifm2, _ = broadcast_order(v, a, b, ofm)
    OperationBuilder(lw, v.index, v.opcode).elementwise(NPU_MODE[v.opcode], _raw(ifm), _raw(ifm2), _raw(ofm))


def abs_scale(input_scale: float, output_scale: float) -> tuple[int, int]:
    """ABS's output rescale: none for equal float32 scales, else s_in / s_out in float32."""
    s_in, s_out = np.float32(input_scale), np.float32(output_scale)
    return (1, 0) if s_in == s_out else quantise_scale(float(s_in / s_out))


def lower_abs(lw: LoweringContext, v: OperatorView) -> None:
    x, out = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    if x.dtype != out.dtype:
        raise UnsupportedError(f"operator {v.index} (ABS): {x.dtype} -> {out.dtype}; TFLite's ABS keeps the type")
    OperationBuilder(lw, v.index, "ABS").elementwise("ABS", x, None, out, ofm_scale=abs_scale(x.scale, out.scale))
