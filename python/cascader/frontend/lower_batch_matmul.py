"""BATCH_MATMUL (int8; int16 on the Ethos-U85) as NPU elementwise MULs and channel sums, or as the
Ethos-U85's matrix product, bit-exact.

TFLite's reference kernel (``reference_ops::BatchMatMul``, int8) computes, per batch (the
leading axes, broadcast where one operand has 1) and per output element,

    acc = sum_k (x[m, k] - zp_x) * (y[k, n] - zp_y)           (int32)
    out = clamp(MultiplyByQuantizedMultiplier(acc, m, e) + zp_out)

with (m, e) = QuantizeMultiplier(float32(s_x * s_y) / s_out), as a per-tensor convolution
forms it. adj_x / adj_y transpose the last two axes of x / y first.

Both operands are computed at run time, and the NPU's convolutions read their weights only as
an encoded (compressed, reordered) stream made at compile time, so the MAC array cannot take
either operand as weights. What the NPU can do with two feature maps is multiply them
elementwise, and sum a map over its channels (REDUCE_SUM). So, as Vela 5.2 does, with K the
channels of both operands (x as batches x M x K, y transposed to batches x N x K): for every
row r of one operand, a MUL of the other operand by that row broadcast along W gives the
products (the MUL subtracts both zero points and does not scale), and a REDUCE_SUM over
their channels gives the accumulators, rescaled with TFL rounding (the reference's
MultiplyByQuantizedMultiplier) into the output's column (or row) r. Every step is exact, so the
result is bit-exact.

Where Vela loops over the N columns of y and sums each product on its own, this lowering
- loops over the columns of y or the rows of x, whichever the cycle model ranks cheaper (the
  sums' shapes differ: a one-row sum leaves most of the MAC array's micro-blocks idle);
- writes the products of up to SUM_SCRATCH_BYTES worth of rows side by side in one scratch
  map and sums them with one REDUCE_SUM (a small sum is mostly its fixed cost), as int16 where
  the zero points keep every product in range (`product_type`), else int32; a least-scratch
  lowering (`LoweringContext.least_scratch`, for the model's least-SRAM points) gives them at most
  PRODUCTS_PER_OPERAND times the operator's largest operand (`products_budget`);
- folds the trailing batch axes into the operations' height, and broadcasts a batch axis of
  size 1 in the row operand through the MUL's broadcast; only batch axes that cannot be folded
  (one operand broadcast along some but not all of them) are looped over;
- transposes an operand only where K is not already its innermost axis, and not at all when
  the other axis is 1 (the bytes are the same), one depth-1 copy per batch as TRANSPOSE does
  (on the Ethos-U85 one copy with its OFM transpose, where the cycle model finds that faster);
- multiplies by a constant y (what converters write for a matmul with weights) as 1x1
  convolutions, y's matrices the encoded weights (with their zero point) and a zero bias: one
  convolution over every batch when y has none, else one per output batch. The MAC array does
  the work the MULs and sums would (Vela 5.2 runs the MULs there too). Where the per-column sum
  of |y - zp_y| is beyond the convolution's accumulator budget, the MULs remain;
- on a target that multiplies feature maps as matrices (`LoweringContext.matmul_from_ifm2`: the
  Ethos-U85's convolution taking its weights from IFM2, as Vela 5.2 runs BATCH_MATMUL there),
  runs x @ y of two computed operands as that one operation, y transposed to batches x N x K
  (`_multiply`), where no batch broadcasts and the accumulators hold every sum (`_one_product`).
  zoo transformer_block's two products on U85-256: 23,941 cycles against 29,093 with the MULs
  and sums (Vela 26,507).

int16 (the Ethos-U85 only, as Vela 5.2): TFLite's reference kernel (``BatchMatMul<int16_t,
int64_t>``) sums the products in int64 (every zero point is 0) and rescales with the int64
MultiplyByQuantizedMultiplier: the 31-bit multiplier reduced to 15 bits, one rounding half up.
That is a 16x8 convolution's output stage (`quantization.reduced_quantise_scale`): the matrix
product with the U85's 48-bit accumulators (ACC_FORMAT 1), which hold any sum of K <= 65,535
products of int16 codes (at most 2^46). So x @ y is the matrix product whatever the batches:
where one operand broadcasts a batch, one product per output batch (`_wide_products`); y constant
or not (the NPU's weights are 8-bit), its transposed copy is the IFM2.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from ..errors import UnsupportedError
from ..perf import estimate_op
from .lower_movement import raw_copy, swap_with_channels
from .lower_ofm_transpose import lower_ofm_transpose
from .lowered import (ELEMENT_SIZE, TENSOR_DIM_MAX, WEIGHT_SUM_MAX, FeatureMapView, LoweredOperation, WeightVolume,
                      channel_scales, dense_strides, full_range, kernel_record)
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder
from .operator_view import OperatorView
from .quantization import convolution_scales

# The products one REDUCE_SUM sums at most (more if one row's are more). Merging sums pays most
# on U65: the attention scores (2 heads x 16 x 16 by 16) take 12,256 cycles on ethos-u65-256 with
# one sum per column, 5,940 with 4 KiB, 5,428 with 16 KiB; a 64 x 64 by 64 product 255,625,
# 178,281 with 16 KiB and 136,297 with 64 KiB, but then needs 76 KiB of SRAM instead of 28 KiB.
# The lowering does not know the compile's SRAM budget, so it takes the middle.
SUM_SCRATCH_BYTES = 16 * 1024
# A least-scratch lowering's products take at most this many times the operator's largest operand or
# output. The products live only within the operator, beside its operands; a scratch many times
# their size sets the model's SRAM peak however it is scheduled (zoo transformer_block: 16 KiB
# of scores products beside 512 B maps, an 18,432 B least against Vela's 9,344 B). With 4x,
# 2 KiB there: 4,624 B, for 2.4% more cycles on U55-128 (75,454 against 73,694) and 3.5% on
# U65-256. Not the default: attention_context's cycles (tests) then exceed Vela's, 8,260 vs
# 7,620 on U55-128; the planner takes the least-scratch lowering for the points where it pays.
PRODUCTS_PER_OPERAND = 4
INT16_MAX = 32767
# The lowering runs before the target is known: plans are ranked by their cycles on these.
RANKING_TARGETS = ("ethos-u55-128", "ethos-u65-256")


def product_type(zero_point_x: int, zero_point_y: int) -> str:
    """The narrowest map that holds every product (q_x - zp_x) * (q_y - zp_y) of int8 codes
    exactly: int16 when the zero points keep it in range (both 0: at most 128 * 128), else int32.
    The sum reads its products from memory, so half the bytes is most of its time."""
    widest = [max(128 + z, 127 - z) for z in (zero_point_x, zero_point_y)]
    return "int16" if widest[0] * widest[1] <= INT16_MAX else "int32"


@dataclass(frozen=True)
class _Operand:
    """One operand with K innermost: a dense (batches x rows x K) view and its batch axes,
    extended to the output's number of batch axes."""

    view: FeatureMapView
    batch: tuple[int, ...]
    rows: int

    def batch_strides(self) -> list[int]:
        """Element offset per step of each batch axis (0 along an axis it broadcasts)."""
        return [0 if d == 1 else math.prod(self.batch[i + 1:]) * self.rows * self.view.shape[2]
                for i, d in enumerate(self.batch)]


