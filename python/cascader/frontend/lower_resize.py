"""Resizes by exactly 2 (and identity resizes, and resizes of a 1x1 input) on the NPU, bit-exact.

- RESIZE_NEAREST_NEIGHBOR: output (y, x) reads input (y // 2, x // 2), with or without
  half-pixel centres. One 1x1 pool reading its IFM through the NPU's nearest-neighbour
  upscale.
- RESIZE_BILINEAR (int8, uint8, int16): TFLite's reference interpolates the raw values in
  1/1024 steps and rounds the 2^-20 sum half away from zero. At exactly 2x every output is
  one of four phases (row and column parity), each a fixed 2x2 blend of neighbours in
  1/16ths: (1, 3) and (3, 1) per axis with half-pixel centres, (4, 0) and (2, 2) without;
  border rows and columns repeat the edge. Without half-pixel centres that is Vela's one
  operation: the nearest upscale, then a 2x2 average padded after. With them: copy the input
  into an edge-replicated (H+2) x (W+2) scratch map, then one 2x2 depthwise convolution per
  phase writing every other row and column of the output. The weights are doubled and the
  scale is 2^-5 via (2^30, shift 35): the high multiply is then exact and the one rounding
  left is the final shift, half away from zero, as the reference (int16 through the 40-bit
  accumulator).
- With half-pixel centres the blend is also [1, 2, 1] x [1, 2, 1] / 16 over the nearest 2x
  upscale with its edge repeated, and [1, 2, 1] = [1, 1] * [1, 1]: the sum of two 2x2 sums.
  For 8-bit maps that is three operations, each writing its buffer whole so that a cascade
  stripes through them (#44): the 2x2 sums of the upscaled input, unpadded ((2H - 1) x
  (2W - 1), times 8, int16); their 2x2 average padded by one row and column all round, where
  the NPU divides each window by its valid elements: a window reaching past the edge averages
  the edge sum alone, which is the repeated edge's sum (the x 8 makes every such division
  exact); and a 1x1 rescale of that (2x the 1/16ths sum) by 2^-5, the one rounding, as the
  phases'. int16 maps would overflow the int16 sums and keep the phases.
- On the Ethos-U85, any resize (2x included, where it is a third to a quarter of the
  upscaled pool's cycles): one resize operation, where its registers give TFLite's result
  (`lower_u85_resize`); elsewhere the forms above, or the CPU.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import UnsupportedError
from .lower_movement import raw_copy
from .lowered import (FeatureMapView, LoweredOperation, WeightVolume, channel_scales, dense_strides, full_range,
                      kernel_record)
from .lower_u85_resize import lower_u85_resize
from .lowering_context import LoweringContext
from .operation_builder import OperationBuilder
from .operator_view import OperatorView
from .quantization import average_pool_scale

# Per axis and output parity: (first input row of the 2-row window in the edge-padded map,
# the two weights in quarters).
BILINEAR_PHASES = {
    True: ((0, (1, 3)), (1, (3, 1))),  # half-pixel centres
    False: ((1, (4, 0)), (1, (2, 2))),
}
BLEND_SCALE = (1 << 30, 35)  # x 2^-5: the doubled 1/16ths
BILINEAR_DTYPES = ("int8", "uint8", "int16")


def _one_pixel(lw: LoweringContext, v: OperatorView, src: FeatureMapView, dst: FeatureMapView) -> bool:
    """A 1x1 input resized to any size: every output pixel is the input pixel (both methods and
    every flag sample it alone, and TFLite's bilinear weights sum to exactly one). As Vela:
    an ADD of the input, broadcast, to zeros of the output's shape (a constant in flash)."""
    if src.shape[:2] != (1, 1) or dst.shape[:2] == (1, 1):
        return False
    if (src.scale, src.zero_point, src.dtype) != (dst.scale, dst.zero_point, dst.dtype):
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): a 1x1 input resized into another quantization")
    zeros = lw.constant(np.zeros(int(np.prod(dst.shape))), dst.dtype)
    zeros = replace(zeros, shape=dst.shape, strides=dense_strides(dst.shape, zeros.element_size), scale=src.scale)
    OperationBuilder(lw, v.index, v.opcode).elementwise("ADD", zeros, src, dst)
    return True


def _two_x(v: OperatorView, src: FeatureMapView, dst: FeatureMapView) -> bool:
    (h, w, _), (oh, ow, _) = src.shape, dst.shape
    if (oh, ow) == (h, w):
        return False
    if v.options.get("align_corners", False) or (oh, ow) != (2 * h, 2 * w):
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): {h}x{w} -> {oh}x{ow}"
                               f"{' with align_corners' if v.options.get('align_corners') else ''}; the NPU "
                               "lowering resizes by exactly 2 without align_corners")
    return True


