"""Copies as 1x1 depthwise convolutions: a per-element copy (a requantization, a RELU's clamp, a
concatenation's or slice's copy, a 2x nearest-neighbour upscale) that the lowering writes as a
1x1 average pool, run as a depthwise convolution by a weight of 1 where that is faster.

Both compute out = clamp(rescale(in - ifm zero point) + ofm zero point) per element. The pool
rescales by its OFM scale register, the convolution by each channel's scale from its weight
stream: the same (multiplier, shift) and rounding give the same codes, since a weight of 1 and
no bias leave the accumulator at in - zero point (an unscaled copy keeps (1, 0), a shift by
nothing). Vela lowers these copies as pools too; on the U55 and U65 the cycle model runs a
pool at one output element per cycle and a 1x1 depthwise at up to twice that (zoo unet_128's
requantizing copies and 2x upscale on U55-128 were 655,800 of its 1,908,288 cycles as pools;
the network takes 1,585,416 with them as convolutions), for a weight stream of one byte and
the scales, ten bytes, per channel.

Taken where the cycle model says the convolution is faster with its input where the schedule
may read it (in the arena, and staged in the fast memory), as `column_fold` decides. Not on
the Ethos-U85, whose own lowering chains elementwise copies; not for int16 maps (a 16-bit
depthwise rescales with the reduced multiplier, not the pool's); not for a copy the lowering
streams in another shape (`_flatten_copies`: the schedule may reshape it again, and the
planner stripes it in its tensors' shapes), nor one with a table or registers beside the
copy's own (a transpose's axes, an OFM written transposed or reversed), nor one reading a view
whose axes are permuted, nor a constant's copy (a channel pad's border).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..arch import Accelerator
from .lowered import FeatureMapView, LoweredOperation, WeightVolume, channel_scales, dense_strides, kernel_record
from .lowering_context import LoweringContext, placement_cycles

# The registers of a plain copy (`operation_builder.pool_copy`, `lower_resize_nearest`).
_COPY_REGISTERS = {"sub_op", "kernel", "padding", "activation", "rounding", "global_scale", "ofm_scale", "ifm_upscale"}


def convert_copies(lw: LoweringContext) -> None:
    """Run every plain copy of `lw.ops` as a 1x1 depthwise convolution where that is faster
    (see the module docstring)."""
    if lw.accelerator is None or Accelerator.is_u85(lw.accelerator):
        return
    for k, op in enumerate(lw.ops):
        if not _plain_copy(lw, op):
            continue
        pool = placement_cycles(lw, op)
        if pool is None:
            return
        depthwise = depthwise_copy(op)
        convolution = placement_cycles(lw, depthwise)
        if convolution is not None and convolution[0] < pool[0] and convolution[1] <= pool[1]:
            lw.ops[k] = depthwise


def _plain_copy(lw: LoweringContext, op: LoweredOperation) -> bool:
    """A 1x1 unpadded average pool of one int8 or uint8 map to another of its type and shape,
    with no table and no register beside a copy's, seen in its buffers' own shapes."""
    r = op.registers
    if (op.kind != "pool" or r.get("sub_op") != "AVERAGE" or op.ifm2 is not None or op.lut is not None
            or not set(r) <= _COPY_REGISTERS or r.get("ifm_upscale", 0) not in (0, 1)):
        return False
    # A constant copied (a channel pad's border) stripes only as an operand read element for
    # element with the OFM, which the planner knows of pools and elementwise operations.
    if op.ifm.buffer in lw.constants or op.ifm.buffer < 0:
        return False
    kernel = r["kernel"]
    if ((kernel["height"], kernel["width"], tuple(kernel["stride"])) != (1, 1, (1, 1))
            or any(r.get("padding", (0,) * 4)) or op.ifm.dtype not in ("int8", "uint8") or op.ofm.dtype != op.ifm.dtype
            or op.ifm.shape[2] != op.ofm.shape[2]):
        return False
    # The pool's scale as a convolution's: TFL rounding, or an unscaled copy (any rounding).
    if r["rounding"] != "TFL" and tuple(r["ofm_scale"]) != (1, 0):
        return False
    # A copy streamed in another shape than its buffers' (`_flatten_copies`), or reading or
    # writing axes permuted (a transpose's pieces: the schedule streams those as pools).
    return all(_in_order(v) and (v.offset or v.shape == lw.natural(v.buffer)[0]
                                 or v.strides != dense_strides(v.shape, v.element_size)) for v in (op.ifm, op.ofm))


def _in_order(v: FeatureMapView) -> bool:
    """The view steps through its buffer in its layout's own order: channels innermost (within
    a brick for NHCWB16), then columns, then rows, whatever the gaps between them (a slice)."""
    h, w, c = v.shape
    sy, sx, sc = v.strides
    if v.layout == "NHWC":
        return sc == v.element_size and sx >= c * sc and sy >= w * sx
    return sx == 16 * v.element_size and sc >= w * sx and sy >= (c + 15) // 16 * sc


def depthwise_copy(op: LoweredOperation) -> LoweredOperation:
    """The plain copy `op` (`_plain_copy`) as a 1x1 depthwise convolution by weights of 1."""
    r = op.registers
    channels = op.ofm.shape[2]
    zeros = np.zeros(channels, np.int64)
    weights = WeightVolume(np.ones((channels, 1, 1, 1), np.int8), zeros, zeros,
                           channel_scales(*r["ofm_scale"], channels), depthwise=True)
    registers = dict(kernel=kernel_record(1, 1), padding=(0, 0, 0, 0), activation=r["activation"], rounding="TFL",
                     global_scale=False, ofm_scale=(0, 0), acc_format=0)
    if r.get("ifm_upscale"):
        registers["ifm_upscale"] = r["ifm_upscale"]
    return replace(op, kind="depthwise", cost_kind="depthwise_conv2d", weights=weights, registers=registers)
