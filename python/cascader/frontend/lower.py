"""Lowering: the operators of one NPU segment -> register-level NPU operations.

Each TFLite operator becomes zero or more `LoweredOperation`s, whose `registers` are the
placement-independent fields of the operation record `cascader.sim.decode` returns (kind,
kernel, padding, activation, rounding, scales...): the emitter adds addresses, block config and
weight streams, and encodes exactly that record, so a decode of our binary gives back the same
values. How each operator maps:

- CONV_2D, DEPTHWISE_CONV_2D: one convolution; the per-channel rescale goes to the scale stream.
  A depth multiplier above 1 becomes an ordinary convolution whose weights are zero outside
  each output channel's own input channel (exact, and the zeros cost little once compressed).
- FULLY_CONNECTED: a 1x1 convolution over a 1 x N x K view of the input. Its rescale rounds
  once (NATURAL): TFLite's reference FULLY_CONNECTED rounds once, its convolutions twice (TFL).
- AVERAGE_POOL_2D, MAX_POOL_2D: a pooling operation; the average divides by the window size
  through OFM_SCALE (padded windows: the NPU divides by the valid count itself).
- ADD, SUB, MUL: elementwise; operand and output scales from `quantization`. A smaller operand
  is broadcast; when it is the first one the operands are swapped (REVERSED_OPERANDS).
- RESHAPE, SQUEEZE: no operation; the output is the input's buffer (an alias).
- CONCATENATION: one copy (a 1x1 average pool, rescaling when quantizations differ) per input
  into its slice of the output.
- PAD: folded into the consuming convolution's padding when the pad value is the zero point
  and the amounts fit; else a copy into the interior plus fills of the border from a constant.
- QUANTIZE, RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1: a 1x1 average pool that rescales and clamps.
- MINIMUM, MAXIMUM, ABS (`lower_minmax`): one elementwise operation; TRANSPOSE_CONV
  (`lower_transpose_conv`): one convolution over the zero-inserting IFM upscale; MIRROR_PAD
  (`lower_mirror_pad`): one raw copy per mirrored row and column. The other
  families (tables, softmax, PReLU, movement, resizes, MEAN) each have their module too.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import UnsupportedError
from ..tflite.model import SubGraph, Tensor
from .lowered import (
    ELEMENT_SIZE,
    FeatureMapView,
    LoweredOperation,
    TYPE_RANGE,
    LoweredSegment,
    WeightVolume,
    channel_scales,
    brick_strides,
    dense_strides,
    full_range,
    kernel_record,
    round16,
)
from .add_sub_rounding import add_sub_table, exact_add_sub_scales, operand_values, reference_output_multiplier
from .lower_arg_max import lower_arg_max
from .lower_lut import lower_lut, table_lookup
from .lut_fusion import fuse_table_lookups
from .lower_minmax import lower_abs, lower_min_max
from .lower_mirror_pad import lower_mirror_pad
from .lower_transpose_conv import lower_transpose_conv
from .lower_movement import (
    SLICE_OPS,
    Box,
    box_view,
    lower_pack,
    lower_slice,
    lower_transpose,
    plan_slice_views,
)
from .lower_prelu import lower_leaky_relu_int16, lower_prelu
from .lower_resize import lower_resize_bilinear, lower_resize_nearest
from .lower_reduce import lower_reduce
from .lower_softmax import lower_softmax
from .lower_squared_difference import lower_squared_difference
from .operation_builder import EIGHT_BIT_RANGE, OperationBuilder, broadcast_order, clamp_record, fused_clamp, weight_volume
from .operator_view import ALIAS_OPS, OperatorView
from .quantization import (
    add_sub_scales,
    average_pool_scale,
    multiply_scale,
    rescale_scale,
)

CLAMP_OPS = {"RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0), "RELU_0_TO_1": (0.0, 1.0)}
MAX_PADDING = 127  # the IFM_PAD_* registers
TENSOR_DIM_MAX = 65535  # a feature map's height, width or depth
# Rows of at most 64 columns for a streamed copy: U65's 2x2 micro-blocks waste half of a one-row map.
STREAM_MAX_WIDTH = 64


def is_dense_copy(op: LoweredOperation) -> bool:
    """A 1x1 average pool between dense NHWC maps of one shape: a per-element copy (a
    requantization, a table lookup) whose elements any shape of the same size holds in the same
    order, so it may run in whichever shape streams best."""
    r = op.registers
    a, b = op.ifm, op.ofm
    return (op.kind == "pool" and r.get("sub_op") == "AVERAGE" and not r.get("ifm_upscale") and op.ifm2 is None
            and (r["kernel"]["height"], r["kernel"]["width"]) == (1, 1) and not any(r.get("padding", (0,) * 4))
            and (a.layout, b.layout) == ("NHWC", "NHWC") and a.shape == b.shape
            and a.strides == dense_strides(a.shape, a.element_size) and b.strides == dense_strides(b.shape, b.element_size))


def stream_widths(pixels: int) -> list[int]:
    """The row widths (widest first, at most STREAM_MAX_WIDTH) a dense copy of `pixels`
    16-channel pixels can take with rows the NPU allows."""
    return [w for w in range(min(pixels, STREAM_MAX_WIDTH), 0, -1) if pixels % w == 0 and pixels // w <= TENSOR_DIM_MAX]


def with_copy_shape(op: LoweredOperation, shape: tuple[int, int, int]) -> LoweredOperation:
    """A dense copy (is_dense_copy) over the same bytes viewed in another shape."""
    return replace(op, ifm=replace(op.ifm, shape=shape, strides=dense_strides(shape, op.ifm.element_size)),
                   ofm=replace(op.ofm, shape=shape, strides=dense_strides(shape, op.ofm.element_size)))


def _hwc(t: Tensor) -> tuple[int, int, int]:
    shape = tuple(int(d) for d in t.shape)
    if len(shape) == 4:
        if shape[0] != 1:
            raise UnsupportedError(f"tensor {t.name!r} has batch {shape[0]}; the NPU path compiles batch 1")
        return shape[1], shape[2], shape[3]
    if len(shape) == 3:
        return shape
    if len(shape) == 2:
        return 1, shape[0], shape[1]
    if len(shape) == 1:
        return 1, 1, shape[0]
    if len(shape) == 0:
        return 1, 1, 1
    raise UnsupportedError(f"tensor {t.name!r} has rank {len(shape)}; the NPU path takes rank 4 or less")


def _quant(t: Tensor) -> tuple[float, int]:
    q = t.quantization
    if q is None or q.scale.size == 0:
        if t.dtype == "int32":
            return 1.0, 0  # plain integers (indices, shapes): TFLite's int32 kernels ignore quantization
        raise UnsupportedError(f"tensor {t.name!r} is not quantized")
    return float(q.scale[0]), int(q.zero_point[0])


def same_padding(in_size: int, out_size: int, stride: int, dilated_kernel: int) -> tuple[int, int]:
    """TFLite's SAME padding (before, after): the extra row or column goes after."""
    total = max((out_size - 1) * stride + dilated_kernel - in_size, 0)
    return total // 2, total - total // 2


