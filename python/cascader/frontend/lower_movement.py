"""Data movement: slices as views, transposes as strided copies.

- STRIDED_SLICE, SLICE, SPLIT, SPLIT_V, UNPACK take boxes of their input. Where every reader
  of an output is an NPU operation that takes any strided IFM, the output is a *view* of the
  input (an offset and the input's strides): no operation at all, the readers address the box
  in place. Otherwise (a model output, a CPU reader, a reader that re-views its input densely)
  it is one raw copy of the box.
- TRANSPOSE is a copy through a permuted view when the channel axis stays innermost (H and W
  swap). A permutation that moves the channels cannot stream them (an NHWC view has no
  channel stride), but a depth-1 copy has two free strides. Where the output has fewer
  channels than the steps below take copies (an NCHW image to NHWC: 3), the least-scratch
  lowering (`planes_in_least_scratch`) makes each output channel one depth-1 copy of an
  (H x W) plane (`channel_planes`), where the plane's rows read runs of source channels: the
  planner stripes those by the output's rows (`planner._transpose_propagator`), and no scratch
  map is needed, but Vela's accounting costs them ten times the steps (`_takes_planes`).
  Otherwise swapping W and C is one copy
  of a depth-1 (W x C) plane per row, swapping H and C one of an (H x C) plane per column, and
  the two other permutations are two such steps through a scratch map (C, H, W: H and C, then
  W and C; W, C, H: H and W, then W and C), Vela's steps, command for command.
- On the Ethos-U85, a TRANSPOSE is one copy writing its OFM transposed where the cycle model
  finds that faster than these steps (`lower_ofm_transpose`).
- EXPAND_DIMS is an alias, as RESHAPE is.

All copies are raw (zero points 0, scale 1): these operators move values without
requantizing them, as TFLite's kernels do.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import UnsupportedError
from ..tflite.model import Tensor
from .lowered import FeatureMapView, dense_strides
from .lowering_context import Box, LoweringContext
from .lower_ofm_transpose import lower_ofm_transpose
from .operation_builder import OperationBuilder, pool_copy
from .operator_view import OperatorView

SLICE_OPS = frozenset({"STRIDED_SLICE", "SLICE", "SPLIT", "SPLIT_V", "UNPACK"})
# Readers that take their IFM through `view()` as it is, so a strided box works. Readers that
# re-view their input densely (FULLY_CONNECTED, SOFTMAX, reshapes, MEAN and SUM, whose pools
# walk the map as dense rows) need a real copy.
VIEW_READERS = frozenset({
    "CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D", "ADD", "SUB", "MUL", "CONCATENATION", "PAD",
    "QUANTIZE", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LOGISTIC", "TANH", "EXP", "HARD_SWISH", "LEAKY_RELU",
    "PRELU", "TRANSPOSE", "MIRROR_PAD", "RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR", "MINIMUM", "MAXIMUM", "ABS",
    "RSQRT", "PADV2", "TILE", "REVERSE_V2", *SLICE_OPS,
})


def hwc_axis(rank: int, axis: int) -> int | None:
    """Where tensor axis `axis` of a rank-`rank` tensor lands in H x W x C (None: the batch)."""
    axis %= max(rank, 1)
    if rank == 4:
        return None if axis == 0 else axis - 1
    return axis + (3 - rank)


def _as_box(source: int, t: Tensor, begin, size, step) -> Box:
    rank = len(t.shape)
    origin, extent, steps = [0, 0, 0], [1, 1, 1], [1, 1, 1]
    for axis in range(rank):
        k = hwc_axis(rank, axis)
        if k is None:
            if begin[axis] != 0 or size[axis] != 1:
                raise UnsupportedError("a slice along the batch")
            continue
        origin[k], extent[k], steps[k] = int(begin[axis]), int(size[axis]), int(step[axis])
    return Box(source, tuple(origin), tuple(extent), tuple(steps))


def _constant(v: OperatorView, i: int) -> np.ndarray:
    t = v.inputs[i] if i < len(v.inputs) else None
    if t is None or not t.is_constant:
        raise UnsupportedError(f"operator {v.index} ({v.opcode}): input {i} is computed at run time")
    return np.asarray(t.data).astype(np.int64).reshape(-1)


def slice_boxes(v: OperatorView) -> list[tuple[int, Box]]:
    """(output tensor, box of the input) for each output of a slicing operator."""
    src = v.ifm
    assert src is not None
    shape = list(src.shape)
    rank = len(shape)
    source = v.op.inputs[1] if v.opcode == "SPLIT" else v.op.inputs[0]
    outs = list(v.op.outputs)
    if v.opcode in ("SPLIT", "SPLIT_V", "UNPACK"):
        if v.opcode == "SPLIT":
            axis = int(_constant(v, 0)[0])
        elif v.opcode == "SPLIT_V":
            axis = int(_constant(v, 2)[0])
        else:
            axis = int(v.options.get("axis", 0))
        axis %= rank
        if v.opcode == "SPLIT":
            sizes = [shape[axis] // len(outs)] * len(outs)
        elif v.opcode == "SPLIT_V":
            sizes = [int(s) for s in _constant(v, 1)]
            if -1 in sizes:
                sizes[sizes.index(-1)] = shape[axis] - (sum(sizes) + 1)
        else:
            sizes = [1] * len(outs)
        boxes, start = [], 0
        for out, n in zip(outs, sizes):
            begin, size = [0] * rank, list(shape)
            begin[axis], size[axis] = start, n
            boxes.append((out, _as_box(source, src, begin, size, [1] * rank)))
            start += n
        return boxes
    if v.opcode == "SLICE":
        begin = [int(b) for b in _constant(v, 1)]
        size = [shape[i] - begin[i] if s == -1 else int(s) for i, s in enumerate(_constant(v, 2))]
        return [(outs[0], _as_box(source, src, begin, size, [1] * rank))]
    # STRIDED_SLICE, TFLite's semantics for positive strides.
    o = v.options
    if o.get("ellipsis_mask", 0) or o.get("new_axis_mask", 0):
        raise UnsupportedError(f"operator {v.index} (STRIDED_SLICE): ellipsis or new-axis masks")
    begin, end, strides = _constant(v, 1), _constant(v, 2), _constant(v, 3)
    b_out, size, step = [], [], []
    for i, dim in enumerate(shape):
        s = int(strides[i])
        if s <= 0:
            raise UnsupportedError(f"operator {v.index} (STRIDED_SLICE): stride {s}")
        b = 0 if o.get("begin_mask", 0) >> i & 1 else int(begin[i])
        e = int(begin[i] + end[i]) if o.get("offset", False) else int(end[i])
        e = dim if o.get("end_mask", 0) >> i & 1 else e
        b = min(max(b + dim if b < 0 else b, 0), dim)
        e = min(max(e + dim if e < 0 else e, 0), dim)
        if o.get("shrink_axis_mask", 0) >> i & 1:
            e = b + 1
        b_out.append(b)
        size.append(max(0, -(-(e - b) // s)))
        step.append(s)
    return [(outs[0], _as_box(source, src, b_out, size, step))]


def box_view(lw: LoweringContext, box: Box, like: Tensor | None = None) -> FeatureMapView:
    """The box as a view of its source's bytes, quantized as `like` (the output tensor; a raw
    move keeps the values, so the output's parameters read them)."""
    parent = lw.view(box.source)
    if box.step[2] != 1 and box.extent[2] > 1:
        raise UnsupportedError("a channel stride (an NHWC view steps through its channels one by one)")
    offset = parent.offset + sum(o * s for o, s in zip(box.origin, parent.strides))
    strides = tuple(s * k for s, k in zip(parent.strides, box.step))
    view = replace(parent, shape=box.extent, offset=offset, strides=strides)
    if like is not None and like.quantization is not None and like.quantization.scale.size:
        view = replace(view, scale=float(like.quantization.scale[0]), zero_point=int(like.quantization.zero_point[0]))
    return view


