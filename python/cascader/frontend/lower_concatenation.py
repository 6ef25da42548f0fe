"""CONCATENATION as one copy per input into its slice of the output: a 1x1 average pool that
rescales when the input's quantization differs from the output's. TFLite's kernel rescales
only uint8 inputs (int8 ones must share the output's quantization); int16 codes are copied as
they are, whatever their quantization, and so are ours.

An input the core let its producer write straight into its slice (`LoweringContext.slices`)
needs no copy.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import UnsupportedError
from .lowering_context import LoweringContext
from .lower_movement import raw_copy
from .operation_builder import fused_clamp, pool_copy
from .operator_view import OperatorView


def lower_concatenation(lw: LoweringContext, v: OperatorView) -> None:
    ofm = lw.view(v.op.outputs[0])
    rank = len(v.ofm.shape)
    axis = v.options.get("axis", -1) % rank
    # The axis in the NPU's H, W, C view of the output.
    hwc_axis = axis + (3 - rank) if rank <= 3 else axis - 1
    if rank == 4 and axis == 0:
        raise UnsupportedError(f"operator {v.index}: concatenation along the batch")
    int32 = v.ofm.dtype == "int32"  # indices (the U85's): copied as they are, no clamp
    clamp = None if int32 else fused_clamp(v)
    start = 0
    for t in v.op.inputs:
        src = lw.view(t)
        if t in lw.slices:  # its producer already wrote it there
            start += src.shape[hwc_axis]
            continue
        shape = list(ofm.shape)
        shape[hwc_axis] = src.shape[hwc_axis]
        if tuple(shape) != src.shape:
            raise UnsupportedError(f"operator {v.index}: input {lw.graph.tensors[t].name!r} does not fit its slice")
        offset = start * ofm.strides[hwc_axis]
        dst = replace(ofm, shape=tuple(shape), offset=ofm.offset + offset)
        if src.dtype == "int16":
            dst = replace(dst, scale=src.scale, zero_point=src.zero_point)
        if int32:
            raw_copy(lw, v.index, f"{v.index}:CONCATENATION[{t}]", src, dst)
        else:
            pool_copy(lw, v.index, f"{v.index}:CONCATENATION[{t}]", src, dst, clamp)
        start += src.shape[hwc_axis]
