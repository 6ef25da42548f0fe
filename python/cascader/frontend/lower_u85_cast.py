"""CAST on the Ethos-U85 as one elementwise operation, bit-exact.

TFLite's reference kernel (``copyCast``) converts each stored value with C++'s
``static_cast``: the quantization is ignored, a narrower type keeps the low bits (uint8 200 is
int8 -56, int32 70000 is int16 4464), a bool is 0/1 in and ``x != 0`` out. Here a bool is a
uint8 map of 0/1 (`lower.map_dtype`), so:

- to any integer type (bool in included): one ADD of a zero constant, written in the output's
  type without clamping (`operation_builder.WRAP_OFM`, the U85's clip range NONE), which keeps
  the low bits; a widening one never leaves the type anyway. Vela 5.2 writes the same ADD
  (its zero a scalar register).
- to bool: the U85's boolean of x != 0 (CMP_NE against zero, -1/0 in an int8 map with OFM zero
  point 0 and unit scale, as Vela 5.2 writes every comparison), then AND 1 (`lower_u85_compare`'s
  turn of the NPU's boolean into TFLite's).
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from .lowering_context import LoweringContext
from .lower_u85_compare import NPU_BOOLEAN_TYPE, tflite_bool
from .lower_u85_select import boolean_mask, raw, require_u85
from .operation_builder import OperationBuilder
from .operator_view import OperatorView

CAST_DTYPES = ("bool", "int8", "uint8", "int16", "int32")


def lower_cast(lw: LoweringContext, v: OperatorView) -> None:
    require_u85(lw, v)
    src_t, dst_t = v.inputs[0], v.outputs[0]
    if src_t.dtype not in CAST_DTYPES or dst_t.dtype not in CAST_DTYPES:
        raise UnsupportedError(f"operator {v.index} (CAST): {src_t.dtype} -> {dst_t.dtype}; the NPU lowering casts "
                               f"between {', '.join(CAST_DTYPES)}")
    x, out = raw(lw.view(v.op.inputs[0])), raw(lw.view(v.op.outputs[0]))
    if x.shape != out.shape:
        raise UnsupportedError(f"operator {v.index} (CAST): {x.shape} -> {out.shape}; CAST keeps the shape")
    ops = OperationBuilder(lw, v.index, "CAST")
    if dst_t.dtype == "bool":
        tflite_bool(lw, ops, boolean_mask(lw, ops, x, NPU_BOOLEAN_TYPE), out)
    else:
        ops.elementwise("ADD", x, lw.constant(np.array([0]), x.dtype), out, wrap=True)