@dataclass(frozen=True)
class _Plan:
    """Which operand is multiplied whole (`full`) by each row of the other (`row`), and how the
    output's batch axes split: axes before `split` are looped over one index at a time, the
    rest are folded into the height, `chunk` batches per operation at most."""

    full: _Operand
    row: _Operand
    rows_are_columns: bool  # the row operand is y (its rows are the output's columns)
    split: int
    row_broadcast: bool  # the row operand is 1 along every folded batch axis
    chunk: int
    rows_per_sum: int
    products: str  # the products' type


def _extended(shape: tuple[int, ...], rank: int) -> tuple[int, ...]:
    return (1,) * (rank - len(shape)) + tuple(int(d) for d in shape)


def _k_innermost(lw: LoweringContext, ops: OperationBuilder, t: int, batch: tuple[int, ...], rows: int, depth: int,
                 transposed: bool, name: str) -> _Operand:
    """Operand tensor `t` as batches x rows x K: itself, or (stored as batches x K x rows) a
    transposed scratch copy (on the U85 with its OFM transpose where that is faster). With one
    row or K = 1 the two orders are the same bytes."""
    batches = math.prod(batch)
    stored = (batches, depth, rows) if transposed else (batches, rows, depth)
    view = lw.view(t, stored)
    shape = (batches, rows, depth)
    if not transposed or rows == 1 or depth == 1:
        return _Operand(replace(view, shape=shape, strides=dense_strides(shape, view.element_size)), batch, rows)
    dst = ops.scratch(name, shape, view.dtype, view.zero_point, view.scale)
    label = f"{ops.index}:BATCH_MATMUL({name})"
    steps = lambda context: swap_with_channels(context, ops.index, label, view, dst, axis=1)  # noqa: E731
    # The U85's OFM transpose in one copy, where the cycle model finds it faster than the depth-1
    # planes (transformer_block's values on U85-128: 8,264 cycles as planes, 595 so).
    if not lower_ofm_transpose(lw, ops.index, label, view, dst, (0, 2, 1), steps):
        steps(lw)
    return _Operand(dst, batch, rows)


