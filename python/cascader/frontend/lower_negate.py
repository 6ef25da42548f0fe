"""NEG as NPU operations, bit-exact, in every type Vela 5.2 runs it in (int8, uint8, int16, int32).

TFLite's reference kernel (``reference_ops::Negate``) negates the stored codes and ignores the
tensors' quantization; the negation is narrowed back to the type, so it wraps where the NPU's
arithmetic saturates: -(-128) is -128, -(-32768) is -32768.

- int8, uint8: a 256-entry table lookup (`lower_lut`), wrap included. (LiteRT has no uint8
  NEG kernel; the table is Negate's arithmetic in uint8, -x mod 256.)
- int16: x * s, with s = -1 everywhere but s = +1 at x = -32768, is -x and -32768 there without
  saturating. s = clamp(2 * (-32767 - x) - 1, -1, 1) is one SUB of x from the constant -32767,
  rescaled by 2, with the OFM zero point -1 as the "- 1". Two operations.
- int32: one SUB from 0. -(-2^31) is undefined in C++; the NPU saturates it to 2^31 - 1.
- On the Ethos-U85, int8, uint8 and int16 too are one SUB from 0, written unclamped
  (`operation_builder.WRAP_OFM`, its clip range NONE keeps the low bits): -x mod 2^n, the wrap
  included, in one elementwise pass (zoo 8x8x16 int8 on U85-256: the table's 2,010 cycles ->
  384, Vela's SUB, which clamps and is off at -128 and in every uint8 code; int16 two
  operations -> one).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..arch import Accelerator
from ..errors import UnsupportedError
from .lower_lut import lower_lut
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder
from .operator_view import OperatorView
from .quantization import quantise_scale

INT16_MIN = -32768


def lower_negate(lw: LoweringContext, v: OperatorView) -> None:
    x, out = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    if x.dtype != out.dtype or x.shape != out.shape:
        raise UnsupportedError(f"operator {v.index} (NEG): {x.dtype}{list(x.shape)} -> {out.dtype}{list(out.shape)}; "
                               "NEG keeps the type and the shape")
    # Codes, not real values: the reference ignores the quantization.
    raw_x, raw_out = replace(x, zero_point=0), replace(out, zero_point=0)
    ops = OperationBuilder(lw, v.index, "NEG")
    if Accelerator.is_u85(lw.accelerator) and x.dtype in ("int8", "uint8", "int16"):
        ops.elementwise("SUB", lw.constant(np.array([0]), x.dtype), raw_x, raw_out, wrap=True)
        return
    if x.dtype in ("int8", "uint8"):
        lower_lut(lw, v)
        return
    x, out = raw_x, raw_out
    if x.dtype == "int32":
        ops.elementwise("SUB", lw.constant(np.array([0]), "int32"), x, out)
        return
    if x.dtype != "int16":
        raise UnsupportedError(f"operator {v.index} (NEG): {x.dtype}")
    sign = ops.scratch("sign", x.shape, "int16", zero_point=-1)
    ops.elementwise("SUB", lw.constant(np.array([INT16_MIN + 1]), "int16"), x, sign, ofm_scale=quantise_scale(2.0),
                    activation=dict(function=0, clip_range=0, min=-1, max=1))
    ops.elementwise("MUL", x, replace(sign, zero_point=0), out)
