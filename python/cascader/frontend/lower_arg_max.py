"""ARG_MAX over the channels (8-bit in, int32 or int64 out) as NPU operations, bit-exact.

The index of the largest channel is carried through a max: a 1x1 depthwise convolution writes
``(q - zp) * 128 + (C - 1 - i)`` as int16 (weights 128, bias the reversed channel index i), so
values order as the inputs do, and among equal inputs the lowest channel has the largest low
bits, as TFLite picks it (the first maximum). A max pool over the channels (the map viewed as
(H*W) x C x 1) keeps the largest; its 16-bit table activation turns the low 7 bits back into
``i``: every entry has base C - 1 and slope -128, so the interpolation over the low 7 bits
subtracts them. Hence at most 127 channels (Vela's constraint too). The pool is split into
row chunks the NPU's 16-bit height holds. Then the int16 indices are widened into the output:
int32, or for int64 the low words (the high words are written as zeros).

Vela 5.2 lowers ARG_MAX the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import UnsupportedError
from .lowered import LUT_SLOT_0, FeatureMapView, LoweredOperation, WeightVolume, dense_strides, full_range, kernel_record
from .operation_builder import OperationBuilder
from .operator_view import OperatorView

if TYPE_CHECKING:
    from .lower import _Lowering

MAX_CHANNELS = 127  # the index lives in 7 bits below the shifted value
HEIGHT_MAX = 65535  # rows of one NPU operation


def index_table(channels: int) -> bytes:
    """The 16-bit LUT (512 words of slope << 16 | base) mapping v to C - 1 - (v mod 128)."""
    word = ((-128 & 0xFFFF) << 16) | (channels - 1)
    return np.full(512, word, dtype="<u4").tobytes()


def lower_arg_max(lw: "_Lowering", v: OperatorView) -> None:
    ifm_t, ofm_t = v.ifm, v.ofm
    assert ifm_t is not None and ofm_t is not None
    src = lw.view(v.op.inputs[0])
    h, w, c = src.shape
    if c > MAX_CHANNELS:
        raise UnsupportedError(f"operator {v.index} (ARG_MAX): {c} channels; the NPU lowering takes at most "
                               f"{MAX_CHANNELS}")
    ops = OperationBuilder(lw, v.index, "ARG_MAX")
    name = f"{v.index}:ARG_MAX"
    shifted = ops.scratch("shifted", (h, w, c), "int16")
    volume = WeightVolume(values=np.full((c, 1, 1, 1), 128, dtype=np.int32), zero_points=np.zeros(c, dtype=np.int64),
                          bias=np.arange(c - 1, -1, -1, dtype=np.int64), scales=((1, 0),) * c, depthwise=True)
    lw.add(LoweredOperation("depthwise", "depthwise_conv2d", f"{name}(shift)", (v.index,), src, shifted,
                            weights=volume,
                            registers=dict(kernel=kernel_record(1, 1), padding=(0, 0, 0, 0),
                                           activation=full_range("int16"), rounding="TFL", global_scale=False,
                                           ofm_scale=(0, 0), acc_format=0)))
    # The maximum over the channels, in chunks of whole image rows.
    rows = h * w
    pooled = ops.scratch("index", (rows, 1, 1), "int16")
    chunk = max(HEIGHT_MAX // w, 1) * w
    table = index_table(c)
    for r0 in range(0, rows, chunk):
        n = min(chunk, rows - r0)
        ifm = FeatureMapView(shifted.buffer, (n, c, 1), "int16", 0, 1.0, dense_strides((n, c, 1), 2), r0 * c * 2)
        ofm = FeatureMapView(pooled.buffer, (n, 1, 1), "int16", 0, 1.0, dense_strides((n, 1, 1), 2), r0 * 2)
        lw.add(LoweredOperation("pool", "max_pool", f"{name}(max)", (v.index,), ifm, ofm, lut=table,
                                registers=dict(sub_op="MAX", kernel=kernel_record(1, c), padding=(0, 0, 0, 0),
                                               activation=dict(full_range("int16"), function=LUT_SLOT_0),
                                               rounding="TFL", global_scale=True, ofm_scale=(1, 0))))
    # Widened into the output: its words (int32), or the low and high words of each int64.
    out = lw.buffer(v.op.outputs[0])  # the indices' tensor: not quantized, so no view of its own
    element = 8 if ofm_t.dtype == "int64" else 4
    index = FeatureMapView(pooled.buffer, (h, w, 1), "int16", 0, 1.0, dense_strides((h, w, 1), 2))
    zero = lw.constant(np.array([0]), "int16")

    def words(offset: int) -> FeatureMapView:
        return FeatureMapView(out, (h, w, 1), "int32", 0, 1.0, (w * element, element, 4), offset)

    ops.elementwise("ADD", index, zero, words(0))
    if element == 8:
        ops.elementwise("MUL", index, zero, words(4))
