"""ARG_MAX over the channels (8-bit in, int32 or int64 out) as NPU operations, bit-exact, on
the U55/U65 (the U85 has a pooling for it: `lower_u85_arg_max`).

The index of the largest channel is carried through a max: a 1x1 depthwise convolution writes
``(q - zp) * 128 + (C - 1 - i)`` as int16 (weights 128, bias the reversed channel index i), so
values order as the inputs do, and among equal inputs the lowest channel has the largest low
bits, as TFLite picks it (the first maximum). A max pool over the channels (the rows viewed as
(rows*W) x C x 1) keeps the largest; its 16-bit table activation turns the low 7 bits back into
``i``: every entry has base C - 1 and slope -128, so the interpolation over the low 7 bits
subtracts them. Hence at most 127 channels (Vela's constraint too). Then the int16 indices are
widened into the output: int32, or for int64 the low words (the high words are written as zeros).

Vela 5.2 lowers ARG_MAX with the same operations over the whole map; here they run band by band
of image rows through scratch maps of one band (at most 256 KiB of int16 intermediate; 64 KiB in
the least-scratch lowering, which trades a few cycles of more, smaller operations for SRAM).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..arch import Accelerator
from ..errors import UnsupportedError
from .lowered import (LUT_SLOT_0, FeatureMapView, LoweredOperation, WeightVolume, channel_scales, dense_strides,
                      full_range, kernel_record)
from .lower_u85_arg_max import lower_u85_arg_max
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder
from .operator_view import OperatorView

MAX_CHANNELS = 127  # the index lives in 7 bits below the shifted value
HEIGHT_MAX = 65535  # rows of one NPU operation
BAND_BYTES = 256 * 1024  # the int16 intermediate of one band of rows
# The least-scratch lowering's band (`LoweringContext.least_scratch`, for the least-SRAM points):
# DeepLabV3's 513 x 513 x 21 in bands of 3 rows (67 KB of scratch) instead of 12 (271 KB, its
# least SRAM on U65-256 then), for 0.2% more cycles of ARG_MAX (684 operations instead of 172).
LEAST_SCRATCH_BAND_BYTES = 64 * 1024


def band_rows(shape: tuple[int, int, int], least_scratch: bool) -> int:
    """The image rows of one band of an (H, W, C) input."""
    h, w, c = shape
    budget = LEAST_SCRATCH_BAND_BYTES if least_scratch else BAND_BYTES
    return max(1, min(h, budget // (w * c * 2), HEIGHT_MAX // w))


def bands_in_least_scratch(graph, op) -> bool:
    """Whether the least-scratch lowering (`LoweringContext.least_scratch`) lowers `op` otherwise:
    an ARG_MAX over the channels whose input takes more rows per band in the default one."""
    if op.opcode != "ARG_MAX":
        return False
    shape = list(graph.tensors[op.inputs[0]].shape)
    if not 1 <= len(shape) <= 4 or 0 in shape:
        return False
    hwc = tuple(shape[1:] if len(shape) == 4 else [1] * (3 - len(shape)) + shape)  # as the lowering views it
    return band_rows(hwc, True) != band_rows(hwc, False)


def index_table(channels: int) -> bytes:
    """The 16-bit LUT (512 words of slope << 16 | base) mapping v to C - 1 - (v mod 128)."""
    word = ((-128 & 0xFFFF) << 16) | (channels - 1)
    return np.full(512, word, dtype="<u4").tobytes()


def lower_arg_max(lw: LoweringContext, v: OperatorView) -> None:
    if Accelerator.is_u85(lw.accelerator):  # its own ARGMAX pooling, over any axis
        lower_u85_arg_max(lw, v)
        return
    ifm_t, ofm_t = v.ifm, v.ofm
    assert ifm_t is not None and ofm_t is not None
    src = lw.view(v.op.inputs[0])
    h, w, c = src.shape
    if c > MAX_CHANNELS:
        raise UnsupportedError(f"operator {v.index} (ARG_MAX): {c} channels; the NPU lowering takes at most "
                               f"{MAX_CHANNELS}")
    ops = OperationBuilder(lw, v.index, "ARG_MAX")
    name = f"{v.index}:ARG_MAX"
    # Band by band of image rows, through scratch maps of one band: the int16 intermediate of a
    # whole map is twice the input (11 MB for DeepLabV3's 513 x 513 x 21), and every step is
    # per pixel, so a band needs nothing of the others.
    band = band_rows((h, w, c), lw.least_scratch)
    shifted = ops.scratch("shifted", (band, w, c), "int16")
    pooled = ops.scratch("index", (band * w, 1, 1), "int16")
    volume = WeightVolume(values=np.full((c, 1, 1, 1), 128, dtype=np.int32), zero_points=np.zeros(c, dtype=np.int64),
                          bias=np.arange(c - 1, -1, -1, dtype=np.int64), scales=channel_scales(1, 0, c), depthwise=True)
    table = index_table(c)
    out = lw.buffer(v.op.outputs[0])  # the indices' tensor: not quantized, so no view of its own
    element = 8 if ofm_t.dtype == "int64" else 4
    zero = lw.constant(np.array([0]), "int16")
    for y0 in range(0, h, band):
        n = min(band, h - y0)
        rows = replace(src, shape=(n, w, c), offset=src.offset + y0 * src.strides[0])
        wide = replace(shifted, shape=(n, w, c))
        lw.add(LoweredOperation("depthwise", "depthwise_conv2d", f"{name}(shift)", (v.index,), rows, wide,
                                weights=volume,
                                registers=dict(kernel=kernel_record(1, 1), padding=(0, 0, 0, 0),
                                               activation=full_range("int16"), rounding="TFL", global_scale=False,
                                               ofm_scale=(0, 0), acc_format=0)))
        # The maximum over the channels: the band viewed as (n * w) x C x 1.
        columns = FeatureMapView(shifted.buffer, (n * w, c, 1), "int16", 0, 1.0, dense_strides((n * w, c, 1), 2))
        index = FeatureMapView(pooled.buffer, (n * w, 1, 1), "int16", 0, 1.0, dense_strides((n * w, 1, 1), 2))
        lw.add(LoweredOperation("pool", "max_pool", f"{name}(max)", (v.index,), columns, index, lut=table,
                                registers=dict(sub_op="MAX", kernel=kernel_record(1, c), padding=(0, 0, 0, 0),
                                               activation=dict(full_range("int16"), function=LUT_SLOT_0),
                                               rounding="TFL", global_scale=True, ofm_scale=(1, 0))))
        # Widened into the output: its words (int32), or the low and high words of each int64.
        indices = FeatureMapView(pooled.buffer, (n, w, 1), "int16", 0, 1.0, dense_strides((n, w, 1), 2))

        def words(offset: int) -> FeatureMapView:
            return FeatureMapView(out, (n, w, 1), "int32", 0, 1.0, (w * element, element, 4),
                                  y0 * w * element + offset)

        ops.elementwise("ADD", indices, zero, words(0))
        if element == 8:
            ops.elementwise("MUL", indices, zero, words(4))
