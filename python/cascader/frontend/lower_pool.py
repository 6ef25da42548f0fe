"""AVERAGE_POOL_2D and MAX_POOL_2D as one NPU pooling operation each.

The average divides by the window size through OFM_SCALE (padded windows: the NPU divides by
the valid count itself).
"""

from __future__ import annotations

from dataclasses import replace

from .lowered import LoweredOperation, kernel_record
from .lowering_context import LoweringContext
from .operation_builder import fused_clamp, kernel_padding
from .operator_view import OperatorView
from .quantization import average_pool_scale


def lower_pool(lw: LoweringContext, v: OperatorView) -> None:
    mode = "MAX" if v.opcode == "MAX_POOL_2D" else "AVERAGE"
    ifm, ofm = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    k = v.kernel
    assert k is not None
    padding = kernel_padding(v, ifm, ofm)
    # TFLite pools the raw codes and rounds an average half away from zero; it reads the output
    # quantization only for the fused activation's bounds, so an input and output quantized
    # differently are not rescaled (Vela rescales, and is off by up to 25 on int8). With zero
    # points 0 the NPU does the same; with the real ones it would round ties of (x - zp)
    # instead, one off wherever the sign differs.
    ifm, ofm = replace(ifm, zero_point=0), replace(ofm, zero_point=0)
    ofm_scale = (1, 0) if mode == "MAX" else average_pool_scale(k.height * k.width, padding)
    # A single output row (column) is one window, whose stride is irrelevant: TFLite models
    # often give a global pool its kernel size, past the NPU's limit. It runs with stride
    # 1 over the rows (columns) that window reads, so that the OFM follows from the IFM (a
    # 3-row window at stride 2 over 4 rows fits once, at stride 1 it would fit twice).
    top, left, bottom, right = padding
    window = (k.height - top - bottom if ofm.shape[0] == 1 else ifm.shape[0],
              k.width - left - right if ofm.shape[1] == 1 else ifm.shape[1])
    if window != ifm.shape[:2]:
        ifm = replace(ifm, shape=(*window, ifm.shape[2]))
    stride = (1 if ofm.shape[0] == 1 else k.stride_h, 1 if ofm.shape[1] == 1 else k.stride_w)
    registers = dict(sub_op=mode, kernel=kernel_record(k.height, k.width, stride, (1, 1)),
                     padding=padding, activation=fused_clamp(v), rounding="NATURAL", global_scale=True,
                     ofm_scale=ofm_scale)
    cost = "max_pool" if mode == "MAX" else "avg_pool"
    lw.add(LoweredOperation("pool", cost, f"{v.index}:{v.opcode}", (v.index,), ifm, ofm, registers=registers))
