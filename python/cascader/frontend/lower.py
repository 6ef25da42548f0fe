"""Lowering: the operators of one NPU segment -> register-level NPU operations.

Each TFLite operator becomes zero or more `LoweredOperation`s, whose `registers` are the
placement-independent fields of the operation record `cascader.sim.decode` returns (kind,
kernel, padding, activation, rounding, scales...): the emitter adds addresses, block config and
weight streams, and encodes exactly that record, so a decode of our binary gives back the same
values.

This module is the core that every operator shares; what each operator becomes is its rule's
business (`lowering_rules.LOWERING_RULES`, one `lower_*` module per family), and the rules see
the core only through `lowering_context.LoweringContext`. The core:

- walks the segment: RESHAPE, SQUEEZE and EXPAND_DIMS become aliases of their input's buffer;
  a PAD that every reader can take as its own padding is folded into them; slicing outputs
  that only view-readers read become views of their input (`lower_movement.plan_slice_views`);
  a concatenation input's producer writes straight into its slice when nothing else needs it,
  and so does a one-axis PAD's input's producer into the padded interior (`_slice_pads`); a MUL
  of a map by a table lookup of it is one lookup (`self_product_fusion`); then each remaining
  operator goes to its rule;
- owns the buffers and the views of tensors in them, the scratch buffers a rule asks for, and
  the constants it makes (in flash);
- finishes the segment: table lookups fused into their producers (`lut_fusion`), 16-channel
  bricks for the buffers only the NPU sees, dense copies streamed 16 channels wide.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from functools import cached_property

import numpy as np

from ..arch import Accelerator
from ..errors import UnsupportedError
from ..evolve import evolve
from ..tflite.model import SubGraph, Tensor
from .lower_movement import SLICE_OPS, box_view, hwc_axis, plan_slice_views
from .lowered import (
    ELEMENT_SIZE,
    FeatureMapView,
    LoweredOperation,
    TYPE_RANGE,
    LoweredSegment,
    brick_strides,
    dense_strides,
    is_dense_copy,
    round16,
    stream_widths,
    views_whole_nhwc,
    with_copy_shape,
)
from .lowering_context import Box
from .self_product_fusion import lower_self_product, plan_self_products
from .lowering_rules import LOWERING_RULES
from .column_fold import fold_columns
from .depthwise_copies import convert_copies
from .lut_fusion import fuse_table_lookups
from .operation_builder import MAX_PADDING
from .operator_view import ALIAS_OPS, OperatorView

SCRATCH_IDS = 1 << 16  # scratch buffer ids per operator (an unrolled LSTM takes a few per time step)


def _hwc(t: Tensor, fold_batch: bool = False) -> tuple[int, int, int]:
    """`t` in the NPU's H x W x C; `fold_batch`: leading axes (a batch above 1, a fifth axis)
    folded into H, for a buffer whose operations view it in shapes of their own (BATCH_MATMUL)."""
    shape = tuple(map(int, t.shape))
    if fold_batch and len(shape) >= 4:
        return math.prod(shape[:-2]), shape[-2], shape[-1]
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


def map_dtype(dtype: str) -> str:
    """The feature-map type of a tensor of TFLite type `dtype`: its own, but a bool's is uint8,
    TFLite's bool being one byte of 0 or 1 (the rules that take bools say what they make of it)."""
    return "uint8" if dtype == "bool" else dtype


def _quant(t: Tensor) -> tuple[float, int]:
    q = t.quantization
    if q is None or q.scale.size == 0:
        if t.dtype in ("int32", "int64", "bool"):
            return 1.0, 0  # plain integers (indices, shapes) and truth values: their kernels ignore quantization
        raise UnsupportedError(f"tensor {t.name!r} is not quantized")
    return float(q.scale[0]), int(q.zero_point[0])


