"""CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED as one NPU convolution each.

- CONV_2D, DEPTHWISE_CONV_2D: one convolution; the per-channel rescale goes to the scale stream.
  A depth multiplier above 1 becomes an ordinary convolution whose weights are zero outside
  each output channel's own input channel (exact, and the zeros cost little once compressed).
  A PAD the core folded into the convolution (`LoweringContext.folded_pad`) is its padding.
- FULLY_CONNECTED: a 1x1 convolution over a 1 x N x K view of the input. Its rescale rounds
  once (NATURAL): TFLite's reference FULLY_CONNECTED rounds once, its convolutions twice (TFL).
  A 16x8 one follows TFLM, its judge (`reference.MICRO_OPERATORS`): the reduced 16-bit
  multiplier of the double-precision scale product, as TFLM's int64 rescale forms it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import UnsupportedError
from .lowered import LoweredOperation, dense_strides, kernel_record
from .lowering_context import LoweringContext
from .operation_builder import fused_clamp, kernel_padding, weight_volume
from .operator_view import OperatorView


def lower_convolution(lw: LoweringContext, v: OperatorView) -> None:
    ifm_t, w_t, ofm_t = v.ifm, v.weights, v.ofm
    assert ifm_t is not None and w_t is not None and ofm_t is not None
    wq = w_t.quantization
    if wq is None:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): weights are not quantized")
    w = np.asarray(w_t.data)  # as stored (int8/uint8): the encoder widens them, one operation at a time
    fc = v.opcode == "FULLY_CONNECTED"
    # A folded PAD: the operation reads the PAD's input and pads it itself.
    ifm_view = lw.view(lw.folded_input.get(v.index, v.op.inputs[0]))
    ofm_view = lw.view(v.op.outputs[0])
    kind, cost_kind = "conv", "conv2d"
    if fc:
        k_in = w.shape[-1]
        n = ifm_t.size // k_in
        ifm_view = replace(ifm_view, shape=(1, n, k_in), strides=dense_strides((1, n, k_in), ifm_view.element_size))
        ofm_view = replace(ofm_view, shape=(1, n, w.shape[0]),
                           strides=dense_strides((1, n, w.shape[0]), ofm_view.element_size))
        ohwi = w.reshape(w.shape[0], 1, 1, k_in)
        kernel = kernel_record(1, 1, (1, 1), (1, 1))
        padding = (0, 0, 0, 0)
        cost_kind = "fully_connected"
    else:
        k = v.kernel
        assert k is not None
        if v.opcode == "DEPTHWISE_CONV_2D":
            channels = ifm_view.shape[2]
            out_channels = w.shape[3]
            multiplier = out_channels // max(channels, 1)
            dw = w.reshape(w.shape[1], w.shape[2], out_channels)
            if multiplier == 1:
                ohwi = dw.transpose(2, 0, 1)[..., None]
                kind, cost_kind = "depthwise", "depthwise_conv2d"
            else:
                # Outside each output channel's own input channel the weight is zero in
                # real terms: that channel's zero point.
                zp = np.broadcast_to(np.asarray(wq.zero_point, dtype=np.int64).reshape(-1), (out_channels,))
                ohwi = np.repeat(zp[:, None, None, None], channels, axis=3)
                ohwi = np.repeat(np.repeat(ohwi, w.shape[1], axis=1), w.shape[2], axis=2).copy()
                for o in range(out_channels):
                    ohwi[o, :, :, o // multiplier] = dw[:, :, o]
        else:
            ohwi = w
        kernel = kernel_record(k.height, k.width, (k.stride_h, k.stride_w), (k.dilation_h, k.dilation_w))
        padding = kernel_padding(v, ifm_view, ofm_view)
        if v.index in lw.folded_pad:
            top, left, _, _ = lw.folded_pad[v.index]
            # The NPU takes the IFM to end where the last window does, (OH-1)*stride +
            # kernel - top - bottom rows: bottom/right padding is only what the windows reach.
            bottom = (ofm_view.shape[0] - 1) * k.stride_h + k.dilated_height - top - ifm_view.shape[0]
            right = (ofm_view.shape[1] - 1) * k.stride_w + k.dilated_width - left - ifm_view.shape[1]
            padding = (top, left, max(bottom, 0), max(right, 0))
    # uint8 layers take the scale product in float32. An int8 FULLY_CONNECTED's is double, per
    # tensor too (LiteRT's, its judge): operator zoo int8 FC seeds 0-39 are exact on 4 seeds
    # each with the double product, and 3 of them one off on a rounding tie with the float32
    # one (seed 2: accumulator 3,900 at 0.05 x 0.02 / 0.2 is 19.4999996, not 19.5000006).
    volume = weight_volume(v, ohwi, depthwise=kind == "depthwise", float32_product=ifm_t.dtype == "uint8")
    registers = dict(kernel=kernel, padding=padding, activation=fused_clamp(v),
                     rounding="NATURAL" if fc else "TFL", global_scale=False, ofm_scale=(0, 0),
                     acc_format=1 if ifm_t.dtype == "int16" else 0)
    lw.add(LoweredOperation(kind, cost_kind, f"{v.index}:{v.opcode}", (v.index,), ifm_view, ofm_view,
                            weights=volume, registers=registers))
