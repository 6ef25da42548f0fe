"""GATHER and SCATTER_ND as the Ethos-U85's indexed DMA.

The U85's DMA moves rows of bytes in up to three dimensions, and on one side (source or
destination) the row number may come from an index array instead of the row counter: a
gather reads row `index[j][i]` of batch j, a scatter writes there. TFLite's GATHER and
SCATTER_ND move whole rows of codes (no arithmetic, quantization kept), so each is one such
DMA, as Vela 5.2 lowers them (Vela's regor: TFLite GATHER -> GraphIR Gather, SCATTER_ND ->
Scatter, both NpuOp::Dma; arch/ethos_u85/dma.hpp has the register semantics):

- GATHER with axis == batch_dims (Vela's constraint): N batches (the product of the axes
  before `axis`), each a table of K rows (the axis) of C elements (the product of the axes
  after it), and W indices per batch. The DMA reads row index[n][w] of table n into row
  (n, w) of the output: 3-D for N > 1 (size1 = N), 2-D otherwise. The indices are constant
  (in flash, converted to int32 here whatever their type, counted from the least of them) or
  computed at run time: int32 read where they live, int64 by their low words (a DMA per batch
  that skips the high words, as Vela does), int16 widened to int32 words by two DMAs first
  (zeros, then each index into the low half of its word; Vela casts them on the NPU).
- SCATTER_ND with constant, unique, one-dimensional indices (Vela's constraints): a plain DMA
  fills the output with zeros from flash (TFLite's kernel adds the updates to a zeroed
  output: with unique indices that is a copy), then the indexed DMA writes update row w to
  output row index[w].

An operation here is kind "dma" (cost kind "dma"): its `registers["u85_dma"]` holds the
decoder's `u85_dma` fields but the addresses (sizes, strides, row bytes, IDX_MAX), and the
emitter adds the source (`ifm`), destination (`ofm`) and index array (`ifm2`) addresses
(emit/ethos_u85.dma_record). Its maps stay dense NHWC (the rows are bytes) and whole: the
planner never stripes or cascades through it (any output row may need any input row).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..arch import Accelerator
from ..errors import UnsupportedError
from .lowered import ELEMENT_SIZE, FeatureMapView, LoweredOperation, dense_strides
from .lowering_context import LoweringContext
from .operator_view import OperatorView

DMA_SIZE_MAX = 65535  # DMA0_SIZE0/SIZE1 are 16-bit
INDEX_TYPES = ("int32", "int64", "int16")  # TFLite GATHER's position types


def _operand(lw: LoweringContext, t: int, shape: tuple[int, int, int], what: str) -> FeatureMapView:
    """Tensor `t` as `shape` rows of bytes the DMA can walk: its bytes dense in that shape, or
    its own view when that has the shape (a slice of a larger map: any row and column strides,
    the elements dense)."""
    v = lw.view(t, shape)
    if v.layout == "NHWC" and v.strides == dense_strides(shape, v.element_size):
        return v
    v = lw.view(t)
    if v.layout == "NHWC" and v.shape == shape and v.strides[2] == v.element_size:
        return v
    raise UnsupportedError(f"the {what} of this operator is not a map the DMA can read in rows")


def dma_registers(size1: int, size0: int, row_bytes: int, src: tuple[int, int], dst: tuple[int, int],
                  src_indexed: bool = False, dst_indexed: bool = False, index_max: int = 0,
                  index_skip1: int = 0) -> dict:
    """The decoder's `u85_dma` fields of a DMA of size1 x size0 rows of `row_bytes` (without
    the index array's address), `src`/`dst` the (stride1, stride0) byte strides. The stride mode
    is the fewest dimensions that hold the sizes (Vela's rule), and the fields a mode leaves
    unread are 0, as the decoder reports them (arch/ethos_u85/dma.cpp)."""
    if max(size0, size1) > DMA_SIZE_MAX:
        raise UnsupportedError(f"a DMA of {size1} x {size0} rows exceeds the U85's {DMA_SIZE_MAX} per dimension")
    mode = 2 if size1 > 1 else 1 if size0 > 1 else 0

    def strides(s: tuple[int, int], indexed: bool) -> tuple[int, int]:
        return (s[0] if mode == 2 else 0, s[1] if mode >= 1 or indexed else 0)

    return {"stride_mode": mode, "src_indexed": src_indexed, "dst_indexed": dst_indexed, "row_bytes": row_bytes,
            "sizes": (size1 if mode == 2 else 1, size0 if mode >= 1 else 1),
            "src_strides": strides(src, src_indexed), "dst_strides": strides(dst, dst_indexed),
            "index_max": index_max if src_indexed or dst_indexed else 0,
            "index_skip1": index_skip1 if mode == 2 and (src_indexed or dst_indexed) else 0}


def dma_spans(m: dict) -> tuple[int, int, int]:
    """The bytes a DMA of `u85_dma` fields `m` may read, write and read of indices: on the
    indexed side any row up to IDX_MAX (arch/ethos_u85/dma.cpp bounds them so, and the
    estimator costs a DMA by its source's)."""
    size1, size0 = m["sizes"]

    def span(strides: tuple[int, int], indexed: bool) -> int:
        count = m["index_max"] + 1 if indexed else size0
        return (count - 1) * strides[1] + (size1 - 1) * strides[0] + m["row_bytes"]

    if not (m["stride_mode"] or m["src_indexed"] or m["dst_indexed"]):
        return m["row_bytes"], m["row_bytes"], 0
    indexed = m["src_indexed"] or m["dst_indexed"]
    return (span(m["src_strides"], m["src_indexed"]), span(m["dst_strides"], m["dst_indexed"]),
            size1 * (4 * size0 + m["index_skip1"]) if indexed else 0)


def _dma(lw: LoweringContext, index: int, name: str, src: FeatureMapView, dst: FeatureMapView,
         registers: dict, indices: FeatureMapView | None = None) -> None:
    lw.add(LoweredOperation("dma", "dma", name, (index,), src, dst, ifm2=indices, registers={"u85_dma": registers}))


def _constant_indices(v: OperatorView, t, k: int, what: str) -> np.ndarray:
    """A constant index tensor as int32, each index checked against the K rows it picks from
    (TFLite's kernels refuse an index out of range; the DMA's would be undefined)."""
    values = np.asarray(t.data).astype(np.int64)
    if values.size and (values.min() < 0 or values.max() >= k):
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): {what} {values.min()}..{values.max()} leave "
                               f"0..{k - 1}")
    return values.astype(np.int32)


