"""The reductions MEAN, SUM, REDUCE_MAX and REDUCE_MIN (and the U85's REDUCE_ALL and REDUCE_ANY)
as NPU pools, bit-exact.

TFLite's reference kernel for MEAN and SUM (``QuantizedMeanOrSum``) computes, per output
element,

    out = clamp(MBQM(sum(x) - zp_in * N, m', e') + zp_out)

where (m, e) = QuantizeMultiplier(s_in / s_out) (in double). SUM takes (m', e') = (m, e); MEAN
folds the 1/N in: with k = min(floor(log2 N), 32, 31 + e), m' = (m << k) // N and e' = e - k.
The NPU's AVERAGE pool is exactly that over its window: it sums x - zp_in, rescales by
OFM_SCALE (m', e') with TFL rounding (MBQM) and adds zp_out before the clamp. REDUCE_MAX and
REDUCE_MIN compare the stored codes (TFLite's kernel requires the output quantized as the
input and does not rescale): a MAX pool of the raw codes, and for the minimum a MAX pool
between two order-reversing copies, NOT x = -1 - x (255 - x for uint8), which unlike -x maps
the type's range onto itself (-128 <-> 127).

The input is the dense H x W x C map. Dropping axes of size 1 and merging neighbouring axes
that are both reduced or both kept, most reductions are one window: A x N x B (N reduced, A
before it, B after it), one pool of a 1 x N window over that view, in bands of at most 65535
rows and channels. A sum over trailing elements (B = 1) is a REDUCE_SUM over the channels of
A x 1 x N instead: the same arithmetic, twenty times fewer cycles than a depth-1 window on
U55. On the Ethos-U85 a sum over H and W may instead be one H x W window, where the cycle
model finds it faster (`_plane_window`). The rest take several passes:

- the maximum and minimum reduce one axis at a time through scratch maps of their own type
  (a maximum of maxima is the maximum);
- a sum (MEAN, SUM) first copies the map so that the reduced axes come last (H and C reduced
  around a kept W: W to the front, channels still innermost; a reduced run too long for one
  window ahead of kept channels: a transposed plane copy), then sums runs of at most 65535
  elements over the channels (REDUCE_SUM) into an int32 map of exact partial sums, and one
  more REDUCE_SUM of those applies the rescale.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..arch import Accelerator
from ..errors import UnsupportedError
from . import fixed_point as fp
from .lower_movement import hwc_axis, raw_copy
from .lower_ofm_transpose import trial_cycles
from .lowered import TYPE_RANGE, FeatureMapView, dense_strides
from .lower_u85_select import require_u85
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder
from .operator_view import OperatorView

DIM_MAX = 65535  # rows, columns and channels of one NPU feature map, and a pool window's width
# TFLite sums x - zp in int32: beyond these the reference's sum may wrap (65,536 int16 codes of
# -32768 sum to -2^31 exactly, which Vela's int16 limit of 2^16 elements relies on).
SUM_MIN, SUM_MAX = -(2**31), 2**31 - 1
SUM_DTYPES = ("int8", "uint8", "int16")  # MEAN and SUM alike: one QuantizedMeanOrSum
MIN_MAX_DTYPES = ("int8", "uint8", "int16")
POOL_HEIGHT_MAX = 256  # a pool kernel's rows
POOL_AREA_MAX = 65536  # and its elements (support.py's pool_filter)


def mean_scale(input_scale: float, output_scale: float, elements: int) -> tuple[int, int]:
    """The (multiplier, register shift) of the reference's output rescale, 1/N folded in
    (`elements` 1: SUM's rescale)."""
    m, e = fp.quantize_multiplier(float(np.float64(np.float32(input_scale)) / np.float64(np.float32(output_scale))))
    k = min(elements.bit_length() - 1, 32, 31 + e)
    m, e = (m << k) // elements, e - k
    shift = 31 - e
    if not 0 <= shift <= 63:
        raise UnsupportedError(f"a rescale of {input_scale / output_scale:g} is beyond the NPU's 6-bit shift")
    return m, shift


def reduced_axes(v: OperatorView) -> set[int]:
    """The reduced axes in H x W x C terms (the batch, 1 here, dropped)."""
    axes_t, src_t = v.inputs[1], v.ifm
    assert src_t is not None
    if axes_t is None or not axes_t.is_constant:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): the axes are computed at run time")
    rank = len(src_t.shape)
    axes = {hwc_axis(rank, int(a)) for a in np.asarray(axes_t.data).reshape(-1)}
    return {a for a in axes if a is not None}