def plan_slice_views(lw: LoweringContext) -> None:
    """Make every slicing output that only NPU view-readers read a view of its input; the
    slicing operator then needs no operation for it."""
    g = lw.graph
    for i in lw.operators:
        if g.operators[i].opcode not in SLICE_OPS:
            continue
        v = OperatorView(g, i)
        try:
            boxes = slice_boxes(v)
        except UnsupportedError:
            continue  # the handler raises it again, with the operator named
        aliased = 0
        for out, box in boxes:
            readers = lw.consumers.get(out, [])
            if (out in g.outputs or not readers or any(r not in lw.members for r in readers)
                    or any(g.operators[r].opcode not in VIEW_READERS for r in readers)
                    or box.extent != _hwc_shape(g.tensors[out]) or (box.step[2] != 1 and box.extent[2] > 1)):
                continue
            lw.subviews[out] = box
            aliased += 1
        if aliased == len(boxes):
            lw.skipped.add(i)


def _hwc_shape(t: Tensor) -> tuple[int, int, int]:
    shape = [int(d) for d in t.shape]
    if len(shape) == 4:
        return shape[1], shape[2], shape[3]
    return tuple([1] * (3 - len(shape)) + shape)  # type: ignore[return-value]


def raw_copy(lw: LoweringContext, index: int, name: str, src: FeatureMapView, dst: FeatureMapView) -> None:
    """dst = src, the codes as they are: a 1x1 average pool, or for an int32 map (the U85's
    PACK and CONCATENATION of indices; our pools do not move 32-bit values) an ADD of 0."""
    if src.dtype == "int32":
        ops = OperationBuilder(lw, index, name.split(":", 1)[-1])
        ops.elementwise("ADD", src, lw.constant(np.array([0]), "int32"), dst)
        return
    pool_copy(lw, index, name, replace(src, zero_point=0), replace(dst, zero_point=0), requantize=False)


