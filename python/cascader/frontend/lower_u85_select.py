"""SELECT and SELECT_V2 on the Ethos-U85 as its bitwise elementwise modes, bit-exact.

TFLite's reference kernel (``reference_ops::Select``, ``BroadcastSelect5DSlow`` for V2)
copies, per output element, the stored code of x where the condition is true and of y where
it is false: no rescale, whatever the quantizations. The condition is TFLite's bool, a uint8
map of 0/1 here (`lower.map_dtype`). As Vela 5.2 writes it:

    m = (c != 0)            CMP_NE against a zero constant: -1 where c, else 0, an int8 map
    m = m + 0               for 16- and 32-bit values: the mask widened by an ADD
    out = (x & m) | (y & ~m)    AND, AND_NOT, OR of the raw codes

The comparison is written as Vela writes every comparison (int8 OFM, zero point 0, unit scale,
int8's clamp: `lower_u85_compare`): its output stage is one Vela's binaries run on silicon, where
a comparison written straight into a 16- or 32-bit map, or unclamped into uint8, is not. uint8 values (Vela fails on a uint8 SELECT) are selected as the int8 codes of the
same bytes: the bitwise modes see bits, so the int8 mask needs no widening.

SELECT_V2 broadcasts its three operands; each step's result takes the broadcast shape of its
two operands (`broadcast_shape`). Where that is neither's (condition [1,H,W,1] and x [1,1,W,C],
say), the U85 broadcasts both operands of the step (IFM_BROADCAST and IFM2_BROADCAST,
`OperationBuilder.elementwise`), as Vela 5.2 does: no operand is copied out to the full shape
first, so the operations and bytes read are those of a step with one broadcast operand.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..arch import Accelerator
from ..errors import UnsupportedError
from .lower_u85_compare import NPU_BOOLEAN_TYPE
from .lowered import ELEMENT_SIZE, TENSOR_DIM_MAX, FeatureMapView, dense_strides
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


def int8_codes(view: FeatureMapView) -> FeatureMapView:
    """An 8-bit map's bytes as int8 codes, for the bitwise modes (which see bits) to combine
    with the U85's int8 boolean (a uint8 -1 would need a comparison written unclamped)."""
    return replace(view, dtype=NPU_BOOLEAN_TYPE)


def broadcast_shape(v: OperatorView, *views: FeatureMapView) -> tuple[int, int, int]:
    """The shape of an elementwise result of `views`: the broadcast of theirs (UnsupportedError
    where they do not broadcast: the CPU's reason)."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*(x.shape for x in views)))  # type: ignore[return-value]
    except ValueError:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): shapes {', '.join(str(x.shape) for x in views)} "
                               "do not broadcast") from None


def broadcast_step(v: OperatorView, a: FeatureMapView, b: FeatureMapView) -> tuple[int, int, int]:
    """`broadcast_shape` of `a` and `b`, which must be one of theirs (UnsupportedError otherwise:
    the CPU's reason)."""
    shape = broadcast_shape(v, a, b)
    if shape not in (a.shape, b.shape):
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): {a.shape} and {b.shape} would both broadcast "
                               f"to {shape}; one NPU operand must have the result's shape")
    return shape  # type: ignore[return-value]


def boolean_mask(lw: LoweringContext, ops: OperationBuilder, x: FeatureMapView, dtype: str) -> FeatureMapView:
    """The U85's boolean (-1/0) of x != 0 (of a TFLite bool map of 0/1, a condition), x's shape:
    Vela 5.2's CMP_NE into an int8 map, then, for a 16- or 32-bit `dtype`, its ADD of 0 into
    `dtype` (a sign extension)."""
    mask = ops.scratch("mask", x.shape, NPU_BOOLEAN_TYPE)
    ops.elementwise("CMP_NE", *_flat_if_shallow(x, mask, lw.constant(np.array([0]), x.dtype)))
    return widened_mask(lw, ops, mask, dtype)


def _flat_if_shallow(x: FeatureMapView, mask: FeatureMapView, zero: FeatureMapView):
    """The CMP_NE's operands (x, zero, mask): a dense map shallower than a 16-channel brick (a
    per-pixel condition, H x W x 1) compared as one row of its elements, as Vela 5.2 does (the
    NPU works through channels 16 at a time: 6 x 5 x 1 on U85-128, 146 cycles -> 73); every
    element is compared alone, so any shape of the same order gives the same mask."""
    n = math.prod(x.shape)
    dense = x.layout == "NHWC" and x.strides == dense_strides(x.shape, x.element_size)
    if not dense or x.shape[2] >= 16 or n > TENSOR_DIM_MAX:
        return x, zero, mask
    flat = (1, 1, n)
    return (replace(x, shape=flat, strides=dense_strides(flat, x.element_size)), zero,
            replace(mask, shape=flat, strides=dense_strides(flat, mask.element_size)))


def widened_mask(lw: LoweringContext, ops: OperationBuilder, mask: FeatureMapView, dtype: str,
                 name: str = "wide_mask") -> FeatureMapView:
    """The U85's int8 boolean `mask` (-1/0) as a mask of `dtype`'s width: itself for 8 bits,
    else Vela 5.2's ADD of 0 into `dtype` (a sign extension: all bits set, or none)."""
    if ELEMENT_SIZE[dtype] == ELEMENT_SIZE[NPU_BOOLEAN_TYPE]:
        return mask
    wide = ops.scratch(name, mask.shape, dtype)
    ops.elementwise("ADD", mask, lw.constant(np.array([0]), NPU_BOOLEAN_TYPE), wide)
    return wide


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
    if out.dtype == "uint8":  # the same bytes as int8 codes (module docstring)
        x, y, out = int8_codes(x), int8_codes(y), int8_codes(out)
    ops = OperationBuilder(lw, v.index, v.opcode)
    if broadcast_shape(v, c, x, y) != out.shape:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): the operands {c.shape}, {x.shape}, {y.shape} do not "
                               f"broadcast to the output {out.shape}")
    true_shape, false_shape = broadcast_shape(v, x, c), broadcast_shape(v, y, c)
    mask = boolean_mask(lw, ops, c, out.dtype)
    taken = ops.scratch("taken", true_shape, out.dtype)
    left = ops.scratch("left", false_shape, out.dtype)
    products = [lambda: ops.elementwise("AND", x, mask, taken), lambda: ops.elementwise("AND_NOT", y, mask, left)]
    # The larger product last, next to the OR, which it may then feed through a chaining
    # buffer (`u85_chaining`), as Vela 5.2 orders them (x [6,5,16], y [1,5,16]: the AND last).
    if math.prod(true_shape) > math.prod(false_shape):
        products.reverse()
    for product in products:
        product()
    ops.elementwise("OR", taken, left, out)
