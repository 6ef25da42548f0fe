"""DIV on the Ethos-U85, bit-exact.

- int32: TFLite's reference kernel divides the values with C++'s ``/``, which truncates toward
  zero (-7 / 2 is -3), and clamps to the fused activation's range. The U85's DIV mode divides
  the same way: one operation. A zero divisor fails the reference kernel (LiteRT checks every
  divisor); a constant one with a zero stays on the CPU, which fails as the reference does;
  a zero computed at run time is the NPU's (undefined) result. INT32_MIN / -1 overflows in the
  reference too.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from .lower_u85_select import broadcast_step, raw, require_u85
from .lowering_context import LoweringContext
from .operation_builder import FUSED_ACTIVATIONS, OperationBuilder
from .operator_view import OperatorView

def _constant_divisor(v: OperatorView) -> np.ndarray | None:
    """The divisor's stored codes when it is a constant (None: computed at run time)."""
    t = v.inputs[1]
    return None if t is None or not t.is_constant else np.asarray(t.data)


def lower_div(lw: LoweringContext, v: OperatorView) -> None:
    require_u85(lw, v)
    if v.fused_activation not in FUSED_ACTIVATIONS:
        raise UnsupportedError(f"operator {v.index} (DIV): fused activation {v.fused_activation}")
    a, b, out = (raw(lw.view(t)) for t in (v.op.inputs[0], v.op.inputs[1], v.op.outputs[0]))
    divisor = _constant_divisor(v)
    if divisor is not None and not divisor.astype(np.int64).all() and a.dtype == "int32":
        raise UnsupportedError(f"operator {v.index} (DIV): a constant divisor of 0 (TFLite's kernel fails on it)")
    if broadcast_step(v, a, b) != out.shape:
        raise UnsupportedError(f"operator {v.index} (DIV): {a.shape} / {b.shape} -> {out.shape}")
    if a.dtype == b.dtype == out.dtype == "int32":
        if v.fused_activation != "NONE":
            # The U85 clamps a 32-bit OFM only to its type (emit/ethos_u85's clip range NONE).
            raise UnsupportedError(f"operator {v.index} (DIV): an int32 DIV with {v.fused_activation} fused")
        OperationBuilder(lw, v.index, "DIV").elementwise("DIV", a, b, out)
        return
    raise UnsupportedError(f"operator {v.index} (DIV): {a.dtype} / {b.dtype} -> {out.dtype}")