def _other_scale(lw: LoweringContext, v: OperatorView, src: FeatureMapView, dst: FeatureMapView,
                 bilinear: bool) -> bool:
    """A resize the U85's resize operation runs exactly (`lower_u85_resize`; at 2x too, as
    Vela's: one pass over the OFM, no upscaled kernel), else one by other than 2 (or with
    align_corners), which the U55/U65 lowering refuses; True if it lowered it."""
    if src.shape[:2] != dst.shape[:2] and lower_u85_resize(lw, v, src, dst, bilinear):
        return True
    _two_x(v, src, dst)  # raises for a scale the forms below do not take
    return False


def lower_resize_nearest(lw: LoweringContext, v: OperatorView) -> None:
    src, dst = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    if _one_pixel(lw, v, src, dst) or _other_scale(lw, v, src, dst, bilinear=False):
        return
    if not _two_x(v, src, dst):
        raw_copy(lw, v.index, f"{v.index}:{v.opcode}", src, dst)
        return
    registers = dict(sub_op="AVERAGE", kernel=kernel_record(1, 1), padding=(0, 0, 0, 0),
                     activation=full_range(dst.dtype), rounding="NATURAL", global_scale=True, ofm_scale=(1, 0),
                     ifm_upscale=1)
    lw.add(LoweredOperation("pool", "avg_pool", f"{v.index}:{v.opcode}", (v.index,),
                            replace(src, zero_point=0), replace(dst, zero_point=0), registers=registers))


def _upscaled_average(lw: LoweringContext, v: OperatorView, src: FeatureMapView, dst: FeatureMapView) -> None:
    """Bilinear 2x without half-pixel centres, Vela's way: the IFM read through the nearest
    upscale, then a 2x2 average padded after (bottom, right). An output at (2i + a, 2j + b)
    averages the input pixels (i, j) to (i + a, j + b): the (4, 0) and (2, 2) phases, the sum
    divided once and rounded half away from zero as the reference's 1/1024 weights are; at the
    last row and column the NPU divides by the valid count, the edge repeated."""
    registers = dict(sub_op="AVERAGE", kernel=kernel_record(2, 2), padding=(0, 0, 1, 1),
                     activation=full_range(dst.dtype), rounding="NATURAL", global_scale=True,
                     ofm_scale=average_pool_scale(4, (0, 0, 1, 1)), ifm_upscale=1)
    lw.add(LoweredOperation("pool", "avg_pool", f"{v.index}:{v.opcode}", (v.index,), src, dst, registers=registers))


BLENDED_SUM_DTYPES = ("int8", "uint8")


def cascades_in_least_scratch(graph, op) -> bool:
    """Whether the least-scratch lowering (`LoweringContext.least_scratch`) lowers `op` otherwise:
    a 2x RESIZE_BILINEAR with half-pixel centres of an 8-bit map larger than one pixel, there in
    three operations a cascade stripes through, else in the faster copies and phases (the
    int16 sums of the full-size map cost more cycles than the phases: U-Net-128's 1.86 M -> 2.96 M
    on the U55-128 with unlimited SRAM)."""
    if op.opcode != "RESIZE_BILINEAR" or not op.options.get("half_pixel_centers", False):
        return False
    src, dst = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    (h, w), (oh, ow) = tuple(src.shape[1:3]), tuple(dst.shape[1:3])
    return (src.dtype in BLENDED_SUM_DTYPES and dst.dtype == src.dtype and (h, w) != (1, 1)
            and (oh, ow) == (2 * h, 2 * w) and not op.options.get("align_corners", False))


# The 2x2 sums of the upscaled input times 8: every edge window's division by its valid
# elements (1 or 2; 4 inside) is then exact and its average twice the 1/16ths sum.
SUM_SCALE = (8, 0)


