"""The comparisons (EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS, LESS_EQUAL) and the logical
operators (LOGICAL_AND, LOGICAL_OR, LOGICAL_NOT) as Ethos-U85 elementwise operations (two per
comparison, one per logical operator; per slice of the leading axes where those do not fold),
bit-exact against TFLite's reference kernels.

- What the reference compares. int8/uint8 (``ComparisonQuantized``): each operand less its zero
  point, shifted left by 8 and scaled by its own multiplier (QuantizeMultiplierSmallerThanOneExp
  of its scale: SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT), and the two int32
  results compared. Rounding collapses neighbouring codes where a scale is small, so the codes
  themselves cannot be compared even for equal quantizations. The U85's IFM_SCALE/IFM2_SCALE do
  those two roundings exactly: the multiplier, a shift of 23 less the exponent and DBL_RND 8 (the
  high part rounded at bit 23 = 31 - 8, as TFLite's doubling high multiply of the operand shifted
  by 8 rounds; then the rest of the shift half away from zero). Vela 5.2 folds the 8 into the
  shift and rounds once, which differs where the high part lands next to a step.
  int16, int32 and bool: the stored values compared as they are (no zero point, unit scales).
- TFLite's bool is a byte of 0 or 1 (a uint8 map here); the U85's comparison gives its boolean,
  -1 (all bits set) or 0. So each comparison is two operations, as Vela 5.2 writes them: the
  comparison (CMP_EQ, CMP_NE, CMP_GT, CMP_GE; LESS and LESS_EQUAL as CMP_GT and CMP_GE of the
  operands swapped) into an int8 scratch map of -1/0 with a unit OFM scale, OFM zero point 0 and
  the type's clamp, then an AND of it with a constant 1 into the output (the scratch map kept in
  the chaining buffer, as Vela's, where the schedule runs the two whole: u85_chaining). Every register of the
  comparison's output stage is then one Vela's binaries set and silicon runs; a single operation
  would need the output stage's zero point to apply to a comparison's result, which no Vela
  binary exercises. The ordered comparisons keep their operand order, so a broadcast first
  operand is the U85's IFM broadcast (REVERSED_OPERANDS, which emit/ethos_u85 turns into
  IFM_BROADCAST).
- LOGICAL_AND/OR: AND/OR of the 0/1 bytes; LOGICAL_NOT: XOR with a constant 1.

Where both operands broadcast (neither has the output's shape), the U85 broadcasts both (IFM_BROADCAST
and IFM2_BROADCAST), as Vela does. A batch above 1 and a fifth axis fold into the map's three axes
where the broadcasts allow (`folded_shapes`), else one operation per index of the leading axes
(`sliced_shapes`), as Vela takes them.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import UnsupportedError
from . import fixed_point as fp
from .lowered import FeatureMapView, dense_strides
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder
from .operator_view import OperatorView

# opcode -> (the U85 comparison, whether its operands are TFLite's swapped), as Vela 5.2 has them
COMPARISON = {
    "EQUAL": ("CMP_EQ", False),
    "NOT_EQUAL": ("CMP_NE", False),
    "GREATER": ("CMP_GT", False),
    "GREATER_EQUAL": ("CMP_GE", False),
    "LESS": ("CMP_GT", True),  # a < b: b > a
    "LESS_EQUAL": ("CMP_GE", True),  # a <= b: b >= a
}
LOGICAL = {"LOGICAL_AND": "AND", "LOGICAL_OR": "OR", "LOGICAL_NOT": "XOR"}
SYMMETRIC = frozenset({"CMP_EQ", "CMP_NE", "AND", "OR", "XOR"})
# The operand types of each comparison (TFLite's kernels; Vela 5.2 runs the same on the U85).
COMPARED_TYPES = ("int8", "uint8", "int16", "int32")
EQUALITY_TYPES = ("bool", *COMPARED_TYPES)
RESCALED_TYPES = ("int8", "uint8")
LEFT_SHIFT = 8  # the reference's shift of each operand before its multiplier
# The type of the comparison's -1/0 between its two operations (Vela 5.2's bool map).
NPU_BOOLEAN_TYPE = "int8"


def comparison_scale(scale: float) -> tuple[int, int] | None:
    """TFLite's (multiplier, exponent <= 0) of an int8/uint8 comparison operand's scale
    (QuantizeMultiplierSmallerThanOneExp of the float32 scale), or None where the reference
    refuses it (not in (0, 1) once rounded)."""
    s = float(np.float32(scale))
    if not s > 0:
        return None
    m, e = fp.quantize_multiplier(s)
    return None if e > 0 else (m, e)


def operand_scale(view: FeatureMapView) -> tuple[int, int, int, int]:
    """IFM_SCALE (multiplier, shift, round mode, DBL_RND) giving the reference's scaled operand
    (module docstring)."""
    me = comparison_scale(view.scale)
    if me is None:
        raise ValueError(f"scale {view.scale} is outside (0, 1)")  # support.comparison_operands refuses it first
    m, e = me
    return (m, 31 - LEFT_SHIFT - e, 0, LEFT_SHIFT)


UNIT = (1, 0, 0, 0)


NPU_AXIS_MAX = 65535  # an NPU feature map's height, width and depth


def folded_shapes(out: tuple[int, ...], operands: list[tuple[int, ...]]) -> list[tuple[int, int, int]] | None:
    """The output's and each operand's H x W x C when the tensors' axes fold into three runs
    (a batch above 1, a fifth axis) along which every operand has the output's extent or 1 (is
    broadcast); the last axes as W and C where they can be, rows of 16 channels where no operand
    broadcasts (`_dense`). None where no such runs exist."""
    rank = len(out)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in operands]
    splits = [(max(rank - 2, 0), max(rank - 1, 0))]
    splits += [(i, j) for i in range(rank + 1) for j in range(i, rank + 1) if (i, j) != splits[0]]
    for i, j in splits:
        runs = ((0, i), (i, j), (j, rank))
        shapes = []
        for s in [tuple(out)] + padded:
            if any(s[a:b] != tuple(out[a:b]) and any(d != 1 for d in s[a:b]) for a, b in runs):
                break
            shapes.append(tuple(int(np.prod(s[a:b], dtype=np.int64)) for a, b in runs))
        else:
            if max(shapes[0]) <= NPU_AXIS_MAX:
                return _dense(shapes) if all(p == tuple(out) for p in padded) else shapes
    return None


BRICK = 16  # channels


def _dense(shapes: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Maps of one shape whose depth is not a multiple of 16 (the NPU's bricks), viewed as rows of
    16 channels where their size allows: (1, 24, 5, 6) runs in an eighth of the cycles as
    (1, 45, 16), as Vela reshapes it. Such views keep the buffers NHWC (frontend/lower)."""
    h, w, c = shapes[0]
    n = h * w * c
    if c % BRICK == 0 or n % BRICK:
        return shapes
    rows = n // BRICK
    height = next(k for k in range(-(-rows // NPU_AXIS_MAX), rows + 1) if rows % k == 0)
    if rows // height > NPU_AXIS_MAX or height > NPU_AXIS_MAX:
        return shapes
    return [(height, rows // height, BRICK)] * len(shapes)


MAX_SLICES = 64  # operations one operator may take (`sliced_shapes`)


def sliced_shapes(out: tuple[int, ...], operands: list[tuple[int, ...]],
                  limit: int = MAX_SLICES) -> list[tuple[list[int], list[tuple[int, int, int]]]] | None:
    """Where the axes do not fold (`folded_shapes`: a broadcast along the batch and the width but
    not the height between), one operation per index of the leading axes, as few as fold: per
    operation, each tensor's element offset (the output's first) and its H x W x C. None where
    more than `limit` operations would."""
    rank = len(out)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in operands]
    shapes = folded_shapes(tuple(out), padded)
    if shapes is not None:
        return [([0] * (1 + len(padded)), shapes)]
    if rank < 2 or out[0] > limit:
        return None
    inner = sliced_shapes(tuple(out[1:]), [p[1:] for p in padded], limit // out[0])
    if inner is None:
        return None
    tensors = [tuple(out)] + padded
    step = [int(np.prod(t[1:], dtype=np.int64)) if t[0] != 1 else 0 for t in tensors]
    return [([o + i * k for o, k in zip(offsets, step)], shapes) for i in range(out[0]) for offsets, shapes in inner]


def _views(lw: LoweringContext, v: OperatorView) -> list[list[FeatureMapView]]:
    """Per operation, the output's and the inputs' feature maps (`sliced_shapes`)."""
    tensors = [v.op.outputs[0], *v.op.inputs]
    slices = sliced_shapes(tuple(lw.graph.tensors[tensors[0]].shape),
                           [tuple(lw.graph.tensors[t].shape) for t in tensors[1:]])
    if slices is None:  # support.comparison_shapes refuses these first
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): its axes do not fold into broadcasts of three")
    if len(slices) == 1:
        return [[lw.view(t, shape) for t, shape in zip(tensors, slices[0][1])]]
    whole = []
    for t in tensors:
        n = int(np.prod(lw.graph.tensors[t].shape, dtype=np.int64))
        base = lw.view(t, (1, 1, n))
        if base.strides != dense_strides(base.shape, base.element_size):
            raise UnsupportedError(f"operator {v.index} ({v.opcode}): {lw.graph.tensors[t].name!r} is a strided view; "
                                   "its slices are not")
        whole.append(base)
    return [[replace(b, shape=shape, strides=dense_strides(shape, b.element_size), offset=b.offset + o * b.element_size)
             for b, o, shape in zip(whole, offsets, shapes)] for offsets, shapes in slices]


def _raw(view: FeatureMapView) -> FeatureMapView:
    return replace(view, zero_point=0)


def _order(a: FeatureMapView, b: FeatureMapView, ofm: FeatureMapView, mode: str):
    """(first, second) as the elementwise builder takes them: a symmetric mode puts the operand of
    the output's shape first itself; an ordered one keeps its order (the builder reverses it, or
    broadcasts both)."""
    if mode in SYMMETRIC and a.shape != ofm.shape and b.shape == ofm.shape:
        return b, a
    return a, b


def lower_u85_comparison(lw: LoweringContext, v: OperatorView) -> None:
    mode, swapped = COMPARISON[v.opcode]
    rescaled = lw.graph.tensors[v.op.inputs[0]].dtype in RESCALED_TYPES
    ops = OperationBuilder(lw, v.index, v.opcode)
    for ofm, a, b in _views(lw, v):
        if swapped:
            a, b = b, a
        a, b = _order(a, b, ofm, mode)
        if rescaled:
            scales = (operand_scale(a), operand_scale(b))
        else:  # the reference compares the stored values
            a, b, scales = _raw(a), _raw(b), (UNIT, UNIT)
        boolean = ops.scratch("npu_boolean", ofm.shape, NPU_BOOLEAN_TYPE)
        ops.elementwise(mode, a, b, boolean, operand_scales=scales)
        tflite_bool(lw, ops, boolean, ofm)


def tflite_bool(lw: LoweringContext, ops: OperationBuilder, boolean: FeatureMapView, ofm: FeatureMapView) -> None:
    """TFLite's bool (0/1) of the U85's boolean (-1/0) `boolean`: an AND with a constant 1, as
    Vela 5.2 writes it where its booleans leave the NPU."""
    ops.elementwise("AND", boolean, lw.constant(np.array([1]), NPU_BOOLEAN_TYPE), _raw(ofm),
                    operand_scales=(UNIT, UNIT))


def lower_u85_logical(lw: LoweringContext, v: OperatorView) -> None:
    mode = LOGICAL[v.opcode]
    for ofm, a, *second in _views(lw, v):
        ofm, a = _raw(ofm), _raw(a)
        if v.opcode == "LOGICAL_NOT":
            b = lw.constant(np.array([1], np.uint8), "uint8")  # broadcast over the map: x ^ 1
        else:
            a, b = _order(a, _raw(second[0]), ofm, mode)
        OperationBuilder(lw, v.index, v.opcode).elementwise(mode, a, b, ofm, operand_scales=(UNIT, UNIT))
