"""SELECT and SELECT_V2 on the Ethos-U85 as its bitwise elementwise modes, bit-exact.

TFLite's reference kernel (``reference_ops::Select``, ``BroadcastSelect5DSlow`` for V2)
copies, per output element, the stored code of x where the condition is true and of y where
it is false: no rescale, whatever the quantizations. The condition is TFLite's bool, a uint8
map of 0/1 here (`lower.map_dtype`); the U85's comparison writes its boolean, all bits set,
in any output type. So, in the values' type:

    m = (c != 0)            CMP_NE against a zero constant: -1 where c, else 0
    out = (x & m) | (y & ~m)    AND, AND_NOT, OR of the raw codes

four operations for every type (Vela 5.2 turns a TFLite bool into its -1/0 at the network's
edge with the same CMP_NE, then widens it with an ADD for 16- and 32-bit values; it writes no
uint8 SELECT). A uint8 mask of -1 must keep its bits (255), so the mask is written unclipped
(`operation_builder.WRAP_OFM`), which changes no other type's -1.

SELECT_V2 broadcasts its three operands; each step's result takes the broadcast shape of its
two operands, which must be one of theirs (the NPU broadcasts one operand of a pair, the U85
either: AND_NOT with the broadcast operand first is the emitter's swapped AND_NOT). A step whose
operands both broadcast stays on the CPU (`broadcast_step`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..arch import Accelerator
from ..errors import UnsupportedError
from .lowered import FeatureMapView
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder
from .operator_view import OperatorView

SELECT_DTYPES = ("int8", "uint8", "int16", "int32")


def require_u85(lw: LoweringContext, v: OperatorView) -> None:
    """The U85-only operators' lowerings use modes the U55/U65 lack (support.check_operator
    keeps the operators off their NPU already; this says so if a caller did not ask)."""
    if not Accelerator.is_u85(lw.accelerator):
        raise UnsupportedError(f"operator {v.index} ({v.opcode}) runs on the Ethos-U85's NPU only")


def raw(view: FeatureMapView) -> FeatureMapView:
    """The stored codes as they are: no zero point (the kernels ignore the quantization)."""
    return replace(view, zero_point=0)


def broadcast_step(v: OperatorView, a: FeatureMapView, b: FeatureMapView) -> tuple[int, int, int]:
    """The shape of an elementwise result of `a` and `b`: the broadcast of theirs, which must be
    one of theirs (UnsupportedError otherwise: the CPU's reason)."""
    try:
        shape = tuple(int(d) for d in np.broadcast_shapes(a.shape, b.shape))
    except ValueError:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): shapes {a.shape} and {b.shape} do not "
                               "broadcast") from None
    if shape not in (a.shape, b.shape):
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): {a.shape} and {b.shape} would both broadcast "
                               f"to {shape}; one NPU operand must have the result's shape")
    return shape  # type: ignore[return-value]


def boolean_mask(lw: LoweringContext, ops: OperationBuilder, condition: FeatureMapView, dtype: str) -> FeatureMapView:
    """The U85's boolean (-1/0) of a TFLite bool map (0/1), in `dtype`, the condition's shape."""
    mask = ops.scratch("mask", condition.shape, dtype)
    ops.elementwise("CMP_NE", condition, lw.constant(np.array([0]), condition.dtype), mask, wrap=True)
    return mask


def lower_select(lw: LoweringContext, v: OperatorView) -> None:
    require_u85(lw, v)
    c, x, y = (lw.view(t) for t in v.op.inputs[:3])
    out = raw(lw.view(v.op.outputs[0]))
    x, y = raw(x), raw(y)
    if not x.dtype == y.dtype == out.dtype or out.dtype not in SELECT_DTYPES:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): {x.dtype}, {y.dtype} -> {out.dtype}; the codes are "
                               f"copied as they are, so one type of {', '.join(SELECT_DTYPES)}")
    if v.inputs[0].dtype != "bool":
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): the condition is {v.inputs[0].dtype}, not bool")
    if v.opcode == "SELECT" and not c.shape == x.shape == y.shape:
        # TFLite's SELECT takes equal shapes, or a rank-1 condition that picks whole rows.
        raise UnsupportedError(f"operator {v.index} (SELECT): condition {c.shape}, values {x.shape} and {y.shape}; "
                               "the NPU lowering takes equal shapes (SELECT_V2 broadcasts)")
    ops = OperationBuilder(lw, v.index, v.opcode)
    true_shape, false_shape = broadcast_step(v, x, c), broadcast_step(v, y, c)
    final = tuple(int(d) for d in np.broadcast_shapes(true_shape, false_shape))
    if final != out.shape or final not in (true_shape, false_shape):
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): the operands {c.shape}, {x.shape}, {y.shape} do not "
                               f"broadcast to the output {out.shape} one pair at a time")
    mask = boolean_mask(lw, ops, c, out.dtype)
    taken = ops.scratch("taken", true_shape, out.dtype)
    ops.elementwise("AND", x, mask, taken)
    left = ops.scratch("left", false_shape, out.dtype)
    ops.elementwise("AND_NOT", y, mask, left)
    ops.elementwise("OR", taken, left, out)