def products_budget(*operand_bytes: int) -> int:
    """The bytes of products one sum may take: SUM_SCRATCH_BYTES, and at most
    PRODUCTS_PER_OPERAND times the largest of the operator's inputs and output."""
    return min(SUM_SCRATCH_BYTES, PRODUCTS_PER_OPERAND * max(operand_bytes))


def _plans(full: _Operand, row: _Operand, out_batch: tuple[int, ...], rows_are_columns: bool,
           products: str, budget: int) -> list[_Plan]:
    """The plans that multiply `full` by each row of `row`: the largest run of trailing batch
    axes both operands step through uniformly (the full operand has them all, the row operand
    all of them or none: broadcast) folded, and as many rows per sum as the scratch budget
    allows, a quarter of that, or one."""
    split, row_state = len(out_batch), None
    for i in reversed(range(len(out_batch))):
        if out_batch[i] == 1:
            split = i
            continue
        state = row.batch[i] == out_batch[i]
        if full.batch[i] != out_batch[i] or (row_state is not None and state != row_state):
            break
        split, row_state = i, state
    depth = full.view.shape[2]
    # The sum's height is batches x full rows (rows of y) or batches (rows of x); its width the
    # summed rows (x full rows); every NPU dimension is at most TENSOR_DIM_MAX.
    chunk = max(1, TENSOR_DIM_MAX // full.rows) if rows_are_columns else TENSOR_DIM_MAX
    chunk = min(chunk, math.prod(out_batch[split:]))
    per_sum = budget // (chunk * full.rows * depth * ELEMENT_SIZE[products])
    if not rows_are_columns:
        per_sum = min(per_sum, TENSOR_DIM_MAX // full.rows)
    most = max(1, min(per_sum, row.rows))
    return [_Plan(full, row, rows_are_columns, split, row_state is False, chunk, j, products)
            for j in sorted({most, max(1, most // 4), 1}, reverse=True)]


def lower_batch_matmul(lw: LoweringContext, v: OperatorView) -> None:
    x_t, y_t, out_t = v.inputs[0], v.inputs[1], v.ofm
    assert x_t is not None and y_t is not None and out_t is not None
    types = {x_t.dtype, y_t.dtype, out_t.dtype}
    wide = types == {"int16"}
    if types != {"int8"} and not (wide and lw.matmul_from_ifm2):
        raise UnsupportedError(f"operator {v.index} (BATCH_MATMUL): lowered for int8, and for int16 on a target that "
                               "multiplies matrices (the Ethos-U85), as Vela")
    if wide and any(int(t.quantization.zero_point[0]) for t in (x_t, y_t, out_t)):
        raise UnsupportedError(f"operator {v.index} (BATCH_MATMUL): int16 zero points must be 0 (TFLite's kernel)")
    adj_x, adj_y = bool(v.options.get("adj_x", False)), bool(v.options.get("adj_y", False))
    rank = len(out_t.shape)
    xs, ys = _extended(x_t.shape, rank), _extended(y_t.shape, rank)
    if rank < 2 or len(x_t.shape) < 2 or len(y_t.shape) < 2:
        raise UnsupportedError(f"operator {v.index} (BATCH_MATMUL): operands must be at least 2-D")
    m, k = (xs[-1], xs[-2]) if adj_x else (xs[-2], xs[-1])
    n, k_y = (ys[-2], ys[-1]) if adj_y else (ys[-1], ys[-2])
    out_batch = tuple(int(d) for d in out_t.shape[:-2])
    if (k != k_y or tuple(out_t.shape[-2:]) != (m, n)
            or any(o != max(a, b) or min(a, b) not in (1, o) for a, b, o in zip(xs[:-2], ys[:-2], out_batch))):
        raise UnsupportedError(f"operator {v.index} (BATCH_MATMUL): shapes {list(x_t.shape)} x {list(y_t.shape)} "
                               f"(adj_x {adj_x}, adj_y {adj_y}) do not give {list(out_t.shape)}")
    ops = OperationBuilder(lw, v.index, v.opcode)
    scale = convolution_scales(float(x_t.quantization.scale[0]), np.asarray([y_t.quantization.scale[0]]),
                               float(out_t.quantization.scale[0]), float32_product=True, reduced=wide)[0]
    # A multiplier TFLite flushes to 0 keeps no shift (the reduced one's would be negative).
    ofm_scale = (int(scale[0]), int(scale[1])) if scale[0] else (0, 0)
    a = _k_innermost(lw, ops, v.op.inputs[0], xs[:-2], m, k, adj_x, "x_transposed")
    out_shape = (math.prod(out_batch), m, n)
    out = lw.view(v.op.outputs[0], out_shape)
    dense = dense_strides(out_shape, out.element_size)
    # An output written into a concatenation's slice is not dense: sum into a dense map, then copy.
    target = out if out.strides == dense else ops.scratch("result", out_shape, out.dtype, out.zero_point, out.scale)
    weights = _constant_matrices(y_t, ys, adj_y) if y_t.is_constant and not x_t.is_constant and not wide else None
    if wide:
        bt = _k_innermost(lw, ops, v.op.inputs[1], ys[:-2], n, k, not adj_y, "y_transposed")
        _wide_products(ops, a, bt, out_batch, target, ofm_scale)
    elif weights is not None:
        _convolve(ops, a, weights, ys[:-2], int(y_t.quantization.zero_point[0]), out_batch, target, ofm_scale)
    else:
        bt = _k_innermost(lw, ops, v.op.inputs[1], ys[:-2], n, k, not adj_y, "y_transposed")
        if lw.matmul_from_ifm2 and _one_product(a, bt, out_shape):
            _multiply(ops, a, bt, target, ofm_scale)
            if target is not out:
                raw_copy(lw, v.index, f"{v.index}:BATCH_MATMUL(copy)", target, out)
            return
        products = product_type(a.view.zero_point, bt.view.zero_point)
        budget = products_budget(x_t.nbytes, y_t.nbytes, out_t.nbytes) if lw.least_scratch else SUM_SCRATCH_BYTES
        plans = _plans(a, bt, out_batch, True, products, budget) + _plans(bt, a, out_batch, False, products, budget)
        plan = min(plans, key=lambda p: _cycles(p, out_batch, target, (m, n)))
        _emit(ops, plan, out_batch, target, ofm_scale, (m, n))
    if target is not out:
        raw_copy(lw, v.index, f"{v.index}:BATCH_MATMUL(copy)", target, out)


def _constant_matrices(y_t, ys: tuple[int, ...], adj_y: bool) -> np.ndarray | None:
    """A constant y as convolution weights, (batches of y, N, K): None where a column's sum of
    |y - zp_y| is beyond the convolution accumulator's budget."""
    y = np.asarray(y_t.data).reshape(math.prod(ys[:-2]), ys[-2], ys[-1])
    matrices = y if adj_y else np.swapaxes(y, 1, 2)
    zero_point = int(y_t.quantization.zero_point[0])
    worst = np.abs(matrices.astype(np.int64) - zero_point).sum(axis=2).max()
    return np.ascontiguousarray(matrices) if worst <= WEIGHT_SUM_MAX else None


def _convolve(ops: OperationBuilder, a: _Operand, weights: np.ndarray, y_batch: tuple[int, ...], zero_point: int,
              out_batch: tuple[int, ...], out: FeatureMapView, ofm_scale: tuple[int, int]) -> None:
    """out = x @ y with y constant: 1x1 convolutions of x's rows (batches x M x K) by y's
    matrices (OHWI: N x 1 x 1 x K), a zero bias. The reference rescales with
    MultiplyByQuantizedMultiplier, so TFL rounding."""
    n, depth = weights.shape[1], weights.shape[2]

    def convolution(name: str, ifm: FeatureMapView, ofm: FeatureMapView, matrix: np.ndarray) -> None:
        volume = WeightVolume(matrix.reshape(n, 1, 1, depth), np.full(n, zero_point, np.int64), np.zeros(n, np.int64),
                              channel_scales(*ofm_scale, n), False)
        registers = dict(kernel=kernel_record(1, 1), padding=(0, 0, 0, 0), activation=full_range(ofm.dtype),
                         rounding="TFL", global_scale=False, ofm_scale=(0, 0), acc_format=0)
        ops.lw.add(LoweredOperation("conv", "conv2d", f"{ops.index}:BATCH_MATMUL({name})", (ops.index,), ifm, ofm,
                                    weights=volume, registers=registers))

    if weights.shape[0] == 1:  # one matrix for every batch (x's batches are the output's)
        convolution("conv", a.view, out, weights[0])
        return
    x_strides = a.batch_strides()
    for p in np.ndindex(*out_batch):
        x_offset = sum(i * s for i, s in zip(p, x_strides)) * a.view.element_size
        matrix = weights[_broadcast_index(p, y_batch)]
        out_offset = _broadcast_index(p, out_batch) * a.rows * n * out.element_size
        convolution(f"conv{list(p)}", replace(a.view, shape=(1, a.rows, depth), offset=a.view.offset + x_offset),
                    replace(out, shape=(1, a.rows, n), offset=out.offset + out_offset), matrix)


def _one_product(a: _Operand, bt: _Operand, out_shape: tuple[int, int, int]) -> bool:
    """Whether x @ y is one matrix product of the target's (`_multiply`): both operands have every
    batch (none broadcast), every map fits the NPU's dimensions, and the 32-bit accumulators hold
    any sum of K products of codes less their zero points (else the reference's int32 sum and
    the MULs' path stay the only exact ones)."""
    depth = a.view.shape[2]
    widest = [max(128 + z, 127 - z) for z in (a.view.zero_point, bt.view.zero_point)]
    return (a.batch == bt.batch and max(*out_shape, depth) <= TENSOR_DIM_MAX
            and depth * widest[0] * widest[1] < 2 ** 31)


def _multiply(ops: OperationBuilder, a: _Operand, bt: _Operand, out: FeatureMapView,
              ofm_scale: tuple[int, int], name: str = "matmul") -> None:
    """out = x @ y as one matrix product of the target's (`LoweringContext.matmul_from_ifm2`):
    a 1x1 convolution of x's rows (batches x M x K) that takes its weights from the IFM2, y
    transposed (batches x N x K): OFM (b, i, j) = sum over k of (x - zp_x)(b, i, k) (y - zp_y)(b,
    j, k), rescaled by the global OFM scale, as the reference: int8 with TFL rounding, int16 in
    the 48-bit accumulators with the reduced multiplier's one rounding half up (NATURAL). Both
    operands have every batch (no broadcast): each OFM row is its own batch."""
    wide = out.dtype == "int16"
    registers = dict(kernel=kernel_record(1, 1), padding=(0, 0, 0, 0), activation=full_range(out.dtype),
                     rounding="NATURAL" if wide else "TFL", global_scale=True, ofm_scale=ofm_scale,
                     acc_format=1 if wide else 0, weights_ifm2=True)
    ops.lw.add(LoweredOperation("conv", "conv2d", f"{ops.index}:BATCH_MATMUL({name})", (ops.index,), a.view, out,
                                ifm2=bt.view, registers=registers))


def _wide_products(ops: OperationBuilder, a: _Operand, bt: _Operand, out_batch: tuple[int, ...],
                   out: FeatureMapView, ofm_scale: tuple[int, int]) -> None:
    """int16 x @ y as matrix products (`_multiply`): one where no batch broadcasts, or where y has
    one batch (x's batches of rows folded into one of B x M rows); else one per output batch,
    each operand at the batch it broadcasts to."""
    depth, m, n = a.view.shape[2], a.rows, bt.rows
    batches = math.prod(out_batch)
    if max(batches, m, n, depth) > TENSOR_DIM_MAX:
        raise UnsupportedError(f"BATCH_MATMUL: {batches} batches of {m} x {depth} by {depth} x {n} leave the NPU's "
                               f"{TENSOR_DIM_MAX} per dimension")
    if a.batch == bt.batch:
        _multiply(ops, a, bt, out, ofm_scale)
        return
    if math.prod(bt.batch) == 1 and math.prod(a.batch) == batches and batches * m <= TENSOR_DIM_MAX:
        rows = replace(a.view, shape=(1, batches * m, depth), strides=dense_strides((1, batches * m, depth),
                                                                                    a.view.element_size))
        folded = replace(out, shape=(1, batches * m, n), strides=dense_strides((1, batches * m, n), out.element_size))
        _multiply(ops, replace(a, view=rows), bt, folded, ofm_scale)
        return
    x_strides, y_strides = a.batch_strides(), bt.batch_strides()
    for p in np.ndindex(*out_batch):
        x_at = a.view.offset + sum(i * s for i, s in zip(p, x_strides)) * a.view.element_size
        y_at = bt.view.offset + sum(i * s for i, s in zip(p, y_strides)) * bt.view.element_size
        out_at = out.offset + _broadcast_index(p, out_batch) * m * n * out.element_size
        _multiply(ops, replace(a, view=replace(a.view, shape=(1, m, depth), offset=x_at)),
                  replace(bt, view=replace(bt.view, shape=(1, n, depth), offset=y_at)),
                  replace(out, shape=(1, m, n), offset=out_at), ofm_scale, f"matmul{list(p)}")


def _broadcast_index(index: tuple[int, ...], batch: tuple[int, ...]) -> int:
    """The flat batch of an array of batch axes `batch` that output batch `index` reads (axes of
    size 1 broadcast)."""
    return sum(i * math.prod(batch[k + 1:]) for k, i in enumerate(index) if batch[k] > 1)


def _steps(plan: _Plan, out_batch: tuple[int, ...], out: FeatureMapView, sums: FeatureMapView,
           mn: tuple[int, int]) -> Iterator[tuple[FeatureMapView, ...]]:
    """The plan's operations in order: (full rows, one row, products) for a MUL, (products,
    output) for a REDUCE_SUM. `sums` is the products' scratch map (shape `_sums_shape`)."""
    full, row = plan.full, plan.row
    f_rows, r_rows, depth = full.rows, row.rows, full.view.shape[2]
    m, n = mn
    e_full, e_row, e_out, acc = full.view.element_size, row.view.element_size, out.element_size, sums.element_size
    inner = math.prod(out_batch[plan.split:])
    out_strides = [math.prod(out_batch[i + 1:]) * m * n for i in range(len(out_batch))]
    full_strides, row_strides = full.batch_strides(), row.batch_strides()
    j_max = plan.rows_per_sum
    for outer in np.ndindex(*out_batch[:plan.split]):
        o_full = sum(i * s for i, s in zip(outer, full_strides))
        o_row = sum(i * s for i, s in zip(outer, row_strides))
        o_out = sum(i * s for i, s in zip(outer, out_strides))
        for b0 in range(0, inner, plan.chunk):
            hb = min(plan.chunk, inner - b0)
            f_view = replace(full.view, shape=(hb, f_rows, depth),
                             offset=full.view.offset + (o_full + b0 * f_rows * depth) * e_full)
            row_h = 1 if plan.row_broadcast else hb
            row_base = o_row + (0 if plan.row_broadcast else b0 * r_rows * depth)
            # Products laid out so that a sum's outputs are the output's: batch x full row x
            # summed row x K when the summed rows are columns, batch x summed row x full row x K
            # when they are rows.
            if plan.rows_are_columns:
                p_strides = (f_rows * j_max * depth * acc, j_max * depth * acc, acc)
            else:
                p_strides = (j_max * f_rows * depth * acc, depth * acc, acc)
            for r0 in range(0, r_rows, j_max):
                jc = min(j_max, r_rows - r0)
                for j in range(jc):
                    r_view = replace(row.view, shape=(row_h, 1, depth),
                                     offset=row.view.offset + (row_base + (r0 + j) * depth) * e_row)
                    p_offset = j * (depth if plan.rows_are_columns else f_rows * depth) * acc
                    yield f_view, r_view, replace(sums, shape=(hb, f_rows, depth), offset=p_offset, strides=p_strides)
                # The sum's two axes from (batch, full row, summed row): a one-row or one-column
                # sum keeps most of the MAC array's micro-blocks idle.
                start = out.offset + (o_out + b0 * m * n + (r0 if plan.rows_are_columns else r0 * n)) * e_out
                if plan.rows_are_columns and jc == 1:  # out[b, f, r0]: b then f, of stride n
                    p_in = replace(sums, shape=(hb, f_rows, depth), strides=p_strides)
                    o_view = replace(out, shape=(hb, f_rows, 1), strides=(m * n * e_out, n * e_out, e_out), offset=start)
                elif plan.rows_are_columns:  # out[b, f, r0 + j]: b x f of stride n, then j
                    p_in = replace(sums, shape=(hb * f_rows, jc, depth))
                    o_view = replace(out, shape=(hb * f_rows, jc, 1), strides=(n * e_out, e_out, e_out), offset=start)
                elif hb == 1:  # out[b, r0 + j, f]: j of stride n, then f
                    p_in = replace(sums, shape=(jc, f_rows, depth), strides=(f_rows * depth * acc, depth * acc, acc))
                    o_view = replace(out, shape=(jc, f_rows, 1), strides=(n * e_out, e_out, e_out), offset=start)
                else:  # out[b, r0 + j, f]: b, then (j, f) along one row of stride 1
                    p_in = replace(sums, shape=(hb, jc * f_rows, depth))
                    o_view = replace(out, shape=(hb, jc * f_rows, 1), strides=(m * n * e_out, e_out, e_out),
                                     offset=start)
                yield p_in, o_view


def _sums_shape(plan: _Plan) -> tuple[int, int, int]:
    f_rows, depth = plan.full.rows, plan.full.view.shape[2]
    if plan.rows_are_columns:
        return (plan.chunk * f_rows, plan.rows_per_sum, depth)
    return (plan.chunk, plan.rows_per_sum * f_rows, depth)


def _emit(ops: OperationBuilder, plan: _Plan, out_batch: tuple[int, ...], out: FeatureMapView,
          ofm_scale: tuple[int, int], mn: tuple[int, int]) -> None:
    sums = ops.scratch("products", _sums_shape(plan), plan.products)
    for step in _steps(plan, out_batch, out, sums, mn):
        if len(step) == 3:
            ops.elementwise("MUL", *step)
        else:
            ops.pool("REDUCE_SUM", *step, rounding="TFL", ofm_scale=ofm_scale)


def _cycles(plan: _Plan, out_batch: tuple[int, ...], out: FeatureMapView, mn: tuple[int, int]) -> float:
    """The plan's cycles by the cycle model, on the targets the ranking was measured on (the
    lowering runs before the target is known)."""
    shape = _sums_shape(plan)
    sums = FeatureMapView(-1, shape, plan.products, 0, 1.0, dense_strides(shape, ELEMENT_SIZE[plan.products]))
    total = 0.0
    for step in _steps(plan, out_batch, out, sums, mn):
        if len(step) == 3:
            total += _operation_cycles("mul", step[0].shape, step[2].shape, step[1].shape, step[0].dtype, plan.products)
        else:
            total += _operation_cycles("reduce_sum", step[0].shape, step[1].shape, None, plan.products, out.dtype)
    return total


@functools.lru_cache(maxsize=4096)
def _operation_cycles(kind: str, ifm: tuple[int, int, int], ofm: tuple[int, int, int],
                      ifm2: tuple[int, int, int] | None, ifm_dtype: str, ofm_dtype: str) -> float:
    extra = {} if ifm2 is None else dict(ifm2_shape=ifm2, ifm2_dtype=ifm_dtype)
    return sum(estimate_op(kind, ifm, ofm, accelerator=a, ifm_dtype=ifm_dtype, ofm_dtype=ofm_dtype, **extra).total_cycles
               for a in RANKING_TARGETS)
