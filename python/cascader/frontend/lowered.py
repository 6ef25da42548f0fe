"""The lowering's value types: NPU operations over views of buffers, before scheduling.

A `LoweredOperation`'s `registers` are the placement-independent fields of the operation
record `cascader.sim.decode` returns (kind, kernel, padding, activation, rounding, scales...):
the emitter adds addresses, block config and weight streams, and encodes exactly that record,
so a decode of our binary gives back the same values.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

ELEMENT_SIZE = {"int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8}  # int64: ARG_MAX's indices
TYPE_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}  # the feature-map types
# The activation register's functions beside clamping: the NPU's own int16 TANH and SIGMOID,
# and a table in LUT slot 0 (slots 1-7 follow).
TANH_FUNCTION, SIGMOID_FUNCTION, LUT_SLOT_0 = 3, 4, 16


@dataclass(frozen=True)
class FeatureMapView:
    """How an operation sees a feature map: which buffer, where in it, in what shape.

    `buffer` is the tensor index owning the bytes (aliases resolved), a negative id for a
    constant made by the lowering, or an id past the model's tensors for a scratch buffer the
    lowering needs between its own operations (a softmax's int32 intermediates). `offset` is
    the byte of element (0, 0, 0) in it and `strides` the (y, x, c) byte strides, both of the
    buffer's own NHWC layout, so a concatenation slice is a view with an offset and its
    parent's strides.
    """

    buffer: int
    shape: tuple[int, int, int]
    dtype: str
    zero_point: int
    scale: float
    strides: tuple[int, int, int]
    offset: int = 0
    layout: str = "NHWC"  # or "NHCWB16": 16-channel bricks, the NPU's native format
    # A rolling buffer's height in rows (0: an ordinary buffer). Row r of the view is row
    # (start + r) mod wrap_rows of the buffer, start = offset // strides[0]: the emitter splits
    # the rows that wrap into the NPU's second tile, based at the buffer's first row.
    wrap_rows: int = 0

    @property
    def element_size(self) -> int:
        return ELEMENT_SIZE[self.dtype]

    def window(self, origin: tuple[int, int, int], extent: tuple[int, int, int]) -> "FeatureMapView":
        """The box of `extent` elements at element `origin` of this view, in place (NHWC)."""
        offset = self.offset + sum(o * s for o, s in zip(origin, self.strides))
        return replace(self, shape=tuple(extent), offset=offset)  # type: ignore[arg-type]


@dataclass(frozen=True)
class WeightVolume:
    """A convolution's constants before encoding: OHWI weights (I = 1 for depthwise), their zero
    points, and per OFM channel the bias and the (multiplier, shift) rescale (`scales`, one
    int64 row per channel: the encoder takes the two columns as they are)."""

    values: np.ndarray
    zero_points: np.ndarray
    bias: np.ndarray
    scales: np.ndarray
    depthwise: bool


def channel_scales(multiplier: int, shift: int, channels: int) -> np.ndarray:
    """A `WeightVolume.scales` with the same (multiplier, shift) for every channel."""
    return np.tile(np.array([multiplier, shift], np.int64), (channels, 1))


@dataclass
class LoweredOperation:
    """One NPU operation before scheduling: the register fields, its feature maps and constants.

    `lut` holds the bytes of the lookup table its activation applies (256 int8 entries, or 256
    int32 words for a 32-bit output); the emitter copies it into the SHRAM before the operation.
    """

    kind: str  # the decoder's kind: conv, depthwise, pool, elementwise
    cost_kind: str  # the cycle model's kind (`cascader.estimate_op`)
    name: str
    sources: tuple[int, ...]  # TFLite operator indices it implements
    ifm: FeatureMapView
    ofm: FeatureMapView
    ifm2: FeatureMapView | None = None
    weights: WeightVolume | None = None
    registers: dict[str, Any] = field(default_factory=dict)
    lut: bytes | None = None


@dataclass
class LoweredSegment:
    """An NPU segment as operations over buffers.

    `buffers` maps every buffer (a tensor index, or a scratch id) to its byte size; `aliases`
    maps every tensor the segment touches to its buffer; `ifms` / `ofms` are the tensors the
    CPU side hands in and reads back (model tensors, in first-use order); `constants` holds the
    bytes of constant feature maps (they go to flash); `scratch` names the scratch buffers;
    `persistent` are those that keep their bytes between inferences (the persistent arena);
    `resident` those that keep them in the scratch arena, at one offset (resource variables).
    """

    operators: tuple[int, ...]
    operations: list[LoweredOperation]
    buffers: dict[int, int]
    aliases: dict[int, int]
    ifms: tuple[int, ...]
    ofms: tuple[int, ...]
    constants: dict[int, bytes]
    scratch: dict[int, str] = field(default_factory=dict)
    shapes: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # every buffer's own H x W x C
    persistent: frozenset[int] = frozenset()  # scratch buffers that outlive an inference (state)
    # Buffers at one offset of the scratch arena for the whole inference and across inferences
    # (resource variables): buffer -> the variable's key (`lower_resource_variables`).
    resident: dict[int, str] = field(default_factory=dict)


def dense_strides(shape: tuple[int, int, int], element_size: int) -> tuple[int, int, int]:
    h, w, c = shape
    return (w * c * element_size, c * element_size, element_size)


def views_whole(v: FeatureMapView, natural: tuple[int, int, int] | None) -> bool:
    """Whether `v` is its buffer of shape `natural` whole, in the buffer's own order and
    layout: not a permuted view of the same shape (a square TRANSPOSE's read of H and W
    swapped), whose rows are no rows of the buffer (random network int8 seed 1647: striped as
    rows, and stored as bricks, such a transpose copied without swapping)."""
    return (natural is not None and v.offset == 0 and v.shape == natural
            and v.strides == (dense_strides if v.layout == "NHWC" else brick_strides)(natural, v.element_size))


def views_whole_nhwc(v: FeatureMapView, natural: tuple[int, int, int] | None) -> bool:
    """`views_whole`, in NHWC: a map whose views are all so may change its layout."""
    return v.layout == "NHWC" and views_whole(v, natural)


def brick_strides(shape: tuple[int, int, int], element_size: int) -> tuple[int, int, int]:
    """(y, x, c) strides of NHCWB16: x steps within a 16-channel brick, c from brick to brick."""
    h, w, c = shape
    return (w * round16(c) * element_size, 16 * element_size, w * 16 * element_size)


def position_reads_all(lo: LoweredOperation, v: FeatureMapView) -> bool:
    """One output position of `lo` (all its channels) reads every row and column of `v`, an
    operand of it: nothing of `v` may be overwritten before that position is computed."""
    if v.shape[:2] == (1, 1):
        return True
    if lo.kind not in ("conv", "depthwise", "pool") or v is lo.ifm2 or lo.registers.get("ifm_upscale"):
        return False
    k = lo.registers["kernel"]
    top, left, _, _ = lo.registers.get("padding", (0, 0, 0, 0))
    return k["height"] - top >= v.shape[0] and k["width"] - left >= v.shape[1]


def round16(c: int) -> int:
    return (c + 15) // 16 * 16


def kernel_record(height: int, width: int, stride: tuple[int, int] = (1, 1),
                  dilation: tuple[int, int] = (1, 1)) -> dict[str, Any]:
    """The decoder's kernel record: height/width are the dilated extents."""
    return dict(height=(height - 1) * dilation[0] + 1, width=(width - 1) * dilation[1] + 1, stride=tuple(stride),
                dilation=tuple(dilation), part_kernel_first=False)


def full_range(dtype: str) -> dict[str, int]:
    """An activation record that clamps to nothing but the type (the 16-bit registers' range for
    int32, which the NPU does not apply to 32-bit outputs)."""
    lo, hi = TYPE_RANGE.get(dtype, TYPE_RANGE["int16"])
    return dict(function=0, clip_range=0, min=lo, max=hi)


TENSOR_DIM_MAX = 65535  # a feature map's height, width or depth
WEIGHT_SUM_MAX = 127 * 65536  # per OFM channel, of |w - zero_point|; the accumulator budget
# Rows of at most 64 columns for a streamed copy: U65's 2x2 micro-blocks waste half of a one-row map.
STREAM_MAX_WIDTH = 64


def is_dense_copy(op: LoweredOperation) -> bool:
    """A 1x1 average pool between dense NHWC maps of one shape: a per-element copy (a
    requantization, a table lookup) whose elements any shape of the same size holds in the same
    order, so it may run in whichever shape streams best. Not a U85 copy that writes its OFM
    transposed or reversed (`ofm_transpose`): its order is its shape's."""
    r = op.registers
    a, b = op.ifm, op.ofm
    return (op.kind == "pool" and r.get("sub_op") == "AVERAGE" and not r.get("ifm_upscale") and op.ifm2 is None
            and "ofm_transpose" not in r
            and (r["kernel"]["height"], r["kernel"]["width"]) == (1, 1) and not any(r.get("padding", (0,) * 4))
            and (a.layout, b.layout) == ("NHWC", "NHWC") and a.shape == b.shape
            and a.strides == dense_strides(a.shape, a.element_size) and b.strides == dense_strides(b.shape, b.element_size))


def stream_widths(pixels: int) -> list[int]:
    """The row widths (widest first, at most STREAM_MAX_WIDTH) a dense copy of `pixels`
    16-channel pixels can take with rows the NPU allows."""
    return [w for w in range(min(pixels, STREAM_MAX_WIDTH), 0, -1) if pixels % w == 0 and pixels // w <= TENSOR_DIM_MAX]


def with_copy_shape(op: LoweredOperation, shape: tuple[int, int, int]) -> LoweredOperation:
    """A dense copy (is_dense_copy) over the same bytes viewed in another shape."""
    return replace(op, ifm=replace(op.ifm, shape=shape, strides=dense_strides(shape, op.ifm.element_size)),
                   ofm=replace(op.ofm, shape=shape, strides=dense_strides(shape, op.ofm.element_size)))


def channel_slice(v: FeatureMapView, natural: tuple[int, int, int] | None) -> int | None:
    """The first channel of `v` when it is a slice of the channels of a buffer of shape
    `natural` (every row and column, the buffer's own layout), else None."""
    if natural is None or v.shape[:2] != natural[:2]:
        return None
    dense = v.layout == "NHWC"
    if v.strides != (dense_strides if dense else brick_strides)(natural, v.element_size):
        return None
    # In bricks, a slice starts at a brick (16 channels).
    c0, rest = divmod(v.offset, v.element_size) if dense else (v.offset // v.strides[2] * 16, v.offset % v.strides[2])
    return c0 if not rest and c0 + v.shape[2] <= natural[2] else None


def box_origin(v: FeatureMapView, natural: tuple[int, int, int] | None
               ) -> tuple[tuple[int, int, int], tuple[int, int]] | None:
    """((row, column, channel) of its first element, (row, column) steps) of `v` when it is a
    box of a dense NHWC buffer of shape `natural` read in place, every step-th row and column
    and a run of channels (a SLICE or STRIDED_SLICE viewed by its reader), else None."""
    if natural is None or v.layout != "NHWC" or v.wrap_rows:
        return None
    dense = dense_strides(natural, v.element_size)
    if v.strides[2] != dense[2] or any(s <= 0 or s % d for s, d in zip(v.strides[:2], dense[:2])):
        return None
    step = (v.strides[0] // dense[0], v.strides[1] // dense[1])
    y, rest = divmod(v.offset, dense[0])
    x, rest = divmod(rest, dense[1])
    c, rest = divmod(rest, v.element_size)
    last = (y + (v.shape[0] - 1) * step[0], x + (v.shape[1] - 1) * step[1], c + v.shape[2] - 1)
    if rest or any(e >= d for e, d in zip(last, natural)):
        return None
    return (y, x, c), step


def follows_ofm(lo: LoweredOperation, v: FeatureMapView) -> bool:
    """Whether operand `v` is read element for element with the OFM's rows and columns: a
    copy (a 1x1 average pool, unpadded, unscaled) or an elementwise operation, `v` as tall and
    wide as the OFM (a channel pad's border, a constant the operation does not broadcast)."""
    if v.shape[:2] != lo.ofm.shape[:2]:
        return False
    if lo.kind == "elementwise":
        return True
    k = lo.registers.get("kernel", {})
    return (lo.kind == "pool" and lo.registers.get("sub_op") == "AVERAGE" and not lo.registers.get("ifm_upscale")
            and (k.get("height"), k.get("width"), tuple(k.get("stride", ()))) == (1, 1, (1, 1))
            and not any(lo.registers.get("padding", (0,) * 4)))