def gather_axes(v: OperatorView) -> tuple[int, int]:
    """(axis, batch_dims) of a GATHER, both made non-negative as TFLite's kernel does."""
    params, indices = v.inputs[0], v.inputs[1]
    axis, batch_dims = int(v.options.get("axis", 0)), int(v.options.get("batch_dims", 0))
    if axis < 0:
        axis += len(params.shape)
    if batch_dims < 0:
        batch_dims += len(indices.shape)
    return axis, batch_dims


def _u85(lw: LoweringContext, v: OperatorView) -> None:
    if not Accelerator.is_u85(lw.accelerator):
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): the indexed DMA is the Ethos-U85's")


def lower_gather(lw: LoweringContext, v: OperatorView) -> None:
    _u85(lw, v)
    params, indices = v.inputs[0], v.inputs[1]
    axis, batch_dims = gather_axes(v)
    if axis != batch_dims:
        raise UnsupportedError(f"operator {v.index} (GATHER): axis {axis} != batch_dims {batch_dims}")
    shape = tuple(map(int, params.shape))
    n, k, c = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
    w = math.prod(int(d) for d in indices.shape[batch_dims:])
    name = f"{v.index}:GATHER"
    src = _operand(lw, v.op.inputs[0], (n, k, c), "params")
    dst = _operand(lw, v.op.outputs[0], (n, w, c), "output")
    row = c * src.element_size
    if indices.is_constant:
        rows = _constant_indices(v, indices, k, "indices")
        # Read from the first row an index picks: IDX_MAX and the bytes the DMA may read shrink
        # to the rows between the least and the greatest index (a table in flash costs that).
        first = int(rows.min())
        src = replace(src, shape=(n, int(rows.max()) - first + 1, c), offset=src.offset + first * src.strides[1])
        _dma(lw, v.index, name, src, dst, dma_registers(n, w, row, src.strides[:2], dst.strides[:2], src_indexed=True,
                                                        index_max=src.shape[1] - 1), lw.constant(rows - first, "int32"))
    elif indices.dtype == "int32":
        _dma(lw, v.index, name, src, dst,
             dma_registers(n, w, row, src.strides[:2], dst.strides[:2], src_indexed=True, index_max=k - 1),
             _operand(lw, v.op.inputs[1], (1, 1, n * w), "indices"))
    elif indices.dtype == "int64":
        _int64_gather(lw, v.index, name, src, dst, _raw(lw, v.op.inputs[1], 2 * n * w, "int32"))
    elif indices.dtype == "int16":
        _dma(lw, v.index, name, src, dst,
             dma_registers(n, w, row, src.strides[:2], dst.strides[:2], src_indexed=True, index_max=k - 1),
             _widened(lw, v.index, name, _raw(lw, v.op.inputs[1], n * w, "int16")))
    else:
        raise UnsupportedError(f"operator {v.index} (GATHER): {indices.dtype} indices")


