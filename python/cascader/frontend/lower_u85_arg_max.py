"""ARG_MAX on the Ethos-U85: its ARGMAX pooling, over any axis, one operation per band.

The U85 pools for the position of the largest value in a window (ARGMAX_X: along a row),
the first of equal values, as TFLite picks. Its accumulator holds the position shifted left
by 16, which OFM_SCALE (1, 16) brings back, written straight into the int32 or int64 output.
The input, dense, is viewed as A x N x B around the reduced axis (N; A the elements before
it, B those after it), and a 1 x N window over that view writes the A x 1 x B map, which
is the output tensor's own element order. Bands of at most 65535 rows and channels
(`lower_reduce.banded_pool`), as Vela 5.2 splits its own.

The position is 16 bits of the accumulator: at most 32768 elements along the axis in one
pooling. A longer axis is split into parts of equal length (`axis_parts`), as Vela 5.2 splits
it (Vela 5.2 then fails on most such models: "Non-passthrough operation (Add) could not run on
NPU"; it compiles a 50000 x 3 over its first axis). Each part gives its index (ARGMAX_X) and
its largest value (MAX pooling) per output element; the parts then combine in order, each
replacing the best so far only where its value is strictly greater (CMP_GT), so that of equal
maxima the lowest index wins, as TFLite's:

    m = (value_p > best) as an int32 mask     CMP_GT into int8, widened by an ADD (lower_u85_select)
    index = ((index_p + start_p) & m) | (index & ~m)
    best = max(best, value_p)

The combination works on the index words: the int32 output (A x 1 x B), or the low words of the
int64 output (A x B x 1, 8 bytes apart; part 0's pooling wrote the high words, 0). Vela instead
transposes the part maxima, pools them for the winning part and gathers its index; the
elementwise steps here touch A x B elements a few times, beside the A x N x B the poolings read.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..errors import UnsupportedError
from .lower_movement import raw_copy
from .lower_reduce import DIM_MAX, banded_pool
from .lower_u85_compare import NPU_BOOLEAN_TYPE
from .lower_u85_select import widened_mask
from .lowered import FeatureMapView, dense_strides
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder
from .operator_view import OperatorView

MAX_AXIS = 1 << 15  # positions held in 16 bits of the accumulator
# The accumulator holds position << 16; the OFM scale shifts it back down, exactly.
POSITION_SCALE = (1, 16)


def _dense(view: FeatureMapView) -> bool:
    return view.strides == dense_strides(view.shape, view.element_size)


def axis_parts(n: int) -> list[tuple[int, int]]:
    """(start, length) of the fewest parts of equal length (the last shorter) that split an
    axis of `n` elements into poolings of at most MAX_AXIS."""
    size = -(-n // -(-n // MAX_AXIS))
    return [(start, min(size, n - start)) for start in range(0, n, size)]


def split_refusal(shape: tuple[int, ...], axis: int) -> str | None:
    """Why ARG_MAX over `axis` of `shape` stays on the CPU (None: it does not): a split axis
    combines its parts in single elementwise operations over the A x B output elements."""
    a, n, b = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
    if n > MAX_AXIS and max(a, b) > DIM_MAX:
        return (f"{n} elements along the axis, split into parts, with {a} x {b} outputs around it (the parts "
                f"combine over at most {DIM_MAX} rows and channels)")
    return None


def lower_u85_arg_max(lw: LoweringContext, v: OperatorView) -> None:
    ifm_t, ofm_t = v.ifm, v.ofm
    assert ifm_t is not None and ofm_t is not None
    shape = tuple(ifm_t.shape) or (1,)
    axis = int(np.asarray(v.inputs[1].data).reshape(-1)[0]) % len(shape)
    a, n, b = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
    refusal = split_refusal(shape, axis)
    if refusal is not None:
        raise UnsupportedError(f"operator {v.index} (ARG_MAX): {refusal}")
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
    if n <= MAX_AXIS:
        banded_pool(ops, "ARGMAX_X", src, target, a, n, b, rounding="TRUNCATE", ofm_scale=POSITION_SCALE)
    else:
        _split_axis(lw, ops, src, target, a, n, b)
    if target is not dst:
        raw_copy(lw, v.index, f"{v.index}:ARG_MAX(into its slice)", target, dst)


def _split_axis(lw: LoweringContext, ops: OperationBuilder, src: FeatureMapView, target: FeatureMapView,
                a: int, n: int, b: int) -> None:
    """`target` (dense, int32 or int64) = the index of the first maximum along the N of `src`
    (A x N x B), part by part (module docstring); A and B at most DIM_MAX (`split_refusal`)."""
    if target.dtype == "int32":
        shape = (a, 1, b)
        words = replace(target, shape=shape, strides=dense_strides(shape, 4))
    else:  # the low words of the int64 indices, one per 8 bytes
        shape = (a, b, 1)
        words = FeatureMapView(target.buffer, shape, "int32", 0, 1.0, (b * 8, 8, 4), target.offset)
    best = None
    parts = axis_parts(n)
    for p, (start, length) in enumerate(parts):
        piece = replace(src, offset=src.offset + start * b * src.element_size)
        index = target if p == 0 else ops.scratch(f"part_index_{p}", shape, "int32")
        banded_pool(ops, "ARGMAX_X", piece, index, a, length, b, row=n, rounding="TRUNCATE", ofm_scale=POSITION_SCALE)
        value = ops.scratch(f"part_max_{p}", shape, src.dtype)
        banded_pool(ops, "MAX", piece, value, a, length, b, row=n)
        if best is None:
            best = value
            continue
        greater = ops.scratch(f"greater_{p}", shape, NPU_BOOLEAN_TYPE)
        ops.elementwise("CMP_GT", value, best, greater)
        mask = widened_mask(lw, ops, greater, "int32", f"greater_mask_{p}")
        shifted = ops.scratch(f"part_position_{p}", shape, "int32")
        ops.elementwise("ADD", index, lw.constant(np.array([start]), "int32"), shifted)
        taken = ops.scratch(f"taken_{p}", shape, "int32")
        ops.elementwise("AND", shifted, mask, taken)
        kept = ops.scratch(f"kept_{p}", shape, "int32")
        ops.elementwise("AND_NOT", words, mask, kept)
        ops.elementwise("OR", taken, kept, words)
        if p < len(parts) - 1:
            larger = ops.scratch(f"best_{p}", shape, src.dtype)
            ops.elementwise("MAX", best, value, larger)
            best = larger
