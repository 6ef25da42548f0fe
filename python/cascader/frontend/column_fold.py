"""Column folding: a convolution with a horizontal stride reads its input's columns in groups
as channels.

A CONV_2D over a shallow map (a 1-channel spectrogram, a 3-channel image) leaves most of the
MAC array idle: the DPU takes up to 8 input channels per kernel element in one step, and one or
three of them fill little of it. When the stride along W is a multiple f of a column step, the
same bytes read as a map f times narrower and f times deeper (column pairs for f = 2: an NHWC
row of W x C elements is a row of W/f x fC) hold every window the convolution reads. Over that
map the convolution has stride s/f along W and a kernel ceil((o + kw) / f) groups wide, where o
is where the first window starts within its group; a kernel element that falls on a column the
original window does not read gets the weight's zero point, a real zero. Every product the
original sums is summed, with the same weight and the same input code, and nothing else is: the
result is bit-exact (integer accumulation). Padding columns stay padding: a group outside the
map holds only columns outside it.

DS-CNN's 10x4 stride-2 convolution over its 49 x 10 x 1 MFCCs becomes a 10x3 one over 49 x 5 x 2
(U55-128: 25,111 -> 20,463 cycles on the cycle model).

The fold is applied only where the cycle model says the folded convolution is faster with its
input where the schedule may read it (in the arena, or staged in the fast memory: never slower
in either, faster in one), with the raw weight sizes (the folded kernel is larger, with zeros).
It applies to a map the CPU hands in (nothing in the segment writes it, so no cascade produces
it in rows of the other shape) that this convolution alone reads, all of it, dense NHWC: the
segment then records the folded shape as the buffer's own (`LoweringContext.reshaped`), so the
planner stripes it like any whole map.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from .lowered import LoweredOperation, WeightVolume, dense_strides, kernel_record
from .lowering_context import LoweringContext, placement_cycles


def fold_columns(lw: LoweringContext) -> None:
    """Fold every convolution's input where that is faster (see the module docstring); the
    folded buffers' shapes go to `lw.reshaped`."""
    if lw.accelerator is None:
        return
    visible = lw.cpu_visible()
    for k, op in enumerate(lw.ops):
        b = op.ifm.buffer
        if b not in visible or not _foldable(lw, op):
            continue
        readers = [o for o in lw.ops for v in (o.ifm, o.ifm2) if v is not None and v.buffer == b]
        if len(readers) != 1 or readers[0] is not op or any(o.ofm.buffer == b for o in lw.ops):
            continue
        best, best_cycles = op, placement_cycles(lw, op)
        if best_cycles is None:
            return
        stride = op.registers["kernel"]["stride"][1]
        for f in range(2, stride + 1):
            if stride % f or op.ifm.shape[1] % f:
                continue
            folded = folded_convolution(op, f)
            cycles = placement_cycles(lw, folded)
            if all(new <= old for new, old in zip(cycles, best_cycles)) and cycles != best_cycles:
                best, best_cycles = folded, cycles
        if best is not op:
            lw.ops[k] = best
            lw.reshaped[b] = best.ifm.shape


def _foldable(lw: LoweringContext, op: LoweredOperation) -> bool:
    """A convolution reading all of a dense NHWC buffer, stepping over columns, undilated along W."""
    if op.kind != "conv" or op.weights is None or op.weights.depthwise or op.ifm2 is not None:
        return False
    kernel, v = op.registers["kernel"], op.ifm
    # All of the buffer, in any shape (a RESHAPE's output reads its input's bytes).
    shape, _ = lw.natural(v.buffer)
    return (kernel["stride"][1] > 1 and kernel["dilation"][1] == 1 and not op.registers.get("ifm_upscale")
            and v.layout == "NHWC" and v.offset == 0 and not v.wrap_rows and math.prod(v.shape) == math.prod(shape)
            and v.strides == dense_strides(v.shape, v.element_size))


def folded_convolution(op: LoweredOperation, f: int) -> LoweredOperation:
    """`op` over its input read as groups of `f` columns (f divides the stride along W and the
    input's width): the same sums, see the module docstring."""
    h, w, c = op.ifm.shape
    kernel = op.registers["kernel"]
    (sy, sx), dy = kernel["stride"], kernel["dilation"][0]
    top, left, bottom, _ = op.registers["padding"]
    values = op.weights.values
    out_channels, kh, kw, _ = values.shape
    group_left = -(-left // f)  # whole groups of padding before the first window's group
    start = group_left * f - left  # where the first window starts within its group
    kw_groups = -(-(start + kw) // f)
    width = w // f
    right = max((op.ofm.shape[1] - 1) * (sx // f) + kw_groups - group_left - width, 0)
    zero_points = np.asarray(op.weights.zero_points).reshape(-1, 1, 1, 1)
    grouped = np.broadcast_to(zero_points, (out_channels, kh, kw_groups * f, c)).astype(values.dtype)
    grouped[:, :, start:start + kw] = values
    weights = WeightVolume(grouped.reshape(out_channels, kh, kw_groups, f * c), op.weights.zero_points,
                           op.weights.bias, op.weights.scales, False)
    shape = (h, width, f * c)
    ifm = replace(op.ifm, shape=shape, strides=dense_strides(shape, op.ifm.element_size))
    registers = dict(op.registers, kernel=kernel_record(kh, kw_groups, (sy, sx // f), (dy, 1)),
                     padding=(top, group_left, bottom, right))
    return replace(op, ifm=ifm, weights=weights, registers=registers, name=f"{op.name} (columns in groups of {f})")