class _Lowering:
    def __init__(self, graph: SubGraph, operators: tuple[int, ...], removed: frozenset[int] = frozenset()) -> None:
        self.graph = graph
        self.operators = operators
        self.members = set(operators)
        self.root: dict[int, int] = {}
        self.ops: list[LoweredOperation] = []
        self.fused_away: set[int] = set()  # buffers no operation uses after fusion
        self.constants: dict[int, bytes] = {}
        self.fill_constants: dict[tuple[int, str], int] = {}  # (value, dtype) -> pseudo buffer
        self.next_pseudo = -2  # constant buffers made here get negative ids
        self.folded_pad: dict[int, tuple[int, int, int, int]] = {}  # consumer op -> padding from a PAD
        self.folded_input: dict[int, int] = {}  # consumer op -> the PAD's input tensor
        self.skipped: set[int] = set()
        # Concatenation inputs their producer writes straight into the output's slice:
        # tensor -> (concatenation output, axis in H/W/C, start along it).
        self.slices: dict[int, tuple[int, int, int]] = {}
        consumers: dict[int, list[int]] = {}
        for i, op in enumerate(graph.operators):
            if i in removed:
                continue
            for t in op.inputs:
                if t >= 0:
                    consumers.setdefault(t, []).append(i)
        self.consumers = consumers
        # Scratch buffers: id -> (name, natural H x W x C, dtype). Their ids follow the model's
        # tensors, 1000 per operator, so that every segment's ids are distinct.
        self.scratch_buffers: dict[int, tuple[str, tuple[int, int, int], str]] = {}
        # Slicing outputs read in place: tensor -> its box of the sliced tensor.
        self.subviews: dict[int, Box] = {}

    # --- buffers ----------------------------------------------------------------------------

    def buffer(self, t: int) -> int:
        """The tensor owning `t`'s bytes: through reshapes, folded pads and concatenation slices."""
        while t in self.root or t in self.slices or t in self.subviews:
            t = self.root[t] if t in self.root else self.slices[t][0] if t in self.slices else self.subviews[t].source
        return t

    def view(self, t: int, shape: tuple[int, int, int] | None = None) -> FeatureMapView:
        if t in self.subviews:
            box = self.subviews[t]
            if shape is not None and shape != box.extent:
                raise UnsupportedError(f"tensor {self.graph.tensors[t].name!r} is a strided view; it cannot be "
                                       f"re-viewed as {shape}")
            return box_view(self, box, self.graph.tensors[t])
        if t in self.slices:
            out, axis, start = self.slices[t]
            parent = self.view(out)
            hwc = shape or _hwc(self.graph.tensors[t])
            return replace(parent, shape=hwc, offset=parent.offset + start * parent.strides[axis])
        tensor = self.graph.tensors[t]
        scale, zp = _quant(tensor)
        hwc = shape or _hwc(tensor)
        if tensor.dtype not in TYPE_RANGE and tensor.dtype != "int32":
            raise UnsupportedError(f"tensor {tensor.name!r} is {tensor.dtype}; the NPU path takes int8, uint8, int16 "
                                   "(and int32 for ADD, SUB and MUL)")
        size = ELEMENT_SIZE[tensor.dtype]
        if tensor.is_constant:
            self.constants[t] = np.ascontiguousarray(tensor.data).tobytes()
        return FeatureMapView(self.buffer(t), hwc, tensor.dtype, zp, scale, dense_strides(hwc, size))

    def scratch(self, index: int, name: str, shape: tuple[int, int, int], dtype: str,
                zero_point: int = 0, scale: float = 1.0) -> FeatureMapView:
        """A new buffer only this segment's operations use, for the intermediate results of
        operator `index`'s lowering."""
        b = len(self.graph.tensors) + 1000 * index
        while b in self.scratch_buffers:
            b += 1
        self.scratch_buffers[b] = (f"{self.graph.tensors[self.graph.operators[index].outputs[0]].name}/{name}",
                                   shape, dtype)
        return FeatureMapView(b, shape, dtype, zero_point, scale, dense_strides(shape, ELEMENT_SIZE[dtype]))

    def constant(self, values: np.ndarray, dtype: str) -> FeatureMapView:
        """A constant feature map in flash (a 1 x 1 x N vector of `values`)."""
        data = np.asarray(values, dtype=dtype).reshape(-1)
        b = self.next_pseudo
        self.next_pseudo -= 1
        self.constants[b] = data.tobytes()
        shape = (1, 1, data.size)
        return FeatureMapView(b, shape, dtype, 0, 1.0, dense_strides(shape, ELEMENT_SIZE[dtype]))

    def natural(self, b: int) -> tuple[tuple[int, int, int], str]:
        """A buffer's own shape and type: its tensor's, or a scratch buffer's."""
        if b in self.scratch_buffers:
            _, shape, dtype = self.scratch_buffers[b]
            return shape, dtype
        t = self.graph.tensors[b]
        return _hwc(t), t.dtype

    # --- helpers ----------------------------------------------------------------------------

    def add(self, op: LoweredOperation) -> None:
        self.ops.append(op)

    def copy(self, index: int, name: str, src: FeatureMapView, dst: FeatureMapView, clamp: dict | None = None,
             requantize: bool = True) -> None:
        """A 1x1 average pool: dst = clamp(rescale(src)). TFLite's requantizing kernels
        (QUANTIZE's Requantize, the RELUs) rescale with MultiplyByQuantizedMultiplier, which
        rounds twice: TFL rounding (one rounding, NATURAL, is off by one on about a quarter of
        the codes for some scale pairs). With equal scales there is no rescale."""
        if requantize and not math.isclose(src.scale, dst.scale, rel_tol=0, abs_tol=0):
            ofm_scale, rounding = rescale_scale(src.scale, dst.scale), "TFL"
        else:
            ofm_scale, rounding = (1, 0), "NATURAL"
        tmin, tmax = TYPE_RANGE[dst.dtype]
        registers = dict(
            sub_op="AVERAGE", kernel=kernel_record(1, 1, (1, 1), (1, 1)), padding=(0, 0, 0, 0),
            activation=clamp or dict(function=0, clip_range=0, min=tmin, max=tmax), rounding=rounding,
            global_scale=True, ofm_scale=ofm_scale,
        )
        self.add(LoweredOperation("pool", "avg_pool", name, (index,), src, dst, registers=registers))

    # --- operators --------------------------------------------------------------------------

    def run(self) -> LoweredSegment:
        for i in self.operators:
            op = self.graph.operators[i]
            if op.opcode in ALIAS_OPS:
                src, dst = op.inputs[0], op.outputs[0]
                if self.graph.tensors[src].is_constant:
                    raise UnsupportedError(f"operator {i} ({op.opcode}) reshapes a constant")
                self.root[dst] = src
        self._fold_pads()
        plan_slice_views(self)
        self._slice_concatenations()
        for i in self.operators:
            if i in self.skipped:
                continue
            view = OperatorView(self.graph, i)
            handler = getattr(self, "_" + view.opcode.lower(), None)
            if view.opcode in ALIAS_OPS:
                continue
            try:
                if handler is None:
                    raise UnsupportedError(f"operator {i} ({view.opcode}) has no NPU lowering")
                handler(view)
            except UnsupportedError as e:
                e.operator = i  # the compiler sends this operator to the CPU and tries again
                raise
        self.fused_away = fuse_table_lookups(self)
        return self._segment()

    def _fold_pads(self) -> None:
        for i in self.operators:
            op = self.graph.operators[i]
            if op.opcode != "PAD":
                continue
            out = op.outputs[0]
            users = self.consumers.get(out, [])
            if not users or any(u not in self.members for u in users) or out in self.graph.outputs:
                continue
            pads = np.asarray(self.graph.tensors[op.inputs[1]].data).reshape(-1, 2)
            if len(pads) != 4 or pads[0].any() or pads[3].any():
                continue
            (top, bottom), (left, right) = pads[1], pads[2]
            if max(top, bottom, left, right) > MAX_PADDING:
                continue
            # TFLite pads with the output zero point; the NPU pads with the IFM zero point.
            if _quant(self.graph.tensors[out]) != _quant(self.graph.tensors[op.inputs[0]]):
                continue
            # Every consumer pads for itself (SSD heads read one padded map with three
            # depthwise convolutions): all of them must be able to.
            views = [OperatorView(self.graph, u) for u in users]
            if not all(u.opcode in ("CONV_2D", "DEPTHWISE_CONV_2D") and u.ifm is self.graph.tensors[out]
                       and u.options.get("padding", "VALID") == "VALID"
                       and max(top, bottom) < u.kernel.dilated_height and max(left, right) < u.kernel.dilated_width
                       for u in views):
                continue
            for u in users:
                self.folded_pad[u] = (int(top), int(left), int(bottom), int(right))
                self.folded_input[u] = op.inputs[0]
            self.root[out] = op.inputs[0]
            self.skipped.add(i)

    def _slice_concatenations(self) -> None:
        """Let producers write their concatenation slice in place, which saves a copy and a
        buffer, when nothing else reads the input and nothing would need rescaling."""
        producer = {t: i for i in self.operators for t in self.graph.operators[i].outputs}
        for i in self.operators:
            v = OperatorView(self.graph, i)
            if v.opcode != "CONCATENATION" or v.fused_activation != "NONE":
                continue
            out = v.op.outputs[0]
            rank = len(v.ofm.shape)
            axis = v.options.get("axis", -1) % rank
            if rank == 4 and axis == 0:
                continue
            hwc_axis = axis + (3 - rank) if rank <= 3 else axis - 1
            start = 0
            for t in v.op.inputs:
                tensor = self.graph.tensors[t]
                size = _hwc(tensor)[hwc_axis] if not tensor.is_constant else 0
                p = producer.get(t)
                if (p is not None and not tensor.is_constant and self.consumers.get(t) == [i]
                        and t not in self.graph.outputs and t not in self.root and t not in self.slices
                        and self.graph.operators[p].opcode not in ALIAS_OPS | SLICE_OPS | {"CONCATENATION", "PAD"}
                        and _quant(tensor) == _quant(v.ofm) and v.op.inputs.count(t) == 1):
                    self.slices[t] = (out, hwc_axis, start)
                start += size

    def _weighted(self, v: OperatorView, depthwise: bool) -> None:
        ifm_t, w_t, ofm_t = v.ifm, v.weights, v.ofm
        assert ifm_t is not None and w_t is not None and ofm_t is not None
        wq = w_t.quantization
        if wq is None:
            raise UnsupportedError(f"operator {v.index} ({v.opcode}): weights are not quantized")
        w = np.asarray(w_t.data)  # as stored (int8/uint8): the encoder widens them, one operation at a time
        wzp = np.asarray(wq.zero_point, dtype=np.int64).reshape(-1)
        fc = v.opcode == "FULLY_CONNECTED"
        # A folded PAD: the operation reads the PAD's input and pads it itself.
        ifm_view = self.view(self.folded_input.get(v.index, v.op.inputs[0]))
        ofm_view = self.view(v.op.outputs[0])
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
            if depthwise:
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
                    zp = np.broadcast_to(wzp, (out_channels,))
                    ohwi = np.repeat(zp[:, None, None, None], channels, axis=3)
                    ohwi = np.repeat(np.repeat(ohwi, w.shape[1], axis=1), w.shape[2], axis=2).copy()
                    for o in range(out_channels):
                        ohwi[o, :, :, o // multiplier] = dw[:, :, o]
            else:
                ohwi = w
            kernel = kernel_record(k.height, k.width, (k.stride_h, k.stride_w), (k.dilation_h, k.dilation_w))
            padding = self._padding(v, ifm_view, ofm_view)
            if v.index in self.folded_pad:
                top, left, _, _ = self.folded_pad[v.index]
                # The NPU takes the IFM to end where the last window does, (OH-1)*stride +
                # kernel - top - bottom rows: bottom/right padding is only what the windows reach.
                bottom = (ofm_view.shape[0] - 1) * k.stride_h + k.dilated_height - top - ifm_view.shape[0]
                right = (ofm_view.shape[1] - 1) * k.stride_w + k.dilated_width - left - ifm_view.shape[1]
                padding = (top, left, max(bottom, 0), max(right, 0))
        volume = weight_volume(v, ohwi, depthwise=kind == "depthwise",
                               float32_product=ifm_t.dtype == "uint8" or (fc and wq.scale.size == 1))
        registers = dict(kernel=kernel, padding=padding, activation=fused_clamp(v),
                         rounding="NATURAL" if fc else "TFL", global_scale=False, ofm_scale=(0, 0),
                         acc_format=1 if ifm_t.dtype == "int16" else 0)
        self.add(LoweredOperation(kind, cost_kind, f"{v.index}:{v.opcode}", (v.index,), ifm_view, ofm_view,
                                  weights=volume, registers=registers))

    def _padding(self, v: OperatorView, ifm: FeatureMapView, ofm: FeatureMapView) -> tuple[int, int, int, int]:
        if v.options.get("padding", "VALID") != "SAME":
            return (0, 0, 0, 0)
        k = v.kernel
        assert k is not None
        top, bottom = same_padding(ifm.shape[0], ofm.shape[0], k.stride_h, k.dilated_height)
        left, right = same_padding(ifm.shape[1], ofm.shape[1], k.stride_w, k.dilated_width)
        return (top, left, bottom, right)

    def _conv_2d(self, v: OperatorView) -> None:
        self._weighted(v, depthwise=False)

    def _depthwise_conv_2d(self, v: OperatorView) -> None:
        self._weighted(v, depthwise=True)

    def _fully_connected(self, v: OperatorView) -> None:
        self._weighted(v, depthwise=False)

    def _pool(self, v: OperatorView, mode: str) -> None:
        ifm, ofm = self.view(v.op.inputs[0]), self.view(v.op.outputs[0])
        if (ifm.scale, ifm.zero_point) != (ofm.scale, ofm.zero_point):
            raise UnsupportedError(f"operator {v.index} ({v.opcode}): input and output quantization differ")
        k = v.kernel
        assert k is not None
        padding = self._padding(v, ifm, ofm)
        # TFLite pools the raw values (equal input and output quantization) and rounds an
        # average half away from zero. With zero points 0 the NPU does the same; with the real
        # ones it would round ties of (x - zp) instead, one off wherever the sign differs.
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
        self.add(LoweredOperation("pool", cost, f"{v.index}:{v.opcode}", (v.index,), ifm, ofm, registers=registers))

    def _max_pool_2d(self, v: OperatorView) -> None:
        self._pool(v, "MAX")

    def _average_pool_2d(self, v: OperatorView) -> None:
        self._pool(v, "AVERAGE")

    def _elementwise(self, v: OperatorView, mode: str) -> None:
        a, b = self.view(v.op.inputs[0]), self.view(v.op.inputs[1])
        ofm = self.view(v.op.outputs[0])
        if "int32" in (a.dtype, b.dtype, ofm.dtype):
            self._int32_elementwise(v, mode, a, b, ofm)
            return
        scaling = None
        if mode in ("ADD", "SUB") and a.dtype in EIGHT_BIT_RANGE and a.dtype == b.dtype == ofm.dtype:
            constants = [self.graph.tensors[t].data if self.graph.tensors[t].is_constant else None
                         for t in v.op.inputs[:2]]
            values = [operand_values(x.dtype, x.zero_point, c) for x, c in zip((a, b), constants)]
            clamp = fused_clamp(v)
            beyond = reference_output_multiplier((a.scale, b.scale, ofm.scale))
            if beyond is not None:
                # Neither the NPU's rescale nor a table can match what the kernel does there.
                raise UnsupportedError(
                    f"operator {v.index} ({v.opcode}): TFLite's kernel would rescale the sum by {beyond:.3g} (scales "
                    f"{a.scale:g}, {b.scale:g} -> {ofm.scale:g}), outside the range below 1 it defines; it stays on "
                    f"the CPU, whose kernel is the reference")
            scaling = exact_add_sub_scales((a.scale, b.scale, ofm.scale), *values, mode == "SUB",
                                           (clamp["min"] - ofm.zero_point, clamp["max"] - ofm.zero_point))
            if scaling is None:
                if self._add_sub_lookup(v, mode, (a, b), constants, ofm):
                    return
                # Vela's registers would be one off where the output lands exactly on a half
                # (see add_sub_rounding); the CPU runs the reference kernel itself.
                raise UnsupportedError(
                    f"operator {v.index} ({v.opcode}): no NPU rescale rounds every pair of input codes as TFLite's "
                    f"reference does (scales {a.scale:g}, {b.scale:g} -> {ofm.scale:g}); it stays on the CPU to stay exact")
        if ofm.shape not in (a.shape, b.shape):
            # Both operands broadcast: the one that lacks only channels gets them first.
            if a.shape == (*ofm.shape[:2], 1):
                a = self._expand_channels(v, a, ofm.shape[2])
            elif b.shape == (*ofm.shape[:2], 1):
                b = self._expand_channels(v, b, ofm.shape[2])
        a, b, reversed_operands = broadcast_order(v, a, b, ofm)
        broadcast = tuple(bd != od for bd, od in zip(b.shape, ofm.shape))
        registers: dict[str, Any] = dict(
            sub_op=mode, kernel=kernel_record(1, 1, (1, 1), (1, 1)), padding=(0, 0, 0, 0),
            activation=fused_clamp(v), rounding="TFL", global_scale=True, broadcast=broadcast,
            reversed_operands=reversed_operands, ifm2_scalar=None,
        )
        if mode == "MUL":
            registers.update(ofm_scale=multiply_scale(a.scale, b.scale, ofm.scale), opa_scale=(0, 0), opb_scale=0,
                             ifm_scale_mode=0)
        else:
            bits = 16 if a.dtype == "int16" else 8
            # With REVERSED_OPERANDS the ALU's operand A is the IFM2 (SUB computes A - B), so A
            # and B stay TFLite's first and second operand, and so does the scale mode (1: A).
            first, second = (b, a) if reversed_operands else (a, b)
            # int16 keeps Vela's registers: its input pairs are not checked (see add_sub_rounding;
            # `unchecked_int16` tells reports which operators these are).
            registers.update(scaling or add_sub_scales(first.scale, second.scale, ofm.scale, bits))
        cost = {"ADD": "add", "SUB": "sub", "MUL": "mul"}[mode]
        self.add(LoweredOperation("elementwise", cost, f"{v.index}:{v.opcode}", (v.index,), a, ofm, ifm2=b,
                                  registers=registers))

    def _add_sub_lookup(self, v: OperatorView, mode: str, operands: tuple[FeatureMapView, FeatureMapView],
                        constants: list, ofm: FeatureMapView) -> bool:
        """An 8-bit ADD/SUB of a tensor and a single-valued constant as one table lookup of the
        tensor (`table_lookup`, as `lower_lut` makes them), the table computed by the
        reference's arithmetic: exact where no register values are. False when the operator is
        not of that form."""
        tensor = [i for i in (0, 1) if constants[i] is None]
        if len(tensor) != 1 or operands[tensor[0]].shape != ofm.shape or np.unique(constants[1 - tensor[0]]).size != 1:
            return False
        x = operands[tensor[0]]
        clamp = fused_clamp(v)
        table = add_sub_table(tuple(o.scale for o in (*operands, ofm)), tuple(o.zero_point for o in (*operands, ofm)),
                              int(np.asarray(constants[1 - tensor[0]]).reshape(-1)[0]), tensor[0] == 1, x.dtype,
                              (clamp["min"], clamp["max"]), mode == "SUB")
        self.add(table_lookup(x, ofm, table.astype(ofm.dtype).tobytes(), f"{v.index}:{v.opcode}(table)", (v.index,)))
        return True

    def _expand_channels(self, v: OperatorView, x: FeatureMapView, channels: int) -> FeatureMapView:
        """`x` (H x W x 1, 8-bit) repeated along `channels` channels: a 1x1 convolution of raw
        codes with unit weights and scale, exact. Returns the repeated map, in x's quantization."""
        if x.dtype not in ("int8", "uint8"):
            raise UnsupportedError(f"operator {v.index} ({v.opcode}): both operands broadcast, and the one "
                                   f"without channels is {x.dtype}")
        h, w, _ = x.shape
        out = self.scratch(v.index, "channels", (h, w, channels), x.dtype, x.zero_point, x.scale)
        volume = WeightVolume(np.ones((channels, 1, 1, 1), np.int32), np.zeros(channels, np.int64),
                              np.zeros(channels, np.int64), channel_scales(1, 0, channels), False)
        registers = dict(kernel=kernel_record(1, 1), padding=(0, 0, 0, 0), activation=full_range(x.dtype),
                         rounding="TFL", global_scale=False, ofm_scale=(0, 0), acc_format=0)
        self.add(LoweredOperation("conv", "conv2d", f"{v.index}:{v.opcode}(channels)", (v.index,),
                                  replace(x, zero_point=0), replace(out, zero_point=0), weights=volume,
                                  registers=registers))
        return out

    def _int32_elementwise(self, v: OperatorView, mode: str, a: FeatureMapView, b: FeatureMapView,
                           ofm: FeatureMapView) -> None:
        """int32 ADD, SUB, MUL: TFLite's int32 kernels compute on the integers themselves
        (quantization ignored), and so does the NPU's 32-bit elementwise unit with unit scales.
        The NPU does not clamp 32-bit outputs, so a fused activation stays on the CPU."""
        if {a.dtype, b.dtype, ofm.dtype} != {"int32"}:
            raise UnsupportedError(f"operator {v.index} ({v.opcode}): mixes int32 with {a.dtype}/{b.dtype}/{ofm.dtype}")
        if v.fused_activation not in (None, "NONE"):
            raise UnsupportedError(f"operator {v.index} ({v.opcode}): a fused {v.fused_activation} on int32 (the NPU "
                                   "does not clamp 32-bit outputs)")
        plain = lambda x: replace(x, zero_point=0, scale=1.0)  # noqa: E731
        a, b, ofm = plain(a), plain(b), plain(ofm)
        broadcast_order(v, a, b, ofm)  # one operand has the output's shape, the other broadcasts
        OperationBuilder(self, v.index, v.opcode).elementwise(mode, a, b, ofm)

    def _add(self, v: OperatorView) -> None:
        self._elementwise(v, "ADD")

    def _sub(self, v: OperatorView) -> None:
        self._elementwise(v, "SUB")

    def _mul(self, v: OperatorView) -> None:
        self._elementwise(v, "MUL")

    def _concatenation(self, v: OperatorView) -> None:
        ofm = self.view(v.op.outputs[0])
        rank = len(v.ofm.shape)
        axis = v.options.get("axis", -1) % rank
        # The axis in the NPU's H, W, C view of the output.
        hwc_axis = axis + (3 - rank) if rank <= 3 else axis - 1
        if rank == 4 and axis == 0:
            raise UnsupportedError(f"operator {v.index}: concatenation along the batch")
        clamp = fused_clamp(v)
        start = 0
        for t in v.op.inputs:
            src = self.view(t)
            if t in self.slices:  # its producer already wrote it there
                start += src.shape[hwc_axis]
                continue
            shape = list(ofm.shape)
            shape[hwc_axis] = src.shape[hwc_axis]
            if tuple(shape) != src.shape:
                raise UnsupportedError(f"operator {v.index}: input {self.graph.tensors[t].name!r} does not fit its slice")
            offset = start * ofm.strides[hwc_axis]
            dst = replace(ofm, shape=tuple(shape), offset=ofm.offset + offset)
            self.copy(v.index, f"{v.index}:CONCATENATION[{t}]", src, dst, clamp)
            start += src.shape[hwc_axis]

    def _pad(self, v: OperatorView) -> None:
        src, dst = self.view(v.op.inputs[0]), self.view(v.op.outputs[0])
        pads = np.asarray(self.graph.tensors[v.op.inputs[1]].data).reshape(-1, 2)
        rank = len(v.ofm.shape)
        if rank == 4 and pads[0].any():
            raise UnsupportedError(f"operator {v.index}: PAD along the batch")
        hwc = [(0, 0)] * (3 - min(rank, 3)) + [tuple(int(p) for p in row) for row in pads[-3:]]
        pad_value = dst.zero_point
        if len(v.op.inputs) > 2 and v.op.inputs[2] >= 0:  # PADV2's constant
            pad_value = int(np.asarray(self.graph.tensors[v.op.inputs[2]].data).reshape(-1)[0])
        h, w, c = dst.shape
        (top, _), (left, _), (front, _) = hwc
        interior = dst.offset + top * dst.strides[0] + left * dst.strides[1] + front * dst.strides[2]
        self.copy(v.index, f"{v.index}:PAD", src, replace(dst, shape=src.shape, offset=interior), requantize=False)
        # The border: up to six boxes around the interior, filled from a constant.
        boxes = []
        (t0, t1), (l0, l1), (c0, c1) = hwc
        sh, sw, sc = src.shape
        if t0:
            boxes.append(((0, 0, 0), (t0, w, c)))
        if t1:
            boxes.append(((h - t1, 0, 0), (t1, w, c)))
        if l0:
            boxes.append(((t0, 0, 0), (sh, l0, c)))
        if l1:
            boxes.append(((t0, w - l1, 0), (sh, l1, c)))
        if c0:
            boxes.append(((t0, l0, 0), (sh, sw, c0)))
        if c1:
            boxes.append(((t0, l0, c - c1), (sh, sw, c1)))
        for origin, shape in boxes:
            fill = self.fill(pad_value, dst, shape)
            offset = dst.offset + sum(o * s for o, s in zip(origin, dst.strides))
            self.copy(v.index, f"{v.index}:PAD(border)", fill, replace(dst, shape=shape, offset=offset),
                      requantize=False)

    def fill(self, value: int, like: FeatureMapView, shape: tuple[int, int, int]) -> FeatureMapView:
        """A constant feature map of `shape` holding `value` everywhere, in flash. One constant
        per value and type serves every fill, grown to the largest; its id is negative, apart
        from the tensor indices."""
        size = like.element_size
        dtype = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16}[like.dtype]
        key = (value, like.dtype)
        if key not in self.fill_constants:
            self.fill_constants[key] = self.next_pseudo
            self.next_pseudo -= 1
        buffer = self.fill_constants[key]
        if len(self.constants.get(buffer, b"")) < math.prod(shape) * size:
            self.constants[buffer] = np.full(math.prod(shape), value, dtype=dtype).tobytes()
        return FeatureMapView(buffer, shape, like.dtype, like.zero_point, like.scale, dense_strides(shape, size))

    def _quantize(self, v: OperatorView) -> None:
        src, dst = self.view(v.op.inputs[0]), self.view(v.op.outputs[0])
        self.copy(v.index, f"{v.index}:QUANTIZE", src, dst)

    def _clamp_op(self, v: OperatorView) -> None:
        src, dst = self.view(v.op.inputs[0]), self.view(v.op.outputs[0])
        lo, hi = CLAMP_OPS[v.opcode]
        self.copy(v.index, f"{v.index}:{v.opcode}", src, dst, clamp_record(v.ofm, lo, hi))

    _relu = _relu6 = _relu_n1_to_1 = _relu_0_to_1 = _clamp_op
    _softmax = lower_softmax
    _logistic = _tanh = _exp = _hard_swish = _rsqrt = lower_lut

    def _leaky_relu(self, v: OperatorView) -> None:
        (lower_leaky_relu_int16 if v.ifm is not None and v.ifm.dtype == "int16" else lower_lut)(self, v)
    _prelu = lower_prelu
    _minimum = _maximum = lower_min_max
    _squared_difference = lower_squared_difference
    _arg_max = lower_arg_max
    _abs = lower_abs
    _transpose_conv = lower_transpose_conv
    _mirror_pad = lower_mirror_pad
    _strided_slice = _slice = _split = _split_v = _unpack = lower_slice
    _transpose = lower_transpose
    _pack = lower_pack
    _mean = lower_reduce
    _resize_nearest_neighbor = lower_resize_nearest
    _resize_bilinear = lower_resize_bilinear

    # --- result -----------------------------------------------------------------------------

    def _choose_layouts(self, cpu_visible: set[int], buffers: dict[int, int]) -> None:
        """NHCWB16 for every buffer only the NPU sees, every operation views whole, and whose
        depth is a multiple of 16.

        The NPU reads and writes 16-channel bricks fastest (the cycle model agrees: a strided
        NHWC depthwise costs up to twice as much). The CPU needs NHWC, and so do views that
        are not the whole buffer in its own shape (reshapes, concatenation slices, padding
        interiors), whose addresses assume the dense layout.
        """
        whole: dict[int, bool] = {}
        for op in self.ops:
            for v in (op.ifm, op.ifm2, op.ofm):
                if v is None or v.buffer in self.constants:
                    continue
                natural, _ = self.natural(v.buffer)
                whole[v.buffer] = whole.get(v.buffer, True) and v.offset == 0 and v.shape == natural
        # Bricks of a depth that is not a multiple of 16 carry padding the NPU reads and writes
        # too. Up to a third of padding (24 as 32) they were once kept for the faster
        # depthwise, but over the shared models (u55-128, u65-256) the cycles came out the same
        # (geometric mean 0.918 of Vela's either way) while SRAM fell (MobileNetV1-0.75 738 ->
        # 665 KiB uncascaded; MobileNetV2-224's least cascaded SRAM 323 -> 301 KiB). Where a
        # target does run them faster (U65-512), a Performance compile stores them so
        # (`brick_layout`, which knows the target; the lowering does not).
        # A map whose bricks fit the 16-byte rounding of its dense size (a 1x1x8 vector) costs
        # nothing more as bricks, and keeping it NHWC between NHCWB16 neighbours would only add
        # layout register writes to the command stream.
        def free_padding(b: int) -> bool:
            (h, w, c), dtype = self.natural(b)
            e = ELEMENT_SIZE[dtype]
            return round16(c) == c or h * w * round16(c) * e <= (h * w * c * e + 15) // 16 * 16

        brick = {b for b, ok in whole.items() if ok and b not in cpu_visible and free_padding(b)}
        for b in brick:
            (h, w, c), dtype = self.natural(b)
            buffers[b] = h * w * round16(c) * ELEMENT_SIZE[dtype]

        def convert(v: FeatureMapView | None) -> FeatureMapView | None:
            if v is None or v.buffer not in brick:
                return v
            return replace(v, layout="NHCWB16", strides=brick_strides(v.shape, v.element_size))

        for op in self.ops:
            op.ifm, op.ifm2, op.ofm = convert(op.ifm), convert(op.ifm2), convert(op.ofm)

    def _flatten_copies(self) -> None:
        """Stream 1x1 copies of dense NHWC maps 16 channels wide.

        A per-element copy (a requantization, a table lookup) only needs both sides to hold the
        same elements in the same order: a 224 x 224 x 3 input is as well a 168 x 56 x 16 one,
        and the NPU moves 16 channels per step where it moved 3 (2.7x fewer cycles, Vela does
        the same). Runs after the layout choice, so no other operation's view changes.
        """
        for op in self.ops:
            if not is_dense_copy(op):
                continue
            n = math.prod(op.ifm.shape)
            if op.ifm.shape[2] % 16 == 0 or n % 16:
                continue
            # The widest rows; the schedule may pick another shape for its accelerator.
            w = stream_widths(n // 16)[0]
            streamed = with_copy_shape(op, (n // 16 // w, w, 16))
            op.ifm, op.ofm = streamed.ifm, streamed.ofm

    def _segment(self) -> LoweredSegment:
        tensors = self.graph.tensors
        buffers: dict[int, int] = {}
        aliases: dict[int, int] = {}
        produced: set[int] = set()
        ifms: list[int] = []
        ofms: list[int] = []
        for i in self.operators:
            op = self.graph.operators[i]
            for t in op.inputs:
                if t < 0 or tensors[t].is_constant:
                    continue
                if t not in produced and t not in ifms:
                    ifms.append(t)
            for t in op.outputs:
                produced.add(t)
        for i in self.operators:
            for t in self.graph.operators[i].outputs:
                outside = any(c not in self.members for c in self.consumers.get(t, []))
                if (outside or t in self.graph.outputs) and t not in ofms:
                    ofms.append(t)
        for t in {*ifms, *produced}:
            b = self.buffer(t)
            if b in self.fused_away:
                continue  # a table lookup's input, now looked up by its producer
            aliases[t] = b
            buffers[b] = max(buffers.get(b, 0), tensors[b].nbytes)
        for b, (_, (h, w, c), dtype) in self.scratch_buffers.items():
            aliases[b] = b
            buffers[b] = h * w * c * ELEMENT_SIZE[dtype]
        self._choose_layouts({aliases[t] for t in (*ifms, *ofms)}, buffers)
        self._flatten_copies()
        return LoweredSegment(self.operators, self.ops, buffers, aliases, tuple(ifms), tuple(ofms), self.constants,
                              {b: name for b, (name, _, _) in self.scratch_buffers.items()},
                              {b: self.natural(b)[0] for b in buffers})


def lower_segment(graph: SubGraph, operators: tuple[int, ...], removed: Collection[int] = ()) -> LoweredSegment:
    """Lower the operators of one NPU segment (in execution order). `removed`: the
    partition's operators that do not run (`Partition.removed`): what they read is not read.

    Raises
    ------
    UnsupportedError
        An operator, data type, shape or quantization this lowering cannot express; the
        message names the operator.
    """
    return _Lowering(graph, tuple(operators), frozenset(removed)).run()