def blocks(shape: tuple[int, int, int], reduced: set[int]) -> list[tuple[int, bool]]:
    """(size, reduced) runs of the dense map: axes of size 1 dropped, neighbours of one kind merged."""
    runs: list[tuple[int, bool]] = []
    for axis, size in enumerate(shape):
        if size == 1:
            continue
        r = axis in reduced
        if runs and runs[-1][1] == r:
            runs[-1] = (runs[-1][0] * size, r)
        else:
            runs.append((size, r))
    return runs


def single_window(runs: list[tuple[int, bool]]) -> tuple[int, int, int] | None:
    """(A, N, B) when one 1 x N pool window over an A x N x B view does the reduction."""
    red = [i for i, (_, r) in enumerate(runs) if r]
    if len(red) > 1 or (red and runs[red[0]][0] > DIM_MAX):
        return None
    if not red:
        return math.prod(s for s, _ in runs), 1, 1
    i = red[0]
    return math.prod(s for s, _ in runs[:i]), runs[i][0], math.prod(s for s, _ in runs[i + 1:])


def _window(view: FeatureMapView, a0: int, rows: int, n: int, b0: int, depth: int, b: int,
            row: int | None = None) -> FeatureMapView:
    """Rows a0.. and channels b0.. of the dense A x row x B map `view` starts (`row`: n), n
    elements of each row."""
    e, row = view.element_size, n if row is None else row
    return replace(view, shape=(rows, n, depth), strides=(row * b * e, b * e, e),
                   offset=view.offset + (a0 * row * b + b0) * e)


def banded_pool(ops: OperationBuilder, mode: str, src: FeatureMapView, dst: FeatureMapView, a: int, n: int, b: int,
                row: int | None = None, **registers) -> None:
    """dst (A x 1 x B) = pool of the 1 x N windows of src (A x N x B; or the first N of each row
    of an A x `row` x B map), both dense from their offsets, in bands of at most DIM_MAX rows
    and channels."""
    for a0 in range(0, a, DIM_MAX):
        for b0 in range(0, b, DIM_MAX):
            rows, depth = min(DIM_MAX, a - a0), min(DIM_MAX, b - b0)
            ops.pool(mode, _window(src, a0, rows, n, b0, depth, b, row), _window(dst, a0, rows, 1, b0, depth, b),
                     (1, n), **registers)


def _dense(view: FeatureMapView, shape: tuple[int, int, int]) -> FeatureMapView:
    return replace(view, shape=shape, strides=dense_strides(shape, view.element_size))


# --- MEAN and SUM -------------------------------------------------------------------------


