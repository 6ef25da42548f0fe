"""ARG_MAX on the Ethos-U85: its ARGMAX pooling, over any axis, one operation per band.

The U85 pools for the position of the largest value in a window (ARGMAX_X: along a row),
the first of equal values, as TFLite picks. Its accumulator holds the position shifted left
by 16, which OFM_SCALE (1, 16) brings back, written straight into the int32 or int64 output.
The input, dense, is viewed as A x N x B around the reduced axis (N; A the elements before
it, B those after it), and a 1 x N window over that view writes the A x 1 x B map, which
is the output tensor's own element order. Bands of at most 65535 rows and channels
(`lower_reduce.banded_pool`), as Vela 5.2 splits its own.

The position is 16 bits of the accumulator: at most 32768 elements along the axis (Vela's
limit for one operation; Vela splits a longer axis, which stays on our CPU).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..errors import UnsupportedError
from .lower_movement import raw_copy
from .lower_reduce import banded_pool
from .lowered import FeatureMapView, dense_strides
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder
from .operator_view import OperatorView

MAX_AXIS = 1 << 15  # positions held in 16 bits of the accumulator
# The accumulator holds position << 16; the OFM scale shifts it back down, exactly.
POSITION_SCALE = (1, 16)


def _dense(view: FeatureMapView) -> bool:
    return view.strides == dense_strides(view.shape, view.element_size)


def lower_u85_arg_max(lw: LoweringContext, v: OperatorView) -> None:
    ifm_t, ofm_t = v.ifm, v.ofm
    assert ifm_t is not None and ofm_t is not None
    shape = tuple(ifm_t.shape) or (1,)
    axis = int(np.asarray(v.inputs[1].data).reshape(-1)[0]) % len(shape)
    a, n, b = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
    if n > MAX_AXIS:
        raise UnsupportedError(f"operator {v.index} (ARG_MAX): {n} elements along the axis; the Ethos-U85's ARGMAX "
                               f"pooling takes at most {MAX_AXIS}")
    ops = OperationBuilder(lw, v.index, "ARG_MAX")
    # The comparison is of the raw codes: the zero point and scale do not change the order.
    # The input's own bytes in its order, a batch above 1 included (ARG_MAX is no VIEW_READER, so
    # its input is never a strided view of another tensor).
    src = replace(lw.view(v.op.inputs[0], (a, n, b)), zero_point=0, scale=1.0)
    out_t = v.op.outputs[0]
    if ofm_t.dtype == "int32":
        dst = lw.view(out_t)  # through a concatenation slice, where its consumer took one
    else:  # int64 indices: no other operator reads 64-bit maps, so the output is its own buffer
        hwc = (a, 1, b)
        dst = FeatureMapView(lw.buffer(out_t), hwc, ofm_t.dtype, 0, 1.0, dense_strides(hwc, 8))
    target = dst if _dense(dst) else ops.scratch("indices", dst.shape, dst.dtype)
    banded_pool(ops, "ARGMAX_X", src, target, a, n, b, rounding="TRUNCATE", ofm_scale=POSITION_SCALE)
    if target is not dst:
        raw_copy(lw, v.index, f"{v.index}:ARG_MAX(into its slice)", target, dst)