def _raw(lw: LoweringContext, t: int, count: int, dtype: str) -> FeatureMapView:
    """Run-time index tensor `t` as a vector of `count` `dtype` words (no quantization: indices)."""
    return FeatureMapView(lw.buffer(t), (1, 1, count), dtype, 0, 1.0, dense_strides((1, 1, count), ELEMENT_SIZE[dtype]))


def _widened(lw: LoweringContext, index: int, name: str, indices: FeatureMapView) -> FeatureMapView:
    """Run-time int16 indices as the int32 words the DMA reads: zeros copied in, then each
    index's two bytes into the low half of its word (a 2-D DMA of 2-byte rows, 4 bytes apart).
    Exact for every index a gather may take (0..32767, non-negative: the high half is 0);
    Vela casts them on the NPU instead."""
    count = indices.shape[2]
    if count > DMA_SIZE_MAX:
        raise UnsupportedError(f"{count} run-time int16 indices exceed the {DMA_SIZE_MAX} rows of one DMA")
    words = lw.scratch(index, "indices-int32", (1, 1, count), "int32")
    zeros = lw.constant(np.zeros(count, np.int32), "int32")
    _dma(lw, index, f"{name}(index zeros)", zeros, words, dma_registers(1, 1, 4 * count, (0, 0), (0, 0)))
    _dma(lw, index, f"{name}(index widening)", indices, words, dma_registers(1, count, 2, (0, 2), (0, 4)))
    return words


def _int64_gather(lw: LoweringContext, index: int, name: str, src: FeatureMapView, dst: FeatureMapView,
                  words: FeatureMapView) -> None:
    """A gather by run-time int64 indices (`words`: their bytes as int32 words, low word first):
    the DMA reads int32 indices only, so each batch is a 3-D DMA of one index per row that skips
    the high word (IDX_SKIP1 = 4), as Vela does; indices beyond int32 are out of range anyway."""
    (n, k, c), w = src.shape, dst.shape[1]
    row = c * src.element_size
    for b in range(n):
        table, out = src.window((b, 0, 0), (1, k, c)), dst.window((b, 0, 0), (1, w, c))
        _dma(lw, index, name if n == 1 else f"{name}[{b}]", table, out,
             dma_registers(w, 1, row, (0, table.strides[1]), (out.strides[1], 0), src_indexed=True, index_max=k - 1,
                           index_skip1=4),
             words.window((0, 0, 2 * w * b), (1, 1, 2 * w)))


def lower_scatter_nd(lw: LoweringContext, v: OperatorView) -> None:
    _u85(lw, v)
    indices, updates, shape_t = v.inputs[0], v.inputs[1], v.inputs[2]
    if not (indices.is_constant and shape_t.is_constant):
        raise UnsupportedError(f"operator {v.index} (SCATTER_ND): the indices and the shape must be constant")
    if indices.shape[-1] != 1:
        raise UnsupportedError(f"operator {v.index} (SCATTER_ND): indices of depth {indices.shape[-1]} (the DMA "
                               "indexes the first axis only)")
    out_shape = [int(d) for d in np.asarray(shape_t.data).reshape(-1)]
    k, c = out_shape[0], math.prod(out_shape[1:])
    w = math.prod(int(d) for d in indices.shape[:-1])
    rows = _constant_indices(v, indices, k, "indices")
    if len(np.unique(rows)) != rows.size:
        raise UnsupportedError(f"operator {v.index} (SCATTER_ND): repeated indices (TFLite adds their updates; "
                               "the DMA would overwrite)")
    name = f"{v.index}:SCATTER_ND"
    src = _operand(lw, v.op.inputs[1], (1, w, c), "updates")
    dst = _operand(lw, v.op.outputs[0], (1, k, c), "output")
    row = c * dst.element_size
    zeros = lw.constant(np.zeros(k * row, np.uint8), "uint8")
    zeros = FeatureMapView(zeros.buffer, (1, k, c), dst.dtype, 0, 1.0, dense_strides((1, k, c), dst.element_size))
    dense = dst.strides == dense_strides(dst.shape, dst.element_size)
    # The zeros: one plain copy into a dense output, else a row at a time.
    _dma(lw, v.index, f"{name}(zeros)", zeros, dst,
         dma_registers(1, 1, k * row, (0, 0), (0, 0)) if dense
         else dma_registers(1, k, row, zeros.strides[:2], dst.strides[:2]))
    # Written from the first row an index picks, as a gather reads (IDX_MAX the span of them).
    first = int(rows.min())
    at = replace(dst, shape=(1, int(rows.max()) - first + 1, c), offset=dst.offset + first * dst.strides[1])
    _dma(lw, v.index, name, src, at,
         dma_registers(1, w, row, src.strides[:2], at.strides[:2], dst_indexed=True, index_max=at.shape[1] - 1),
         lw.constant(rows - first, "int32"))
