"""TRANSPOSE_CONV as one NPU convolution over a zero-inserted input, bit-exact.

TFLite's reference kernel scatters: input element (y, x) adds w[fy, fx] * (in - zp) to
output (y * s - pad + fy, x * s - pad + fx), with `pad` the SAME/VALID padding TFLite computes
for the matching forward convolution (output -> input). Gathering instead, output row oy
collects the taps with y * s = oy + pad - fy: a stride-1 convolution, with the kernel flipped
in H and W, over the input with s - 1 zeros inserted after every element, padded by
K - 1 - pad before. The NPU's transposing IFM upscale inserts exactly those zeros (real
zeros: the inserted elements equal the zero point), so one convolution does it all: bias,
per-channel rescale (TFL rounding, MultiplyByQuantizedMultiplier) and clamp as CONV_2D's.

Strides 1 and 2 only (the upscale doubles or nothing); both axes are upscaled together, so
stride 2x1 needs a single input row and a kernel of height 1 (Vela 5.2's constraints). The
padding agrees with Vela's (``calc_upscaled_padding_and_skirt``) on every shape it takes.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from .lowered import LoweredOperation, kernel_record
from .lowering_context import LoweringContext
from .operation_builder import MAX_PADDING, fused_clamp, weight_volume
from .operator_view import OperatorView


def reference_padding(out_size: int, stride: int, kernel: int, padding: str) -> int:
    """The leading pad TFLite's TRANSPOSE_CONV uses: the forward convolution's, computed from
    the output size (``ComputePaddingHeightWidth`` with the output as that convolution's input)."""
    forward = (out_size + stride - 1) // stride if padding == "SAME" else (out_size - kernel + stride) // stride
    return max((forward - 1) * stride + kernel - out_size, 0) // 2


def axis_padding(in_size: int, out_size: int, stride: int, kernel: int, padding: str) -> tuple[int, int]:
    """(before, after) of the stride-1 convolution over the upscaled input, whose last real
    element is at s * (in - 1): the extent the NPU sees is at most s * in, and no more than the
    windows reach (padding after cannot be negative)."""
    before = kernel - 1 - reference_padding(out_size, stride, kernel, padding)
    if before < 0:
        raise ValueError("the reference pads more than the kernel reaches")
    reach = out_size - 1 + kernel - before  # rows the windows cover, padding after included
    extent = min(stride * in_size, reach)
    if extent < stride * (in_size - 1) + 1:
        raise ValueError("the windows do not reach the last input element")
    return before, reach - extent


def lower_transpose_conv(lw: LoweringContext, v: OperatorView) -> None:
    w_t, ofm_t = v.weights, v.ofm
    assert w_t is not None and ofm_t is not None and w_t.data is not None
    stride = (int(v.options.get("stride_h", 1)), int(v.options.get("stride_w", 1)))
    ifm = lw.view(v.op.inputs[2])
    ofm = lw.view(v.op.outputs[0])
    (h, w, _), (oh, ow, _) = ifm.shape, ofm.shape
    kh, kw = int(w_t.shape[1]), int(w_t.shape[2])
    upscale = max(stride)
    if upscale not in (1, 2) or (stride[0] != stride[1] and (h, kh) != (1, 1)):
        raise UnsupportedError(f"operator {v.index} (TRANSPOSE_CONV): stride {stride[1]}x{stride[0]} (WxH); the NPU "
                               "upscales both axes by 2 or neither")
    padding = v.options.get("padding", "SAME")
    try:
        # With stride 2x1 the single row is upscaled too: it is then as if its stride were 2.
        top, bottom = axis_padding(h, oh, upscale, kh, padding)
        left, right = axis_padding(w, ow, upscale, kw, padding)
    except ValueError as e:
        raise UnsupportedError(f"operator {v.index} (TRANSPOSE_CONV): {h}x{w} -> {oh}x{ow} with a {kh}x{kw} kernel: "
                               f"{e}") from None
    if max(top, left, bottom, right) > MAX_PADDING:
        raise UnsupportedError(f"operator {v.index} (TRANSPOSE_CONV): padding beyond the NPU's {MAX_PADDING}")
    flipped = np.asarray(w_t.data)[:, ::-1, ::-1, :]
    volume = weight_volume(v, np.ascontiguousarray(flipped), depthwise=False,
                           float32_product=ifm.dtype == "uint8")
    registers = dict(kernel=kernel_record(kh, kw), padding=(top, left, bottom, right), activation=fused_clamp(v),
                     rounding="TFL", global_scale=False, ofm_scale=(0, 0), acc_format=1 if ifm.dtype == "int16" else 0,
                     ifm_upscale=2 if upscale == 2 else 0)
    lw.add(LoweredOperation("conv", "conv2d", f"{v.index}:TRANSPOSE_CONV", (v.index,), ifm, ofm,
                            weights=volume, registers=registers))