def lower_slice(lw: LoweringContext, v: OperatorView) -> None:
    for out, box in slice_boxes(v):
        if out in lw.subviews:
            continue
        src = box_view(lw, box)
        dst = lw.view(out)
        # An output of another rank (a shrunk or unpacked axis) holds the same elements in the
        # same order: write it densely in the box's shape.
        dst = replace(dst, shape=box.extent, strides=dense_strides(box.extent, dst.element_size))
        raw_copy(lw, v.index, f"{v.index}:{v.opcode}[{out}]", src, dst)


def lower_transpose(lw: LoweringContext, v: OperatorView) -> None:
    src_t, out_t = v.ifm, v.ofm
    assert src_t is not None and out_t is not None
    perm = [int(p) for p in _constant(v, 1)]
    rank = len(src_t.shape)
    if rank == 4 and perm[0] != 0:
        raise UnsupportedError(f"operator {v.index} (TRANSPOSE): moves the batch axis")
    source_axis = _source_axes(perm, rank)
    src, dst = lw.view(v.op.inputs[0]), lw.view(v.op.outputs[0])
    name = f"{v.index}:TRANSPOSE"
    steps = lambda context: _transpose_steps(context, v.index, name, src, dst, source_axis)  # noqa: E731
    if not lower_ofm_transpose(lw, v.index, name, src, dst, source_axis, steps):
        steps(lw)


def _transpose_steps(lw: LoweringContext, index: int, name: str, src: FeatureMapView, dst: FeatureMapView,
                     source_axis: tuple[int, ...]) -> None:
    """dst = src transposed (output axis k reads source axis `source_axis[k]`) in copies any
    Ethos-U takes (see the module's docstring)."""
    if source_axis in ((0, 1, 2), (1, 0, 2)):  # channels stay innermost: one copy
        raw_copy(lw, index, name, replace(src, shape=dst.shape, strides=tuple(src.strides[k] for k in source_axis)), dst)
    elif lw.channel_planes and _takes_planes(source_axis, src.shape, dst.shape[2]):
        channel_planes(lw, index, name, src, dst, source_axis)
    elif tuple(source_axis) == (0, 2, 1):
        swap_with_channels(lw, index, name, src, dst, axis=1)
    elif tuple(source_axis) == (2, 1, 0):
        swap_with_channels(lw, index, name, src, dst, axis=0)
    else:
        # Two steps through a scratch map in the first step's output order.
        h, w, c = src.shape
        if tuple(source_axis) == (2, 0, 1):  # (C, H, W) = W and C swapped in (C, W, H)
            mid = lw.scratch(index, "transposed", (c, w, h), src.dtype)
            swap_with_channels(lw, index, f"{name}[H,C]", src, mid, axis=0)
        else:  # (1, 2, 0): (W, C, H) = W and C swapped in (W, H, C)
            mid = lw.scratch(index, "transposed", (w, h, c), src.dtype)
            swapped = replace(src, shape=mid.shape, strides=tuple(src.strides[k] for k in (1, 0, 2)))
            raw_copy(lw, index, f"{name}[H,W]", swapped, mid)
        swap_with_channels(lw, index, f"{name}[W,C]", mid, dst, axis=1)


def _source_axes(perm: list[int], rank: int) -> tuple[int, ...]:
    """Output H/W/C axis k of a TRANSPOSE by `perm` reads source H/W/C axis [k]."""
    source_axis = [0, 1, 2]
    for axis_out, axis_in in enumerate(perm):
        k_out, k_in = hwc_axis(rank, axis_out), hwc_axis(rank, axis_in)
        if k_out is not None and k_in is not None:
            source_axis[k_out] = k_in
    return tuple(source_axis)


def _takes_planes(source_axis: tuple[int, ...], shape: tuple[int, int, int], channels: int) -> bool:
    """Whether a transpose of a source of `shape` (H, W, C) into `channels` output channels
    is lowered as per-channel planes (`channel_planes`) where scratch is to be least. Only
    where a plane's rows read runs of source channels (NCHW -> NHWC: a source row each): a plane
    whose rows step through the source's H or W (C, H, W and C, W, H orders) reads one element
    per burst (YOLOv8n's 6x6x65 (0, 3, 1, 2): 18,977 cycles on the U55-128 against Vela's
    steps' 3,217). The planes need no scratch map and stripe, but a depth-1 copy runs a whole
    8-deep block per element: in Vela's accounting (the estimator's, a run of the steps' pieces
    costed as one operation) an NCHW 96 x 96 x 3 image takes 221,298 cycles on the U55-128
    against Vela's steps' 20,736, so the default lowering takes the steps. (Costed piece by
    piece as they run, the steps' 97 commands take 270,816 cycles on the U55-128, the planes
    221,298; on the U65-256 176,149 and 239,591.) On the Ethos-U85 the planes are the faster (zoo
    mobilenet_v2_nchw on U85-256: 542,242 cycles against the steps' 560,802): there they are
    the default (`lowering.lower`)."""
    return source_axis[1] == 2 and channels <= _swap_copies(shape, source_axis)