def _reduced_last(lw: LoweringContext, ops: OperationBuilder, src: FeatureMapView, runs: list[tuple[int, bool]]) -> tuple[FeatureMapView, int, int]:
    """(map, K, N): `src` (dense) as K rows of N reduced elements each, copied into a scratch map
    when the reduced elements are not the trailing ones."""
    h, w, c = src.shape
    if len(runs) == 3:  # H and C reduced around W: bring W to the front, channels stay innermost
        moved = ops.scratch("reduced_last", (w, h, c), src.dtype, src.zero_point, src.scale)
        raw_copy(lw, ops.index, f"{ops.index}:{ops.opcode}(W first)", replace(
            src, shape=(w, h, c), strides=(src.strides[1], src.strides[0], src.strides[2])), moved)
        return _dense(moved, (w, 1, h * c)), w, h * c
    if not runs[-1][1]:
        # One long reduced run ahead of the kept channels: an N x B plane, transposed in bands of rows.
        (n, _), (k, _) = runs
        moved = ops.scratch("reduced_last", (k, 1, n), src.dtype, src.zero_point, src.scale)
        e = src.element_size
        for r0 in range(0, n, DIM_MAX):
            rows = min(DIM_MAX, n - r0)
            piece = replace(src, shape=(rows, k, 1), strides=(k * e, e, e), offset=src.offset + r0 * k * e)
            out = replace(moved, shape=(rows, k, 1), strides=(e, n * e, e), offset=moved.offset + r0 * e)
            raw_copy(lw, ops.index, f"{ops.index}:{ops.opcode}(transpose)[{r0}]", piece, out)
        return moved, k, n
    n = runs[-1][0]
    return _dense(src, (math.prod(src.shape) // n, 1, n)), math.prod(src.shape) // n, n


def _channel_sums(ops: OperationBuilder, src: FeatureMapView, dst: FeatureMapView, k: int, n: int,
                  **registers) -> None:
    """dst (K x 1 x 1) = REDUCE_SUM of src's K rows of N contiguous elements (N <= DIM_MAX), in
    bands of at most DIM_MAX rows; `dst` may be strided (a column of a partial-sum map)."""
    e = src.element_size
    for r0 in range(0, k, DIM_MAX):
        rows = min(DIM_MAX, k - r0)
        piece = replace(src, shape=(rows, 1, n), strides=(src.strides[0], n * e, e), offset=src.offset + r0 * src.strides[0])
        out = replace(dst, shape=(rows, 1, 1), offset=dst.offset + r0 * dst.strides[0])
        ops.pool("REDUCE_SUM", piece, out, **registers)


def _plane_window(shape: tuple[int, int, int], reduced: set[int]) -> bool:
    """H and W reduced around kept channels, as one H x W pool window (a pool kernel's height
    and area limits). The 1 x HW window over the same elements reads its rows in 8-wide
    sub-kernels, each with a block's overlap: on the Ethos-U85, an int16 8x8x16 MEAN took 3,750
    cycles (U85-256) that way, 2,723 as an 8x8 window."""
    h, w, c = shape
    return reduced == {0, 1} and h > 1 and w > 1 and 1 < c <= DIM_MAX and h <= POOL_HEIGHT_MAX \
        and h * w <= POOL_AREA_MAX


def _require_types(v: OperatorView, dtypes) -> None:
    """The lowering takes one of `dtypes` in and the same out; else the operator stays on the CPU."""
    assert v.ifm is not None and v.ofm is not None
    if v.ifm.dtype not in dtypes or v.ofm.dtype != v.ifm.dtype:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): {v.ifm.dtype} -> {v.ofm.dtype}; the NPU lowering "
                               f"takes {', '.join(dtypes)} in and out")