class _Lowering:
    """One segment's lowering in progress: the walk, and the state it shares with the rules
    (which see it as a `LoweringContext`)."""

    def __init__(self, graph: SubGraph, operators: tuple[int, ...], removed: frozenset[int] = frozenset(),
                 least_scratch: bool = False, accelerator: str | None = None, channel_planes: bool = False,
                 cost: Callable[[str, set[int], list, bool], float] | None = None) -> None:
        self.graph = graph
        self.cost = cost
        self.least_scratch = least_scratch
        self.accelerator = accelerator
        self.scaled_operands = self.matmul_from_ifm2 = Accelerator.is_u85(accelerator)
        self.channel_planes = channel_planes
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
        # tensors, SCRATCH_IDS per operator, so that every segment's ids are distinct.
        self.scratch_buffers: dict[int, tuple[str, tuple[int, int, int], str]] = {}
        self.persistent: set[int] = set()  # scratch buffers that outlive an inference (state)
        self.resident_buffers: dict[int, str] = {}  # buffers at one arena offset across inferences -> variable key
        # Slicing outputs read in place: tensor -> its box of the sliced tensor.
        self.subviews: dict[int, Box] = {}
        # Buffers every operation views in another shape than their tensor's (`fold_columns`).
        self.reshaped: dict[int, tuple[int, int, int]] = {}
        # `natural` of the tensors' buffers: the layout choice asks some five times per operation.
        self.tensor_naturals: dict[int, tuple[tuple[int, int, int], str]] = {}
        # `_tensor_map` of the tensors viewed in their own shape: each is viewed by its producer
        # and by every reader.
        self.tensor_maps: dict[int, tuple] = {}

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
            return evolve(parent, shape=hwc, offset=parent.offset + start * parent.strides[axis])
        if shape is None:
            known = self.tensor_maps.get(t)
            if known is None:
                known = self.tensor_maps[t] = self._tensor_map(t, None)
        else:
            known = self._tensor_map(t, shape)
        hwc, dtype, zp, scale, strides = known
        tensor = self.graph.tensors[t]
        if tensor.is_constant:
            self.constants[t] = np.ascontiguousarray(tensor.data).tobytes()
        return FeatureMapView(self.buffer(t), hwc, dtype, zp, scale, strides)

    def _tensor_map(self, t: int, shape: tuple[int, int, int] | None) -> tuple:
        """Tensor `t` as a dense map: (H x W x C, or `shape`; type; zero point; scale; strides)."""
        tensor = self.graph.tensors[t]
        scale, zp = _quant(tensor)
        hwc = shape or _hwc(tensor)
        dtype = map_dtype(tensor.dtype)
        if dtype not in TYPE_RANGE and dtype not in ("int32", "int64"):
            raise UnsupportedError(f"tensor {tensor.name!r} is {tensor.dtype}; the NPU path takes int8, uint8, int16 "
                                   "(and int32, int64 and bool where the operator's rule does)")
        return hwc, dtype, zp, scale, dense_strides(hwc, ELEMENT_SIZE[dtype])

    def scratch(self, index: int, name: str, shape: tuple[int, int, int], dtype: str,
                zero_point: int = 0, scale: float = 1.0) -> FeatureMapView:
        """A new buffer only this segment's operations use, for the intermediate results of
        operator `index`'s lowering."""
        b = len(self.graph.tensors) + SCRATCH_IDS * index
        while b in self.scratch_buffers:
            b += 1
        if b >= len(self.graph.tensors) + SCRATCH_IDS * (index + 1):
            raise UnsupportedError(f"operator {index} needs more than {SCRATCH_IDS} scratch buffers")
        self.scratch_buffers[b] = (f"{self.graph.tensors[self.graph.operators[index].outputs[0]].name}/{name}",
                                   shape, dtype)
        return FeatureMapView(b, shape, dtype, zero_point, scale, dense_strides(shape, ELEMENT_SIZE[dtype]))

    def state(self, index: int, name: str, shape: tuple[int, int, int], dtype: str) -> FeatureMapView:
        """A scratch buffer in the persistent arena: it keeps its bytes from one inference to
        the next and starts at zero (TFLM zero-fills the arena when it allocates it)."""
        view = self.scratch(index, name, shape, dtype)
        self.persistent.add(view.buffer)
        return view

    def resident(self, buffer: int, name: str, like: Tensor) -> FeatureMapView:
        """Buffer `buffer` with `like`'s shape, type and quantization, at one offset of the
        scratch arena across inferences (a resource variable); registered once."""
        hwc, dtype = _hwc(like), map_dtype(like.dtype)
        if dtype not in ELEMENT_SIZE:
            raise UnsupportedError(f"tensor {like.name!r} is {like.dtype}; no NPU map holds it")
        self.scratch_buffers.setdefault(buffer, (name, hwc, dtype))
        self.resident_buffers[buffer] = name
        scale, zp = _quant(like)
        return FeatureMapView(buffer, hwc, dtype, zp, scale, dense_strides(hwc, ELEMENT_SIZE[dtype]))

    def constant(self, values: np.ndarray, dtype: str) -> FeatureMapView:
        """A constant feature map in flash (a 1 x 1 x N vector of `values`)."""
        data = np.asarray(values, dtype=dtype).reshape(-1)
        b = self.next_pseudo
        self.next_pseudo -= 1
        self.constants[b] = data.tobytes()
        shape = (1, 1, data.size)
        return FeatureMapView(b, shape, dtype, 0, 1.0, dense_strides(shape, ELEMENT_SIZE[dtype]))

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

    def natural(self, b: int) -> tuple[tuple[int, int, int], str]:
        """A buffer's own shape and type: its tensor's, or a scratch buffer's."""
        if b in self.scratch_buffers:
            _, shape, dtype = self.scratch_buffers[b]
            return shape, dtype
        natural = self.tensor_naturals.get(b)
        if natural is None:
            t = self.graph.tensors[b]
            natural = self.tensor_naturals[b] = _hwc(t, fold_batch=True), map_dtype(t.dtype)
        return natural

    # --- operations -------------------------------------------------------------------------

    def add(self, op: LoweredOperation) -> None:
        self.ops.append(op)

    # --- the walk ---------------------------------------------------------------------------

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
        self._slice_pads()
        # A MUL of a map by a table lookup of it (SiLU) is one lookup: the unary does not run.
        self_products = plan_self_products(self.graph, self.operators, self.consumers)
        self.skipped |= set(self_products.values())
        self.fused_away |= {self.graph.operators[i].outputs[0] for i in self_products.values()}
        for i in self.operators:
            if i in self.skipped:
                continue
            view = OperatorView(self.graph, i)
            if view.opcode in ALIAS_OPS:
                continue
            rule = LOWERING_RULES.get(view.opcode)
            try:
                if i in self_products:
                    lower_self_product(self, view, OperatorView(self.graph, self_products[i]))
                    continue
                if rule is None:
                    raise UnsupportedError(f"operator {i} ({view.opcode}) has no NPU lowering")
                rule(self, view)
            except UnsupportedError as e:
                e.operator = i  # the compiler sends this operator to the CPU and tries again
                raise
        self.fused_away |= fuse_table_lookups(self)
        fold_columns(self)
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
            if self.graph.operators[i].opcode != "CONCATENATION":
                continue
            v = OperatorView(self.graph, i)
            if v.fused_activation != "NONE":
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

    def _slice_pads(self) -> None:
        """Let the producer of a PAD's input write it in place, into the padded output's interior
        (`lower_pad` then writes only the border), as a concatenation's slice, when the PAD pads
        one axis (a slice is along one), nothing else reads the input and the PAD copies codes as
        they are (one quantization). openmv palm_detection's channel pads after its max pools: the
        interior's copy was 73,814 of 17.5 million cycles on U85-128 at 48 x 48 x 32."""
        producer = {t: i for i in self.operators for t in self.graph.operators[i].outputs}
        for i in self.operators:
            op = self.graph.operators[i]
            if (op.opcode not in ("PAD", "PADV2") or i in self.skipped
                    or not self.graph.tensors[op.inputs[1]].is_constant):
                continue
            t, out = op.inputs[0], op.outputs[0]
            pads = np.asarray(self.graph.tensors[op.inputs[1]].data).astype(np.int64).reshape(-1, 2)
            padded = [k for k in range(len(pads)) if pads[k].any()]
            if len(pads) > 4 or len(padded) != 1 or hwc_axis(len(pads), padded[0]) is None:
                continue
            tensor, p = self.graph.tensors[t], producer.get(t)
            if (p is None or tensor.is_constant or self.consumers.get(t) != [i] or t in self.graph.outputs
                    or t in self.root or t in self.slices or t in self.subviews
                    or self.graph.operators[p].opcode in ALIAS_OPS | SLICE_OPS | {"CONCATENATION", "PAD", "PADV2"}
                    or tensor.quantization is None or tensor.quantization.scale.size == 0
                    or _quant(tensor) != _quant(self.graph.tensors[out])):
                continue
            self.slices[t] = (out, hwc_axis(len(pads), padded[0]), int(pads[padded[0]][0]))

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
                if v is None or v.buffer in self.constants or not whole.get(v.buffer, True):
                    continue  # a constant, or a buffer some view already keeps NHWC
                natural, _ = self.natural(v.buffer)
                # An OFM the U85 writes transposed is addressed through its NHWC strides, in
                # the map's own shape too where the permutation keeps it (a square transpose);
                # a DMA's rows are bytes of the dense layout (lower_indexed_dma).
                transposed = v is op.ofm and "ofm_transpose" in op.registers
                whole[v.buffer] = views_whole_nhwc(v, natural) and not transposed and op.kind != "dma"
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
        brick -= self._overwritten_in_place(brick, cpu_visible)
        for b in brick:
            (h, w, c), dtype = self.natural(b)
            buffers[b] = h * w * round16(c) * ELEMENT_SIZE[dtype]

        def convert(v: FeatureMapView | None) -> FeatureMapView | None:
            if v is None or v.buffer not in brick:
                return v
            return evolve(v, layout="NHCWB16", strides=brick_strides(v.shape, v.element_size))

        for op in self.ops:
            op.ifm, op.ifm2, op.ofm = convert(op.ifm), convert(op.ifm2), convert(op.ofm)

    def _overwritten_in_place(self, brick: set[int], cpu_visible: set[int]) -> set[int]:
        """Buffers of `brick` kept NHWC so that an elementwise OFM can be written over them.

        An elementwise operation whose OFM must stay NHWC (another operation re-views it: a
        MEAN over H and W reads it as one row) can write it over an operand it reads for the
        last time only when both are stored alike (`schedule._in_place_elementwise`). Stored as
        bricks, the operand and the OFM are two buffers at that step: zoo attention_pooling's
        MUL held its 4 KiB bricks beside its 4 KiB NHWC output, its least SRAM's peak (8,256 B,
        as Vela's Size). NHWC never takes more bytes than bricks.
        """
        last_read: dict[int, int] = {}
        for k, op in enumerate(self.ops):
            for v in (op.ifm, op.ifm2):
                if v is not None:
                    last_read[v.buffer] = k
        kept: set[int] = set()
        for k, op in enumerate(self.ops):
            out = op.ofm.buffer
            if op.kind != "elementwise" or out in brick or out in cpu_visible or op.ofm.offset:
                continue
            (shape, dtype) = self.natural(out)
            for v in (op.ifm, op.ifm2):
                if (v is not None and v.buffer in brick and last_read.get(v.buffer) == k and v.shape == op.ofm.shape
                        and self.natural(v.buffer) == (shape, dtype)):
                    kept.add(v.buffer)
                    break
        return kept

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

    def cpu_visible(self) -> set[int]:
        """The buffers of the tensors the CPU hands in and reads back (`_boundary`)."""
        ifms, ofms = self._boundary
        return {self.buffer(t) for t in (*ifms, *ofms)}

    def cycles(self, operations: list, weights: bool = False, staged: bool = False) -> float | None:
        if self.cost is None or self.accelerator is None:
            return None
        return self.cost(self.accelerator, set() if staged else self.cpu_visible(), operations, weights)

    @cached_property
    def _boundary(self) -> tuple[list[int], list[int]]:
        """The segment's IFMs (read, produced outside it) and OFMs (read outside it, or model
        outputs), in order of first use. Made once: the segment's operators and their readers
        are fixed, and the cycle model (`cycles`) asks for them at each rewrite it weighs."""
        tensors = self.graph.tensors
        produced: set[int] = set()
        ifms: list[int] = []
        ofms: list[int] = []
        for i in self.operators:
            op = self.graph.operators[i]
            for t in op.inputs:
                # A variable tensor (an LSTM's state) is not handed in: the NPU keeps that state
                # in its own persistent buffers (`LoweringContext.state`).
                if t < 0 or tensors[t].is_constant or tensors[t].is_variable:
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
        return ifms, ofms

    def _segment(self) -> LoweredSegment:
        buffers: dict[int, int] = {}
        aliases: dict[int, int] = {}
        ifms, ofms = self._boundary
        produced = {t for i in self.operators for t in self.graph.operators[i].outputs}
        tensors = self.graph.tensors
        for t in {*ifms, *produced}:
            b = self.buffer(t)
            if b in self.fused_away:
                continue  # a table lookup's input, now looked up by its producer
            if b in self.resident_buffers:
                aliases[t] = b  # a variable's handle or an alias of its bytes: sized below
                continue
            aliases[t] = b
            buffers[b] = max(buffers.get(b, 0), tensors[b].nbytes)
        for b, (_, (h, w, c), dtype) in self.scratch_buffers.items():
            aliases[b] = b
            buffers[b] = h * w * c * ELEMENT_SIZE[dtype]
        # A variable stays dense, as the CPU sees maps: its copies in and out view its bytes.
        self._choose_layouts({aliases[t] for t in (*ifms, *ofms)} | set(self.resident_buffers), buffers)
        self._flatten_copies()
        convert_copies(self)
        return LoweredSegment(self.operators, self.ops, buffers, aliases, tuple(ifms), tuple(ofms), self.constants,
                              {b: name for b, (name, _, _) in self.scratch_buffers.items()},
                              {b: self.reshaped.get(b) or self.natural(b)[0] for b in buffers}, frozenset(self.persistent),
                              dict(self.resident_buffers))