def planes_in_least_scratch(graph, op) -> bool:
    """Whether the least-scratch lowering lowers `op` otherwise: a TRANSPOSE taken as
    per-channel planes (`_takes_planes`)."""
    if op.opcode != "TRANSPOSE" or len(op.inputs) < 2:
        return False
    src, dst, perm_t = (graph.tensors[t] for t in (op.inputs[0], op.outputs[0], op.inputs[1]))
    rank = len(src.shape)
    if not perm_t.is_constant:
        return False
    perm = [int(p) for p in np.asarray(perm_t.data).reshape(-1)]
    if rank == 4 and perm[0] != 0:
        return False
    source_axis = _source_axes(perm, rank)
    return source_axis not in ((0, 1, 2), (1, 0, 2)) and _takes_planes(source_axis, _hwc_shape(src), _hwc_shape(dst)[2])


def _swap_copies(shape: tuple[int, int, int], source_axis: tuple[int, ...]) -> int:
    """How many copies the steps through `swap_with_channels` take for a transpose moving the
    channels of a source of `shape` (H, W, C)."""
    h, w, c = shape
    return {(0, 2, 1): h, (2, 1, 0): w, (2, 0, 1): w + c, (1, 2, 0): 1 + w}[source_axis]


def channel_planes(lw: LoweringContext, index: int, name: str, src: FeatureMapView, dst: FeatureMapView,
                   source_axis: tuple[int, ...]) -> None:
    """dst = src transposed (output axis k reads source axis `source_axis[k]`), one depth-1
    copy of an (H x W) plane per output channel. Each is tagged with the transpose's axes and
    its channel: the planner reads the plane's rows along the source's axes."""
    e = src.element_size
    t = tuple(src.strides[k] for k in source_axis)  # source strides along the output's axes
    h, w, c = dst.shape
    for k in range(c):
        plane = replace(src, shape=(h, w, 1), offset=src.offset + k * t[2], strides=(t[0], t[1], e))
        out = replace(dst, shape=(h, w, 1), offset=dst.offset + k * dst.strides[2])
        pool_copy(lw, index, f"{name}[channel {k}]", replace(plane, zero_point=0), replace(out, zero_point=0),
                  requantize=False, tags={"transpose": {"source_axis": source_axis, "channel": k}})


def swap_with_channels(lw: LoweringContext, index: int, name: str, src: FeatureMapView, dst: FeatureMapView,
                       axis: int) -> None:
    """dst = src (H, W, C) with `axis` (0: H, 1: W) and C swapped: per position along the other
    axis, a depth-1 plane of that axis x C (W x C per row, H x C per column)."""
    loop = 1 - axis
    n, c, e = src.shape[axis], src.shape[2], src.element_size
    for p in range(src.shape[loop]):
        piece = replace(src, shape=(n, c, 1), offset=src.offset + p * src.strides[loop],
                        strides=(src.strides[axis], src.strides[2], e))
        out = replace(dst, shape=(n, c, 1), offset=dst.offset + p * dst.strides[loop],
                      strides=(dst.strides[2], dst.strides[axis], e))
        raw_copy(lw, index, f"{name}[{p}]", piece, out)


def lower_pack(lw: LoweringContext, v: OperatorView) -> None:
    """PACK: input k is the slice at index k of the output's new axis, one raw copy each."""
    out_t = v.ofm
    assert out_t is not None
    rank = len(out_t.shape)
    axis = hwc_axis(rank, int(v.options.get("axis", 0)))
    if axis is None:
        raise UnsupportedError(f"operator {v.index} (PACK): packs along the batch")
    extent = list(_hwc_shape(out_t))
    extent[axis] = 1
    for k, t in enumerate(v.op.inputs):
        origin = [0, 0, 0]
        origin[axis] = k
        dst = box_view(lw, Box(v.op.outputs[0], tuple(origin), tuple(extent)))
        src = lw.view(t)
        # The input holds the slice's elements in the same order: read it densely in its shape.
        src = replace(src, shape=tuple(extent), strides=dense_strides(tuple(extent), src.element_size))
        raw_copy(lw, v.index, f"{v.index}:PACK[{k}]", src, dst)