def lower_reduce(lw: LoweringContext, v: OperatorView) -> None:
    """MEAN and SUM: the int32 sum of x - zp_in, rescaled once (see the module docstring)."""
    _require_types(v, SUM_DTYPES)
    reduced = reduced_axes(v)
    src = lw.view(v.op.inputs[0])
    out = lw.view(v.op.outputs[0])
    elements = math.prod(src.shape[a] for a in reduced)
    lo, hi = TYPE_RANGE[src.dtype]
    if elements * (hi - src.zero_point) > SUM_MAX or elements * (lo - src.zero_point) < SUM_MIN:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): a sum of {elements} elements may overflow TFLite's "
                               "int32 accumulator")
    scale = mean_scale(src.scale, out.scale, elements if v.opcode == "MEAN" else 1)
    ops = OperationBuilder(lw, v.index, v.opcode)
    runs = blocks(src.shape, reduced)
    window = single_window(runs)
    if window is not None and (window[2] > 1 or window[1] == 1):
        a, n, b = window
        forms = [lambda ops: banded_pool(ops, "AVERAGE", src, out, a, n, b, ofm_scale=scale)]
        if Accelerator.is_u85(lw.accelerator) and _plane_window(src.shape, reduced):
            forms.append(lambda ops: ops.pool("AVERAGE", src, _dense(out, (1, 1, src.shape[2])), src.shape[:2],
                                              ofm_scale=scale))
        _fastest(lw, v, forms)
        return
    rows, k, n = _reduced_last(lw, ops, src, runs)
    total = replace(out, shape=(k, 1, 1), strides=dense_strides((k, 1, 1), out.element_size))
    if n <= DIM_MAX:
        _channel_sums(ops, rows, total, k, n, ofm_scale=scale)
        return
    # Exact int32 partial sums of runs of at most DIM_MAX elements, then their rescaled sum.
    parts = -(-n // DIM_MAX)
    step = -(-n // parts)
    partial = ops.scratch("partial_sums", (k, 1, parts), "int32")
    for j in range(parts):
        length = min(step, n - j * step)
        run = replace(rows, offset=rows.offset + j * step * rows.element_size)
        column = replace(partial, shape=(k, 1, 1), offset=partial.offset + j * 4)
        _channel_sums(ops, run, column, k, length, rounding="NATURAL")
    _channel_sums(ops, partial, total, k, parts, ofm_scale=scale)


# --- REDUCE_MAX and REDUCE_MIN ----------------------------------------------------------------


def _reverse_order(ops: OperationBuilder, lw: LoweringContext, src: FeatureMapView, dst: FeatureMapView) -> None:
    """dst = NOT src: -1 - x (255 - x for uint8), an order-reversing map of the type onto itself."""
    top = TYPE_RANGE[src.dtype][1] if src.dtype == "uint8" else -1
    ops.elementwise("SUB", lw.constant(np.array([top]), src.dtype), src, dst, rounding="NATURAL")


def _pooled_extremes(ops: OperationBuilder, mode: str, src: FeatureMapView, out: FeatureMapView | None, reduced: set[int],
                     name: str, per_axis: bool = False) -> FeatureMapView:
    """`mode` (MAX, or the U85's MIN) pools of `src` over the `reduced` axes: one window (unless
    `per_axis`), else one axis at a time (each at most DIM_MAX long), channels first, through
    scratch maps `name` of its type; the last writes `out` (None: a scratch map, returned)."""
    one_window = not per_axis and single_window(blocks(src.shape, reduced)) is not None
    steps = [reduced] if one_window else [{a} for a in sorted(reduced, reverse=True) if src.shape[a] > 1]
    shape = src.shape
    for i, axes in enumerate(steps):
        window = single_window(blocks(shape, axes))
        assert window is not None
        a, n, b = window
        shape = tuple(1 if k in axes else d for k, d in enumerate(shape))
        last = i == len(steps) - 1
        dst = out if last and out is not None else ops.scratch(name, shape, src.dtype)
        banded_pool(ops, mode, src, dst, a, n, b, rounding="NATURAL")
        src = dst
    return src


def lower_reduce_min_max(lw: LoweringContext, v: OperatorView) -> None:
    """REDUCE_MAX, REDUCE_MIN: MAX pools of the raw codes, one window or one axis at a time. On
    the Ethos-U85, MIN pools for the minimum (no order-reversing copies), in the fastest of the
    forms `_fastest_extremes` weighs."""
    _require_types(v, MIN_MAX_DTYPES)
    reduced = reduced_axes(v)
    src = replace(lw.view(v.op.inputs[0]), zero_point=0)
    out = replace(lw.view(v.op.outputs[0]), zero_point=0)
    minimum = v.opcode == "REDUCE_MIN"
    if Accelerator.is_u85(lw.accelerator):
        # The U55's reversed maximum stays a candidate: its first SUB is an elementwise copy into
        # the fast memory too (an int8 8x8x16 minimum on U85-256: 799 cycles, 950 in MIN pools).
        reversed_max = [lambda ops: _reversed_maximum(ops, src, out, reduced)] if minimum else []
        _fastest_extremes(lw, v, "MIN" if minimum else "MAX", src, out, reduced, v.opcode.lower(), reversed_max)
        return
    ops = OperationBuilder(lw, v.index, v.opcode)
    if minimum:
        _reversed_maximum(ops, src, out, reduced)
    else:
        _pooled_extremes(ops, "MAX", src, out, reduced, "max")


def _reversed_maximum(ops: OperationBuilder, src: FeatureMapView, out: FeatureMapView, reduced: set[int]) -> None:
    """The minimum as NOT (the MAX pools of NOT src) (module docstring)."""
    flipped = ops.scratch("reversed", src.shape, src.dtype)
    _reverse_order(ops, ops.lw, src, flipped)
    top = _pooled_extremes(ops, "MAX", flipped, None, reduced, "reversed_max")
    _reverse_order(ops, ops.lw, top, _dense(out, top.shape))


# --- REDUCE_ALL and REDUCE_ANY (Ethos-U85) --------------------------------------------------


def lower_reduce_all_any(lw: LoweringContext, v: OperatorView) -> None:
    """REDUCE_ANY, REDUCE_ALL of TFLite bools (uint8 maps of 0/1, `lower.map_dtype`): the
    maximum and the minimum of the 0/1 codes, so MAX pools and the U85's MIN pools of them,
    as REDUCE_MAX's windows. Over H and W of a map the CPU hands in (in DRAM on the default
    Dedicated_Sram system, where a pool reads a window's rows slowly), an elementwise copy into
    the fast memory and a pool per axis may be faster (Vela 5.2's shape: its CMP_NE to -1/0
    booleans is that copy); the cycle model chooses."""
    require_u85(lw, v)
    assert v.ifm is not None and v.ofm is not None
    if v.ifm.dtype != "bool" or v.ofm.dtype != "bool":
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): {v.ifm.dtype} -> {v.ofm.dtype}; it takes bool in "
                               "and out")
    _fastest_extremes(lw, v, "MAX" if v.opcode == "REDUCE_ANY" else "MIN", lw.view(v.op.inputs[0]),
                      lw.view(v.op.outputs[0]), reduced_axes(v), v.opcode.lower())