def lower_segment(graph: SubGraph, operators: tuple[int, ...], removed: Collection[int] = (),
                  least_scratch: bool = False, accelerator: str | None = None,
                  channel_planes: bool = False, cost: Callable[[str, set[int], list, bool], float] | None = None
                  ) -> LoweredSegment:
    """Lower the operators of one NPU segment (in execution order). `removed`: the
    partition's operators that do not run (`Partition.removed`): what they read is not read.
    `least_scratch`: where a rule trades scratch SRAM for cycles, take the least scratch
    (`LoweringContext.least_scratch`). `accelerator`: the target, for the rules that lower
    otherwise where it has a mechanism of its own (`LoweringContext.accelerator`).
    `channel_planes`: transposes as per-channel planes where they can be
    (`LoweringContext.channel_planes`). `cost`: the cycle model, (accelerator, CPU-visible
    buffers, operations, with raw weight sizes) -> cycles, for the rules that choose between lowerings by it
    (`LoweringContext.cycles`; `schedule.operation_cycles`, which the frontend cannot import).

    Raises
    ------
    UnsupportedError
        An operator, data type, shape or quantization this lowering cannot express; the
        message names the operator.
    """
    return _Lowering(graph, tuple(operators), frozenset(removed), least_scratch, accelerator, channel_planes,
                     cost).run()