def _blended_sums(lw: LoweringContext, v: OperatorView, src: FeatureMapView, dst: FeatureMapView) -> None:
    """Bilinear 2x with half-pixel centres of an 8-bit map in three whole-buffer operations
    (see the module docstring): output row 2i is (in[i - 1] + 3 in[i]) / 4 and 2i + 1 is
    (3 in[i] + in[i + 1]) / 4, edges repeated: the upscaled rows' pair sums before and after it.
    The pair sums are unpadded (the NPU only sums and SUM_SCALE multiplies); the edge averages'
    stripes that pad nothing divide through their scale (`average_pool_scale`), exactly."""
    (h, w, c), (oh, ow, _) = src.shape, dst.shape
    ops = OperationBuilder(lw, v.index, v.opcode)
    name = f"{v.index}:{v.opcode}"
    pairs = ops.scratch("pair_sums", (oh - 1, ow - 1, c), "int16")
    lw.add(LoweredOperation("pool", "avg_pool", f"{name}(pair sums)", (v.index,), src, pairs,
                            registers=dict(sub_op="AVERAGE", kernel=kernel_record(2, 2), padding=(0, 0, 0, 0),
                                           activation=full_range("int16"), rounding="NATURAL", global_scale=True,
                                           ofm_scale=SUM_SCALE, ifm_upscale=1)))
    blended = ops.scratch("blended", (oh, ow, c), "int16")
    padding = (1, 1, 1, 1)
    lw.add(LoweredOperation("pool", "avg_pool", f"{name}(edge averages)", (v.index,), pairs, blended,
                            registers=dict(sub_op="AVERAGE", kernel=kernel_record(2, 2), padding=padding,
                                           activation=full_range("int16"), rounding="NATURAL", global_scale=True,
                                           ofm_scale=average_pool_scale(4, padding))))
    ops.pool("AVERAGE", blended, dst, ofm_scale=BLEND_SCALE, activation=full_range(dst.dtype))


def lower_resize_bilinear(lw: LoweringContext, v: OperatorView) -> None:
    src, dst = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    if src.dtype not in BILINEAR_DTYPES or dst.dtype != src.dtype:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): {src.dtype} -> {dst.dtype}; the NPU lowering takes "
                               f"{', '.join(BILINEAR_DTYPES)} in and out")
    if _one_pixel(lw, v, src, dst) or _other_scale(lw, v, src, dst, bilinear=True):
        return
    if not _two_x(v, src, dst):
        raw_copy(lw, v.index, f"{v.index}:{v.opcode}", src, dst)
        return
    src, dst = replace(src, zero_point=0), replace(dst, zero_point=0)
    if not v.options.get("half_pixel_centers", False):
        _upscaled_average(lw, v, src, dst)
        return
    if lw.least_scratch and src.dtype in BLENDED_SUM_DTYPES:
        _blended_sums(lw, v, src, dst)
        return
    h, w, c = src.shape
    ops = OperationBuilder(lw, v.index, v.opcode)
    padded = ops.scratch("edge_padded", (h + 2, w + 2, c), src.dtype)
    sy, sx, _ = padded.strides

    def box(y: int, x: int, rows: int, cols: int) -> FeatureMapView:
        return replace(padded, shape=(rows, cols, c), offset=y * sy + x * sx)

    def row(view: FeatureMapView, y: int) -> FeatureMapView:
        return replace(view, shape=(1, view.shape[1], c), offset=view.offset + y * view.strides[0])

    name = f"{v.index}:{v.opcode}"
    raw_copy(lw, v.index, f"{name}(interior)", src, box(1, 1, h, w))
    raw_copy(lw, v.index, f"{name}(top)", row(src, 0), box(0, 1, 1, w))
    raw_copy(lw, v.index, f"{name}(bottom)", row(src, h - 1), box(h + 1, 1, 1, w))
    raw_copy(lw, v.index, f"{name}(left)", box(0, 1, h + 2, 1), box(0, 0, h + 2, 1))
    raw_copy(lw, v.index, f"{name}(right)", box(0, w, h + 2, 1), box(0, w + 1, h + 2, 1))
    phases = BILINEAR_PHASES[bool(v.options.get("half_pixel_centers", False))]
    dy, dx, dc = dst.strides
    for py, (oy, wy) in enumerate(phases):
        for px, (ox, wx) in enumerate(phases):
            weights = 2 * np.outer(wy, wx).astype(np.int64)  # doubled: see the module docstring
            volume = WeightVolume(np.broadcast_to(weights[None, :, :, None], (c, 2, 2, 1)).copy(),
                                  np.zeros(c, np.int64), np.zeros(c, np.int64), channel_scales(*BLEND_SCALE, c), True)
            phase = replace(dst, shape=(h, w, c), offset=dst.offset + py * dy + px * dx, strides=(2 * dy, 2 * dx, dc))
            registers = dict(kernel=kernel_record(2, 2), padding=(0, 0, 0, 0), activation=full_range(dst.dtype),
                             rounding="TFL", global_scale=False, ofm_scale=(0, 0),
                             acc_format=1 if src.dtype == "int16" else 0)  # int16 IFMs: the 40-bit accumulator
            lw.add(LoweredOperation("depthwise", "depthwise_conv2d", f"{name}(phase {py}{px})", (v.index,),
                                    box(oy, ox, h + 1, w + 1), phase, weights=volume, registers=registers))