def _fastest_extremes(lw: LoweringContext, v: OperatorView, mode: str, src: FeatureMapView, out: FeatureMapView,
                      reduced: set[int], name: str, others: list | None = None) -> None:
    """`mode` pools (the U85's MAX or MIN) of `src` over the `reduced` axes into `out`, in the
    form the cycle model finds fastest: one window where there is one (`_pooled_extremes`);
    one axis at a time (Vela 5.2's: a 16-bit map's 8x8 window read from DRAM costs more than
    its rows' and columns' passes); over H and W of a map the CPU hands in (in DRAM on the
    default Dedicated_Sram system, where a pool reads a window's rows slowly), an elementwise
    copy into the fast memory and a pool per axis (Vela's shape for REDUCE_ANY/ALL: its CMP_NE
    to -1/0 booleans is that copy); and the `others` (callables of an OperationBuilder) the
    caller has (`_fastest`)."""
    forms = [lambda ops: _pooled_extremes(ops, mode, src, out, reduced, name)]
    if single_window(blocks(src.shape, reduced)) is not None and sum(src.shape[a] > 1 for a in reduced) > 1:
        forms.append(lambda ops: _pooled_extremes(ops, mode, src, out, reduced, name, per_axis=True))
    h, w, _ = src.shape
    if reduced == {0, 1} and h > 1 and w > 1 and h <= POOL_HEIGHT_MAX and src.buffer in lw.cpu_visible():
        forms.append(lambda ops: _staged_pools(ops, mode, src, out, name))
    _fastest(lw, v, forms + (others or []))


def _fastest(lw: LoweringContext, v: OperatorView, forms: list) -> None:
    """Lowers `v` in the form (a callable of an OperationBuilder) the cycle model finds fastest;
    ties keep the earlier form, and so does a lowering without a cycle model."""
    costs = [trial_cycles(lw, lambda context, f=form: f(OperationBuilder(context, v.index, v.opcode)))
             for form in forms] if len(forms) > 1 else [None]
    # None: no cycle model, or no block of the target holds one of the form's operations.
    known = [(c, k) for k, c in enumerate(costs) if c is not None]
    best = forms[min(known)[1]] if known else forms[0]
    best(OperationBuilder(lw, v.index, v.opcode))


def _staged_pools(ops: OperationBuilder, mode: str, src: FeatureMapView, out: FeatureMapView, name: str) -> None:
    """`mode` pools of `src` over H and W: an elementwise copy (MAX with the type's minimum, the
    identity) into a scratch map, a pool over H, then one over W."""
    h, w, c = src.shape
    copy = ops.scratch(f"{name}_staged", src.shape, src.dtype)
    ops.elementwise("MAX", src, ops.lw.constant(np.array([TYPE_RANGE[src.dtype][0]]), src.dtype), copy)
    rows = ops.scratch(name, (1, w, c), src.dtype)
    ops.pool(mode, copy, rows, (h, 1), rounding="NATURAL")
    ops.pool(mode, rows, _dense(out, (1, 1, c)), (1, w), rounding="NATURAL")
