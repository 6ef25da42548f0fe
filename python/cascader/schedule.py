"""The schedule: what runs on the NPU, in which order, with which block config, over which buffers.

A `NpuSchedule` is the value every later stage consumes (memory layout, emission). The
uncascaded scheduler here fills it with one whole-tensor stripe per lowered operation; the
cascading planner fills the same type with stripes, rolling buffers and DMAs. Block configs,
traversals and whether a convolution's weights are first copied into SRAM come from the cycle
model (`cascader.estimate_op`), the same model the estimator costs binaries with, so the choice
and the report cannot disagree.

Weights are encoded here, not at emission: the encoded size is what the cycle model and the
memory planner (a weight buffer's size) need, and it depends only on the block config and the
traversal, never on an address. Only the sizes are made here; a stream's bytes are written
when a binary emits it (`EncodedWeights.data`).
"""

from __future__ import annotations

import collections
import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any, Collection, Iterator, NamedTuple, Sequence

import numpy as np

from . import _core
from . import memory as mem
from .arch import Accelerator, arch_config
from .emit import ethos_u85
from .emit.weights import encode_weights, queue_weights
from .evolve import evolve
from .frontend.lower_indexed_dma import dma_spans
from .frontend.lower_ofm_transpose import transposed_description
from .frontend.lower_u85_resize import resize_description
from .frontend.lowered import (ELEMENT_SIZE, dense_strides, is_dense_copy, stream_widths, with_copy_shape, SIGMOID_FUNCTION, TANH_FUNCTION, FeatureMapView, LoweredOperation,
                               LoweredSegment, position_reads_all, round16)
from .input_staging import staged, staged_key, unstaged
from .perf import OpCost, _memory, cost_from_core, npu_op, set_block_config
from .tflite.model import SubGraph
from .workers import capped_workers, shared_pool


@dataclass
class ScheduledOperation:
    """One NPU operation with its hardware choices.

    `encoded` holds the weight and scale streams (None without weights). With
    `weight_buffer`, a DMA copies them from flash into an SRAM buffer just before the
    operation (it runs under the previous operation) and the NPU reads them there.
    """

    lowered: LoweredOperation
    block: tuple[int, int, int]  # OFM block height, width, depth
    part_kernel_first: bool
    cost: OpCost
    encoded: Any = None  # cascader.emit.weights.EncodedWeights
    weight_buffer: bool = False
    direct_cost: OpCost | None = None  # with weight_buffer: the cost reading the weights from flash
    # With weight_buffer: 0 copies the whole streams before the operation; N > 0 splits the OFM
    # depth into slices of N channels, each its own stream, DMA'd into alternating halves of a
    # double buffer while the previous slice computes (one NPU operation per slice).
    depth_step: int = 0
    # With depth_step: one slot instead of two. Each slice's DMA then waits for the previous
    # slice's kernel (serial), for a third of the SRAM where no double buffer fits: Vela's
    # Size binary of MobileNetV1-0.75 at 353 x 481 on U55-128 copies its last 768 x 768
    # pointwise 16 channels at a time into 11.5 KB, which reads its weights from flash 23 times
    # otherwise (3.4M cycles instead of 12.8M).
    single_slot: bool = False
    direct_encoded: Any = None  # with depth_step: the unsliced streams, for reading from flash
    # In a cascade: its index in the proposal, and the whole-tensor operation this one computes
    # a band of rows of (reports group the stripes of one operation by it).
    cascade: int | None = None
    stripe_of: LoweredOperation | None = None
    # The key of a weight buffer the stripes of one operation share: its first stripe copies
    # the streams in (`weight_buffer`), the later ones read them there.
    shared_weights: Any = None
    # A constant IFM2 (it lives in flash): "flash" when the operation reads it there, "copy" when
    # a DMA copies it into the fast memory just before the operation (`copy_cycles`: that DMA;
    # see broadcast_constant); "" when the IFM2 is no constant.
    constant_ifm2: str = ""
    copy_cycles: float = 0.0
    # The IFM, a map the CPU hands in (in the slow arena), copied by a DMA into the fast memory
    # just before the operation, which reads it there: that DMA's cycles (0: read in place; see
    # input_staging). `cost` (and `direct_cost`) cost the operation reading the copy.
    staged_cycles: float = 0.0
    # Ethos-U85 chaining (u85_chaining): this operation's maps in a chaining buffer, each with
    # the buffer's number: ("ofm", n) when its OFM stays in buffer n for the next operation of
    # the chain, ("ifm", n)/("ifm2", n) for the operand it reads from there; () otherwise. A chain
    # is costed as its first operation (the later ones' `cost` is none); `unchained_cost`: each
    # one's cost apart.
    chain: tuple[tuple[str, int], ...] = ()
    unchained_cost: OpCost | None = None

    @property
    def stripe_block_depth(self) -> int:
        """The OFM block depth a stripe of this operation must use (0: any): its weight stream
        is encoded for the operation's block depth. The planner costs stripes with it and the
        emitted stripes use it, so the two agree."""
        return self.block[2] if self.encoded is not None else 0


@dataclass
class SegmentSchedule:
    """One NPU segment (one `ethos-u` operator) in execution order."""

    segment: LoweredSegment
    operations: list[ScheduledOperation]


@dataclass
class NpuSchedule:
    """The whole inference: NPU segments and CPU operators in execution order.

    `order` lists ``("npu", k)`` for `segments[k]` and ``("cpu", i)`` for CPU operator i.
    """

    segments: list[SegmentSchedule]
    order: list[tuple[str, int]]
    accelerator: str
    system: str | None = None
    memory_mode: str | None = None
    notes: list[str] = field(default_factory=list)
    # The layout may write a lone operation's OFM over the IFM it consumes
    # (`_overlapping_operations`): the least-SRAM variant's (`with_overlapping_blocks`). Off
    # elsewhere: the planner's memory bound counts such a pair apart, and a layout below that
    # bound would break the frontier's promise and its lower-bound pruning.
    overlapping: bool = False
    # With `overlapping`: the positions (in `operations`) of the operations offered to the
    # layout written over their IFMs, chained (an OFM written over an IFM that was itself
    # written over its own), each tie the layout's to keep or break, not only those at the
    # feature maps' peak; empty: those `_overlapping_operations` picks. The variant a budgeted
    # compile makes room for weight buffers with (`with_weight_room`): a buffer's DMA runs
    # beside the operation before its own, not where the maps peak.
    overlap_chains: frozenset[int] = frozenset()
    # The cycle model's target the scheduler costed these operations with, and its
    # descriptions of them (see `_Target.of`): the planner and the budgeted compile cost the
    # same operations again.
    target: "_Target | None" = field(default=None, compare=False, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        # The target holds core objects, which do not pickle; `_Target.of` makes one again.
        return {**self.__dict__, "target": None}

    @property
    def operations(self) -> list[ScheduledOperation]:
        return [op for s in self.segments for op in s.operations]

    @property
    def total_cycles(self) -> float:
        """The schedule's cycles as the cycle model predicts them (the binary's estimate agrees)."""
        return float(sum(op.cost.total_cycles + op.copy_cycles + op.staged_cycles for op in self.operations))


class _Target:
    def __init__(self, accelerator: str, system: Any, memory_mode: Any, segments: Sequence[LoweredSegment] = (),
                 cpu_visible: Collection[int] = (), arch: Any = None) -> None:
        # `arch`: `arch_config` of the same three, if at hand (`operation_cycles`).
        arch = arch_config(accelerator, system, memory_mode) if arch is None else arch
        self.arch = arch  # resolved once: the cycle model is called a few times per operation
        self.accelerator, self.system, self.memory_mode = accelerator, system, memory_mode
        self.segments = tuple(segments)
        self.weight_memory = arch.region_memory(_core.Region.Constants).name
        self.buffer_memory = arch.region_memory(_core.Region.FastCache).name
        self.arena_memory = arch.region_memory(_core.Region.Arena).name
        # Feature maps are costed where the allocator places them when they fit: the fast
        # memory (with Dedicated_Sram the SRAM budget is that memory, and a cascade's buffers
        # fit by construction), except the tensors the CPU hands in and reads back, which stay
        # in the arena.
        # (`cpu_visible`: more such buffers, of a segment being lowered.)
        self.cpu_visible = {seg.aliases.get(t, t) for seg in segments for t in (*seg.ifms, *seg.ofms)} | set(cpu_visible)
        # State in the persistent arena, which TFLM carves from the same tensor arena.
        self.in_arena = self.cpu_visible | {b for seg in segments for b in seg.persistent}
        # Constant maps (a PAD's border fills, say) are read where the constants are stored.
        self.constant_buffers = {b for seg in segments for b in seg.constants}
        self.buffer_bytes = {b: n for seg in segments for b, n in seg.buffers.items()}
        self._accelerator = Accelerator(accelerator)
        self.is_u85 = Accelerator.is_u85(self._accelerator)
        self._buffer_area = _memory(self.buffer_memory)
        self._described: dict[tuple[int, bool], tuple[LoweredOperation, "_core.NpuOp"]] = {}
        # The memory planner's feature-map schedules of this target's recent schedules
        # (`_feature_map_schedule`): a compile's schedules share their target.
        self.feature_map_schedules: dict[tuple, "_FeatureMapSchedule"] = {}
        # `_overlap_shift` by (operation id, block, part-kernel-first), each held with its
        # operation (so that its id names no other): every schedule of a compile has it again.
        self.overlap_shifts: dict[tuple, tuple[LoweredOperation, int]] = {}
        # Plan parts -> operations, by planner graph and segment sizes, and the stripes of
        # recent cascades (`stripes._part_operations`, `stripes._cascade_stripes`).
        self.part_operations: dict[tuple, tuple] = {}
        self.cascade_stripes: dict[tuple, Any] = {}

    @classmethod
    def of(cls, schedule: "NpuSchedule") -> "_Target":
        """The target of `schedule`'s operations: the scheduler's own while the schedule has its
        lowered segments (`replace` keeps the field: a schedule with other segments, a cascaded
        one, gets a target of its own)."""
        segments = [s.segment for s in schedule.segments]
        kept = schedule.target
        same_segments = kept is not None and len(kept.segments) == len(segments) and all(
            a is b for a, b in zip(kept.segments, segments))
        if same_segments and (kept.accelerator, kept.system, kept.memory_mode) == (
                schedule.accelerator, schedule.system, schedule.memory_mode):
            return kept
        return cls(schedule.accelerator, schedule.system, schedule.memory_mode, segments)

    def feature_map_memory(self, view) -> str:
        return self.arena_memory if view.buffer in self.in_arena else self.buffer_memory

    def cost(self, op: LoweredOperation, weight_bytes: int = 0, scale_bytes: int = 0, block=None,
             part_kernel_first: bool | None = None, buffered: bool = False, slack: int = 0,
             first_dma_bytes: int = 0, last_slice_depth: int = 0, resident: bool = False,
             block_depth: int = 0, ifm2_in_flash: bool = False, stripe_of: LoweredOperation | None = None) -> OpCost:
        described = self.npu_op(op, weight_bytes, scale_bytes, block, part_kernel_first, buffered, slack, first_dma_bytes,
                                last_slice_depth, resident, block_depth, ifm2_in_flash, stripe_of)
        record = _core.estimate(described, self.arch)
        # The binary runs this block wherever its feature maps end up: so is the op re-costed.
        described.block_config = record.block_config
        return cost_from_core(record, described)

    def fastest_cost(self, op: LoweredOperation, weight_bytes: int = 0, scale_bytes: int = 0, block=None,
                     part_kernel_first: bool | None = None, slack: int = 0) -> OpCost:
        """`cost` of an operation run whole (no cascade's stripe) with the OFM block the cycle
        model costs least (`_core.fastest_block_config`). A weighted operation's `block` fixes
        the depth (its streams are encoded for it) and starts the search: the result is at
        least as fast."""
        if self.is_u85:  # its own block search (arch/ethos_u85/block_search)
            return self.cost(op, weight_bytes, scale_bytes, block, part_kernel_first, slack=slack)
        described = self.npu_op(op, weight_bytes, scale_bytes, block, part_kernel_first, slack=slack,
                                block_depth=block[2] if block is not None and op.weights is not None else 0)
        described.block_config = _core.fastest_block_config(described, self.arch)
        return cost_from_core(_core.estimate(described, self.arch), described)

    def copy_cost(self, nbytes: int, source: str | None = None) -> float:
        """Cycles of a DMA copying `nbytes` into the fast memory from `source` (a memory's
        name; by default where the constants are)."""
        return float(_core.estimate(npu_op("dma", (1, 1, 1, nbytes), (1, 1, 1, nbytes),
                                           ifm_memory=source or self.weight_memory, ofm_memory=self.buffer_memory,
                                           dma_bytes=nbytes, accelerator=self.accelerator), self.arch).total_cycles)

    def npu_op(self, op: LoweredOperation, weight_bytes: int = 0, scale_bytes: int = 0, block=None,
               part_kernel_first: bool | None = None, buffered: bool = False, slack: int = 0,
               first_dma_bytes: int = 0, last_slice_depth: int = 0, resident: bool = False,
               block_depth: int = 0, ifm2_in_flash: bool = False,
               stripe_of: LoweredOperation | None = None) -> "_core.NpuOp":
        """The cycle model's description of a lowered operation (the planner costs stripes of it).
        `buffered`: its weights are copied into the fast memory first; `resident`: they are
        already there (a later stripe of a buffered cascade). `block_depth`: the model picks the
        block's height and width only (the stripes of an operation share its weight stream,
        encoded for one block depth). `ifm2_in_flash`: a constant IFM2 read where the constants
        live (else from the fast memory, copied there). `stripe_of`: `op` is a stripe of that
        operation (the same operation on regions of its feature maps, with its own padding).

        An operation is costed several times (block choice, weights read in place, buffered,
        sliced): its description without these arguments is built once and copied; a stripe's
        is its operation's with the stripe's shapes and padding."""
        if stripe_of is not None and not stripe_of.registers.get("ifm_upscale"):
            described = self._stripe_description(op, stripe_of, ifm2_in_flash)
        else:
            described = _core.NpuOp(self._description(op, ifm2_in_flash))
        if part_kernel_first is not None:
            described.traversal = _PART_KERNEL_FIRST if part_kernel_first else _DEPTH_FIRST
        described.block_depth = block_depth
        if op.weights is not None:
            described.weight_bytes, described.scale_bytes = weight_bytes, scale_bytes
            if resident:
                described.weight_memory = self._buffer_area
            if buffered:
                described.weight_buffer_memory = self._buffer_area
                described.weight_first_dma_bytes, described.weight_last_slice_depth = first_dma_bytes, last_slice_depth
        if buffered and op.weights is not None or op.lut is not None:
            # Buffered weights, and a LUT (into the SHRAM), are DMA'd from flash under the
            # previous operation, whose slack hides them.
            described.dma_slack_cycles = slack
        if block is not None:
            set_block_config(described, block, self._accelerator)
        return described

    def _description(self, op: LoweredOperation, ifm2_in_flash: bool) -> "_core.NpuOp":
        """`_describe`'s description of `op`, made once."""
        key = (id(op), ifm2_in_flash)
        entry = self._described.get(key)
        if entry is None:
            # The operation is held with its description, so that its id names no other.
            entry = self._described[key] = (op, self._describe(op, ifm2_in_flash))
        return entry[1]

    def _stripe_description(self, op: LoweredOperation, whole: LoweredOperation, ifm2_in_flash: bool) -> "_core.NpuOp":
        """`_describe(op)` for `op` a stripe of `whole`, made from `whole`'s description: only
        the feature maps' shapes and the padding differ (a cascade's schedule costs hundreds of
        stripes; describing each anew was most of their cost). The memories are the same: a
        stripe reads and writes regions of its operation's tensors, or rolling buffers in place
        of tensors no CPU operator sees, which were in the fast memory already."""
        described = _core.NpuOp(self._description(whole, ifm2_in_flash))
        described.ifm.shape = _core.Shape4(1, *op.ifm.shape)  # a reference into `described`
        described.ofm.shape = _core.Shape4(1, *op.ofm.shape)
        described.whole_ofm = _core.Shape4(1, *whole.ofm.shape)  # the U85's micro-block is the whole op's
        if op.ifm2 is not None:
            ifm2 = described.ifm2  # an optional: a copy, set back
            ifm2.shape = _core.Shape4(1, *op.ifm2.shape)
            described.ifm2 = ifm2
        if op.kind in ("conv", "depthwise", "pool"):
            padding = described.padding
            padding.top, padding.left, padding.bottom, padding.right = op.registers["padding"]
        return described

    def _describe(self, op: LoweredOperation, ifm2_in_flash: bool) -> "_core.NpuOp":
        """`npu_op`'s description before its per-call arguments."""
        ifm, ofm = op.ifm, op.ofm
        args: dict[str, Any] = dict(
            ifm_dtype=ifm.dtype, ofm_dtype=ofm.dtype, ifm_format=ifm.layout, ofm_format=ofm.layout,
            ifm_memory=self.weight_memory if ifm.buffer in self.constant_buffers else self.feature_map_memory(ifm),
            ofm_memory=self.feature_map_memory(ofm),
            accelerator=self.accelerator,
        )
        k = op.registers.get("kernel")
        if op.kind in ("conv", "depthwise", "pool"):
            d = k["dilation"]
            kh, kw = (k["height"] - 1) // d[0] + 1, (k["width"] - 1) // d[1] + 1
            args.update(kernel=(kh, kw), stride=k["stride"], dilation=d, padding=op.registers["padding"])
        if op.weights is not None:
            args.update(weight_memory=self.weight_memory)
        if op.ifm2 is not None:
            args.update(ifm2_shape=(1, *op.ifm2.shape), ifm2_dtype=op.ifm2.dtype, ifm2_format=op.ifm2.layout,
                        ifm2_memory=self.weight_memory if ifm2_in_flash else self.feature_map_memory(op.ifm2))
        if op.lut is not None:
            # On the U85 Vela costs a table's DMA only for a lookup of its own; a table fused into
            # a binary elementwise operation is a sub-operation's, which it leaves out (as the
            # estimator reads binaries), so that such an operation costs alike apart and chained.
            # (Fused into a convolution it is still costed here: left so, the weight buffering
            # choices the table's DMA weighs in stay as they are.)
            fused = self.is_u85 and op.ifm2 is not None
            args.update(activation="LUT", lut_bytes=0 if fused else len(op.lut))
        elif op.registers.get("activation", {}).get("function") in (TANH_FUNCTION, SIGMOID_FUNCTION):
            args.update(activation="TANH")
        # An upscaled IFM (the NPU repeats its elements, or inserts zeros for a transposed
        # convolution) is described by the extent the kernel walks over its OFM; the model
        # fetches the stored half of it.
        ifm_shape = ifm.shape
        if op.registers.get("ifm_upscale"):
            args.update(ifm_upscale=2)
            top, left, bottom, right = op.registers["padding"]
            (sy, sx), (kh, kw) = k["stride"], (k["height"], k["width"])
            ifm_shape = ((ofm.shape[0] - 1) * sy + kh - top - bottom, (ofm.shape[1] - 1) * sx + kw - left - right,
                         ifm.shape[2])
        described = npu_op(op.cost_kind, (1, *ifm_shape), (1, *ofm.shape), **args)
        if op.lut is not None:
            described.lut_memory = _memory(self.weight_memory)
        if "ofm_transpose" in op.registers:  # the U85 writes its OFM transposed: costed as stored
            transposed_description(described, op, self._accelerator, self.arch)
        if op.kind == "resize":  # an Ethos-U85 resize, with Vela's block for it
            described = resize_description(described, op, self._accelerator)
        if op.kind == "dma":  # an Ethos-U85 gather or scatter: costed by the bytes it may read
            described.dma_bytes = dma_spans(op.registers["u85_dma"])[0]
        return described


_PART_KERNEL_FIRST, _DEPTH_FIRST = _core.Traversal.PartKernelFirst, _core.Traversal.DepthFirst


def operation_cycles(accelerator: str, cpu_visible: set[int], ops: list[LoweredOperation],
                     weights: bool = False, arch: Any = None) -> float:
    """The cycle model's total for `ops` run uncascaded on the target's default system, the
    `cpu_visible` buffers in the arena and the other maps in the fast memory: the cost a
    lowering chooses by (`frontend.lower.lower_segment`'s `cost`, `lower_ofm_transpose`).
    `weights`: with the weights' raw sizes read in place (as `block_choice` ranks blocks),
    else without weight traffic. `arch`: `arch_config(accelerator)`, if at hand (a lowering
    resolves it once for the few questions it asks)."""
    target = _Target(accelerator, None, None, cpu_visible=cpu_visible, arch=arch)
    return sum(_core.estimate(target.npu_op(op, *(_raw_stream_bytes(op) if weights else ())), target.arch).total_cycles
               for op in ops)


def _raw_stream_bytes(op: LoweredOperation) -> tuple[int, int]:
    """An operation's weight and scale bytes before encoding (none without weights)."""
    if op.weights is None:
        return 0, 0
    return int(op.weights.values.size), 10 * int(op.weights.values.shape[0])


def _encode(op: LoweredOperation, block: tuple[int, int, int], part_kernel_first: bool, accelerator: str,
            depth_step: int = 0, whole: Any = None):
    """`op`'s weight streams for `block`, in depth slices of `depth_step` channels; `whole`: its
    streams for the same block without slices, if at hand (`encode_weights` may cut from them)."""
    if Accelerator(accelerator).product == ethos_u85.PRODUCT:
        return ethos_u85.encode_weights(op, block, part_kernel_first, accelerator, depth_step)
    return encode_weights(*_encoder_arguments(op), **_encoder_options(op, block, part_kernel_first, accelerator),
                          depth_step=depth_step or None, whole=whole)


def _encoder_arguments(op: LoweredOperation) -> tuple:
    """`encode_weights`' positional arguments for `op`: its weights, zero points, bias and scales."""
    v = op.weights
    return v.values, v.zero_points, v.bias, v.scales[:, 0], v.scales[:, 1]


def _encoder_options(op: LoweredOperation, block: tuple[int, int, int], part_kernel_first: bool,
                     accelerator: str) -> dict:
    """`encode_weights`' layout options for `op` run in `block`."""
    return dict(depthwise=op.weights.depthwise, part_kernel_first=part_kernel_first, ofm_block_depth=block[2],
                ifm_bits=8 * op.ifm.element_size, dilation=tuple(op.registers["kernel"]["dilation"]),
                accelerator=accelerator)


def _queued_encoding(op: LoweredOperation, block: tuple[int, int, int], part_kernel_first: bool,
                     accelerator: str) -> Any:
    """`_encode(op, block, part_kernel_first, accelerator)` started in the background: its
    `take()` gives the streams (made on the calling thread if no background thread has started
    them), `drop()` forgets them. The core's threads encode the Ethos-U55/U65's (no Python
    object touched: `emit.weights.queue_weights`); the Ethos-U85's encoder is called from
    Python, on the pool's threads."""
    if Accelerator(accelerator).product != ethos_u85.PRODUCT:
        return queue_weights(*_encoder_arguments(op), **_encoder_options(op, block, part_kernel_first, accelerator))
    return _PoolEncoding(shared_pool().submit(_encode, op, block, part_kernel_first, accelerator),
                         (op, block, part_kernel_first, accelerator))


class _PoolEncoding(NamedTuple):
    """An `_encode` submitted to the pool (`_queued_encoding`)."""

    future: Any
    args: tuple

    def take(self) -> Any:
        return _encode(*self.args) if self.future.cancel() else self.future.result()

    def drop(self) -> None:
        self.future.cancel()


def encoding_key(op: LoweredOperation, block: tuple[int, int, int], part_kernel_first: bool, accelerator: str,
                 depth_step: int = 0) -> tuple | None:
    """A key equal for two `_encode` calls that make equal streams: all the encoder reads of
    the operation, its weights by where they are stored (an LSTM unrolled over time steps
    reads the same weight tensor at each: zoo lstm_kws's 393 weighted operations encode 9
    volumes). What keeps an encoding by it must hold the operation too (no other array then
    takes the weights' place in memory). None on the Ethos-U85, whose encoder reads more of
    the operation."""
    if Accelerator.is_u85(accelerator):
        return None
    v = op.weights
    where = v.values.__array_interface__
    constants = tuple((a.dtype.str, a.shape, a.tobytes()) for a in map(np.asarray, (v.zero_points, v.bias, v.scales)))
    return (where["data"][0], where["shape"], where["strides"], where["typestr"], constants, v.depthwise,
            part_kernel_first, block[2], op.ifm.element_size, tuple(op.registers["kernel"]["dilation"]), accelerator,
            depth_step)


def _shared_weights(weighted: list[LoweredOperation]) -> set[int]:
    """The ids of the operations whose weights another of `weighted` reads too (in the same
    memory): only those can share streams (`encoding_key`, whose making the others skip)."""
    where = [op.weights.values.__array_interface__["data"][0] for op in weighted]
    seen = collections.Counter(where)
    return {id(op) for op, at in zip(weighted, where) if seen[at] > 1}


MAX_COPIED_CONSTANT = 16 * 1024  # larger constants are read where they are


def weights_key(sop: "ScheduledOperation", position: int) -> tuple:
    """The memory planner's key of the weight buffer an operation reads (if it has one): its
    own by position in the schedule, or the one its operation's stripes share."""
    return ("weights", position if sop.shared_weights is None else sop.shared_weights)


def second_slot_key(position: int) -> tuple:
    """The memory planner's key of the second slot of a depth-sliced operation's own weights
    (`weights_key` names the first). The first slot is filled under the previous operation;
    the second only while the operation runs (slice 2 under slice 1), so the two are separate
    buffers of separate lifetimes, and need not be adjacent."""
    return ("weights", position, "second slot")


def broadcast_constant(op: LoweredOperation, constants: dict[int, bytes]) -> Any:
    """The operation's constant IFM2 when it broadcasts it (PRELU's per-channel alpha, say),
    else None. The NPU reads a broadcast operand again for every OFM element: from flash that
    can cost more than the operation's compute, and a copy in the fast memory may pay."""
    v = op.ifm2
    if (v is None or v.buffer not in constants or math.prod(v.shape) >= math.prod(op.ofm.shape)
            or len(constants[v.buffer]) > MAX_COPIED_CONSTANT):
        return None
    return v


def copied_constants(sop: "ScheduledOperation") -> list[Any]:
    """The constant operands (views) an operation reads from its copy in the fast memory, as
    the schedule chose (`sop.constant_ifm2`); a DMA copies each in just before the operation."""
    return [sop.lowered.ifm2] if sop.constant_ifm2 == "copy" else []


def constant_key(position: int, view) -> tuple:
    """The memory planner's key of the copy of a constant operand (see copied_constants)."""
    return ("constant", position, view.buffer)


def weight_buffer_bytes(sop: "ScheduledOperation") -> int:
    """SRAM a buffered operation's weights take: the whole streams, or for depth slices one
    slot (two are in flight while it runs, one before: see second_slot_key)."""
    if not sop.depth_step:
        return sop.encoded.size
    return sop.encoded.largest_span


def _stream_bytes(encoded) -> tuple[int, int]:
    weights = sum(s.weight_length for streams in encoded.slices for s in streams)
    scales = sum(s.scale_length for streams in encoded.slices for s in streams)
    return weights, scales


def block_choice(op: LoweredOperation, target: _Target) -> tuple[tuple[int, int, int], bool]:
    """The OFM block and traversal (part-kernel-first) the cycle model picks for a weighted
    operation. The choice needs a size before the encoder has run: the raw weight bytes rank
    the configs; the encoded size then costs the chosen one."""
    raw = target.cost(op, *_raw_stream_bytes(op))
    return raw.block_config.ofm_block, raw.block_config.part_kernel_first if op.kind == "conv" else False


def _streamed_copy_shape(op: LoweredOperation, target: _Target, slack: int) -> LoweredOperation:
    """A dense copy 16 channels deep (lowering's streamed requantizations and lookups, see
    is_dense_copy) in the H x W x 16 shape the cycle model costs least on this accelerator. The
    rows' divisibility by the block decides it, not the width alone: MobileNetV2's 224 x 224 x 3
    input as 147 x 64 x 16 takes 102,289 cycles on U65-256 with its input in DRAM, as 168 x 56 x
    16 76,410 (Vela's shape); on U55 the two are within 0.2%."""
    if not is_dense_copy(op) or op.ifm.shape[2] != 16:
        return op
    m = op.ifm.shape[0] * op.ifm.shape[1]
    widths = stream_widths(m)
    if len(widths) < 2:
        return op
    # Each shape is described as the operation with other shapes (`stripe_of`), not anew: a
    # 224 x 224 input has 19 shapes to cost.
    cost = {w: target.cost(with_copy_shape(op, (m // w, w, 16)), slack=slack, stripe_of=op).total_cycles
            for w in widths}
    best = min(widths, key=lambda w: cost[w])  # the widest of the cheapest: widths run downwards
    # A shape only a few cycles cheaper (on U55 most are within 0.2%) is not worth odd rows.
    return with_copy_shape(op, (m // best, best, 16)) if cost[best] < 0.99 * cost.get(op.ifm.shape[1], math.inf) else op


def schedule_operation(op: LoweredOperation, target: _Target, slack: int, buffering: bool,
                       encoded: Any = None, constants: dict[int, bytes] | None = None,
                       choice: tuple[tuple[int, int, int], bool] | None = None, busy: float = 0,
                       shared: dict | None = None) -> ScheduledOperation:
    """`_schedule_operation`'s choice, its IFM staged in the fast memory where that pays
    (`input_staging.staged`). Staged, an operation may be faster reading its weights in place:
    a weight buffer's DMA waits for the operation's cost with its maps in their home (Vela's
    accounting, the estimator's too), and the IFM's home is the slow memory (zoo MobileNetV1's
    first convolution on U65-256: 21,037 cycles buffered, 8,955 not)."""
    sop = staged(_schedule_operation(op, target, slack, buffering, encoded, constants, choice, busy, shared), target)
    if sop.staged_cycles and sop.weight_buffer and sop.direct_cost.total_cycles <= sop.cost.total_cycles:
        sop = _weights_in_place(sop)
    return sop


def _schedule_operation(op: LoweredOperation, target: _Target, slack: int, buffering: bool,
                        encoded: Any = None, constants: dict[int, bytes] | None = None,
                        choice: tuple[tuple[int, int, int], bool] | None = None, busy: float = 0,
                        shared: dict | None = None) -> ScheduledOperation:
    """Block config and traversal from the cycle model; weights encoded for that block; the
    weights buffered in SRAM when the model says that is faster (and `buffering` allows); a
    broadcast constant operand copied into SRAM when that is faster than reading it in flash.
    `encoded` may bring the streams for `block_choice`'s block, encoded ahead, and `choice`
    that block and traversal. `busy`: the cycles the previous operation itself reads the
    weights' memory for (its DMA slack is `slack`). `shared`: depth-sliced streams other
    operations of the same weights made (`_sliced_streams`)."""
    if op.kind == "dma":  # a gather or scatter: no block, its constant indices read in flash
        cost = target.cost(op)
        return ScheduledOperation(op, (1, 1, 1), False, cost, constant_ifm2="flash" if op.ifm2 is not None
                                  and op.ifm2.buffer in (constants or {}) else "")
    if op.weights is None:
        op = _streamed_copy_shape(op, target, slack)
        constants = constants or {}
        if op.ifm2 is None or op.ifm2.buffer not in constants:
            cost = target.fastest_cost(op, slack=slack)
            return ScheduledOperation(op, cost.block_config.ofm_block, False, cost)
        # A constant IFM2 is in flash; one the operation broadcasts may be worth a copy.
        in_flash = target.cost(op, ifm2_in_flash=True)
        if broadcast_constant(op, constants) is not None:
            copied = target.cost(op)
            copy = target.copy_cost(len(constants[op.ifm2.buffer]))
            if copied.total_cycles + copy < in_flash.total_cycles:
                return ScheduledOperation(op, copied.block_config.ofm_block, False, copied, constant_ifm2="copy",
                                          copy_cycles=copy)
        return ScheduledOperation(op, in_flash.block_config.ofm_block, False, in_flash, constant_ifm2="flash")
    block, pkf = choice or block_choice(op, target)
    if encoded is None:
        encoded = _encode(op, block, pkf, target.accelerator)
    w, s = _stream_bytes(encoded)
    direct = target.cost(op, w, s, block, pkf if op.kind == "conv" else None)
    # Copy the weights to SRAM where the NPU reads them more than once (one pass per OFM block
    # in height and width), as Vela's Performance rule does, and with the weights in DRAM
    # (Dedicated_Sram: DRAM's latency makes the NPU's own fetches slow). Weights read in one
    # pass from flash are copied too where that pays with the DMA's slack cut to the time the
    # previous operation leaves flash idle (Vela's accounting hides the DMA under that
    # operation's compute, even while the operation reads flash itself): the first depth
    # slice's DMA runs under the previous operation, the rest under this one's own slices
    # (zoo MobileNetV2 uncascaded on U55-128: 760,317 -> 744,589 cycles, Vela 785,241).
    ofm_h, ofm_w, _ = op.ofm.shape
    passes = -(-ofm_h // block[0]) * -(-ofm_w // block[1])
    traversal = pkf if op.kind == "conv" else None
    best = ScheduledOperation(op, block, pkf, direct, encoded)
    single_pass = passes == 1 and target.weight_memory != "Dram"
    chosen_slack = slack  # the slack the choice is made with; the choice is costed with `slack`
    if single_pass:
        chosen_slack = max(int(slack - busy), 0)
    if buffering and target.weight_memory != target.buffer_memory:
        # Single-pass weights are copied in slices only. One whole copy ahead of the operation
        # pays too on the estimator (U55-128 geomean 0.929 -> 0.916 of Vela), but the planner's
        # proposals do not reach those schedules yet (test_planner's fastest proposal would no
        # longer be the uncascaded compile). (So a single pass is not costed whole.)
        whole = None if single_pass else target.cost(op, w, s, block, traversal, buffered=True, slack=chosen_slack)
        if whole is not None and whole.total_cycles < best.cost.total_cycles:
            best = ScheduledOperation(op, block, pkf, whole, encoded, weight_buffer=True, direct_cost=direct)
        # Depth slices let the DMA of slice k+1 run under slice k: only the first slice's DMA
        # is exposed. Candidate slice depths (`slice_steps`) are the thinnest at least 1, 2 and
        # 4 blocks deep, and the one that halves the depth (a block deeper than its slice just
        # runs short: a one-block-deep FC behind a short operation hides half its DMA so, as
        # Vela's slices do). Their stream sizes are estimated from the whole streams for the
        # choice (encoding every candidate would double the compile time); only the winner is
        # encoded and costed exactly.
        # Steps that do not divide the depth are tried where the last slice is at least half
        # a step (a sliver of a last slice shortens the slack the next operation's DMA hides
        # under for nothing), beside those that divide it; the best of each kind by the
        # estimate is costed exactly (an estimate-best that does not divide came out slower
        # exactly on tinyengine VWW's 3x3x480 on U65-512: 4,956 cycles against 160's 4,834).
        depth = op.ofm.shape[2]
        balanced = [d for d in slice_steps(depth) if 2 * last_slice(depth, d) >= d]
        dividing = [d for d in balanced if depth % d == 0]
        steps = []
        for pool in (balanced, dividing):
            for least in (block[2], 2 * block[2], 4 * block[2]):
                step = min((d for d in pool if d >= least), default=0)
                if step and step not in steps:
                    steps.append(step)
            if pool and pool[0] not in steps:
                steps.append(pool[0])
        best_of = {True: (0, best.cost.total_cycles), False: (0, best.cost.total_cycles)}  # by: divides
        # The trials differ in the first DMA and the last slice only, and are ranked by their
        # total: one description, those two fields set per step (a whole cost per step was 146
        # of the 427 costs of MobileNetV2-224's plan, most of each building a description and an OpCost).
        trial = target.npu_op(op, w, s, block, traversal, buffered=True, slack=chosen_slack)
        for step in steps:
            trial.weight_first_dma_bytes, trial.weight_last_slice_depth = (w + s) * step // depth, last_slice(depth, step)
            cycles = _core.estimate(trial, target.arch).total_cycles
            kind = depth % step == 0
            if cycles < best_of[kind][1]:
                best_of[kind] = (step, cycles)
        for divides, (step, _) in best_of.items():
            if not step:
                continue
            sliced = depth_sliced(best, target, chosen_slack, step, direct, encoded, shared=shared)
            # A step that does not divide the depth and needs more SRAM than the choice so far
            # must save a share of its cycles: a cascade under a budget inherits the buffer
            # and drops it when it does not fit (MLPerf Tiny's ResNet on U55-128 within
            # 95,180 B: 160 channels in 64s instead of 32s saved 16 cycles of 92,160 unlimited
            # and cost the cascade its buffer, 1,250,028 -> 1,370,284 cycles).
            held = _buffer_size(best) if best.weight_buffer else 0
            bar = 1.0 if divides or _buffer_size(sliced) <= held else 1.0 - MIN_UNEVEN_SLICE_SAVING
            if sliced.cost.total_cycles < bar * best.cost.total_cycles:
                best = sliced
    if best.weight_buffer and chosen_slack != slack:  # chosen on less slack: costed as the estimator does
        best = replace(best, cost=_sliced_cost(op, block, pkf, best.encoded, best.depth_step, target, slack)
                       if best.depth_step else target.cost(op, w, s, block, traversal, buffered=True, slack=slack))
    if not best.weight_buffer:
        # Read in place: the block of the weights' depth the cycle model costs least (the
        # heuristic's block ranks fetches only: DS-CNN's 25 x 5 x 64 3x3 depthwise on U55-128
        # takes 8,124 cycles in its 14 x 6 x 16 blocks, 8,064 in 13 x 6 x 16 ones, which leave
        # fewer micro-blocks empty in the second block). A buffered operation keeps its block:
        # the choices above were made for it.
        fastest = target.fastest_cost(op, w, s, block, traversal)
        if fastest.total_cycles < best.cost.total_cycles:
            best = replace(best, block=tuple(fastest.block_config.ofm_block), cost=fastest)
    return best


# The share of its cycles a depth slicing that does not divide the OFM depth must save over
# the operation's choice so far when it needs more SRAM (`schedule_operation`).
MIN_UNEVEN_SLICE_SAVING = 0.01


def slice_steps(depth: int) -> list[int]:
    """The depth-slice steps worth trying for an OFM depth, thickest first: for each number of
    slices, the thinnest 16-channel multiple that makes that many (a thicker one with as many
    slices only takes a bigger slot). A step need not divide the depth: the last slice is
    shorter (of 640 channels, 112 per slice fits where 128 does not; a 1001-class FC slices at
    all)."""
    return sorted({round16(-(-depth // n)) for n in range(2, -(-depth // 16) + 1)} - {round16(depth)}, reverse=True)


def last_slice(depth: int, step: int) -> int:
    """The depth of the last of the slices `step` cuts `depth` into."""
    return depth - (depth - 1) // step * step


def depth_sliced(sop: ScheduledOperation, target: _Target, slack: int, step: int, direct: OpCost,
                 encoded: Any, single_slot: bool = False, shared: dict | None = None) -> ScheduledOperation:
    """`sop`'s operation with its weights double-buffered in slices of `step` OFM channels:
    encoded so and costed exactly. `direct` and `encoded`: its cost and streams reading the
    weights from flash. `single_slot`: the slices take turns in one slot, so no slice's DMA
    runs under another slice's kernel: costed as one copy of the whole streams before the
    operation with no slack (the first slice's DMA may in fact run under the previous
    operation: at most that much too slow). `shared`: see `_sliced_streams`."""
    op, block, pkf = sop.lowered, sop.block, sop.part_kernel_first
    sliced = _sliced_streams(op, block, pkf, target.accelerator, step, encoded, shared)
    cost = _sliced_cost(op, block, pkf, sliced, step, target, None if single_slot else slack)
    return ScheduledOperation(op, block, pkf, cost, sliced, weight_buffer=True, direct_cost=direct, depth_step=step,
                              single_slot=single_slot, direct_encoded=encoded)


def _sliced_streams(op: LoweredOperation, block: tuple[int, int, int], pkf: bool, accelerator: str, step: int,
                    whole: Any, shared: dict | None) -> Any:
    """`op`'s streams in depth slices of `step` channels (`whole`: unsliced, see `_encode`),
    from `shared` where an operation of the same weights made them (`encoding_key`), else
    encoded and kept there (with the operation, which holds its weights)."""
    key = encoding_key(op, block, pkf, accelerator, step) if shared is not None else None
    if key is not None and ("streams", key) in shared:
        return shared[("streams", key)][1]
    sliced = _encode(op, block, pkf, accelerator, depth_step=step, whole=whole)
    if key is not None:
        shared[("streams", key)] = op, sliced
    return sliced


def _sliced_cost(op: LoweredOperation, block, pkf: bool, sliced: Any, step: int, target: _Target,
                 slack: int | None) -> OpCost:
    """The cost of `op` with its weights buffered in the depth slices `sliced` encodes, `step`
    channels each: double-buffered under `slack`, or in one slot (None)."""
    sw, ss = _stream_bytes(sliced)
    traversal = pkf if op.kind == "conv" else None
    if slack is None:
        return target.cost(op, sw, ss, block, traversal, buffered=True)
    start, end = sliced.span(0)
    return target.cost(op, sw, ss, block, traversal, buffered=True, slack=slack, first_dma_bytes=end - start,
                       last_slice_depth=last_slice(op.ofm.shape[2], step))


def schedule_uncascaded(segments: list[LoweredSegment], order: list[tuple[str, int]], accelerator: str = "ethos-u55-128",
                        system=None, memory_mode=None, buffering: bool = True) -> NpuSchedule:
    """Every lowered operation as its own whole-tensor stripe, in the order given."""
    target = _Target(Accelerator(accelerator).name, system, memory_mode, segments)
    # Encoding the weights is most of a compile and independent per operation: it runs on the
    # core's background threads (`_queued_encoding`) while this thread schedules the operations
    # in order, each as soon as its own weights are encoded. An encoding no background thread
    # has started when this one needs it is made here instead (on a busy host those threads
    # may wait for a core while this one has it).
    weighted = [op for seg in segments for op in seg.operations if op.weights is not None]
    choices, started = {}, {}
    submitted = {}  # by `encoding_key`: operations with the same weights share their streams
    made: dict[int, Any] = {}  # by the encoding's id: the streams, once this thread has them
    shared: dict = {}  # and their depth slices (`_sliced_streams`)
    sharing = _shared_weights(weighted)

    def encoded_for(op: LoweredOperation) -> Any:
        encoding = started[id(op)]
        if id(encoding) not in made:
            made[id(encoding)] = encoding.take()
        return made[id(encoding)]

    try:
        for op in _encoding_order(weighted):  # each started as soon as its block is chosen
            choices[id(op)] = block_choice(op, target)
            key = encoding_key(op, *choices[id(op)], target.accelerator) if id(op) in sharing else None
            found = submitted.get(key) if key is not None else None
            if found is None:
                found = _queued_encoding(op, *choices[id(op)], target.accelerator)
                if key is not None:
                    submitted[key] = found
            started[id(op)] = found
        out = []
        # This thread's own encodings (depth slices, and those no background thread has
        # started) run on it alone: spread, they waited for helper threads that waited for the
        # cores the other encodings hold (MobileNetV2-224 on U55-128: its 20 depth slicings
        # took 4 ms for 1.5 ms of work).
        with capped_workers(1):
            for seg in segments:
                ops, slack, busy = [], 0, 0
                for op in seg.operations:
                    encoded = encoded_for(op) if op.weights is not None else None
                    sop = schedule_operation(op, target, slack, buffering, encoded, seg.constants, choices.get(id(op)),
                                             busy, shared if id(op) in sharing else None)
                    slack = sop.cost.buffering_slack_cycles
                    busy = sop.cost.access_cycles.get(target.weight_memory, 0)
                    ops.append(sop)
                out.append(SegmentSchedule(seg, ops))
    finally:
        for encoding in started.values():  # after an error, the encodings not started yet (the threads are shared)
            encoding.drop()
    return NpuSchedule(out, order, target.accelerator, system, memory_mode, target=target)


def _encoding_order(weighted: list[LoweredOperation]) -> list[LoweredOperation]:
    """The order weight encodings start in: the schedule's, so that its first operations are
    ready first, except that the largest (above an equal share of a core's work) start at
    once: started in order, a classifier at the end of a model would run alone at the end."""
    sizes = [op.weights.values.size for op in weighted]
    share = sum(sizes) / (2 * _core.core_count())
    large = sorted((k for k, n in enumerate(sizes) if n > share), key=lambda k: -sizes[k])
    return [weighted[k] for k in large] + [op for k, op in enumerate(weighted) if sizes[k] <= share]


def without_weight_buffers(schedule: NpuSchedule, keep: set[int] = frozenset(), staged: bool = False) -> NpuSchedule:
    """The same schedule with every operation but those at positions `keep` reading its weights
    from flash and, unless `staged`, every operation reading its IFM in place (`input_staging`):
    the lean schedule the planner, the floors and the cascades work on, to which the allocator
    adds the buffers and copies its budget holds. A cascade's shared weight buffers are the
    proposal's and stay."""
    arch = None if staged or not any(op.staged_cycles for op in schedule.operations) else _Target.of(schedule).arch

    def unbuffered(k: int, sop: ScheduledOperation) -> ScheduledOperation:
        if arch is not None:
            sop = unstaged(sop, arch)
        if not sop.weight_buffer or sop.shared_weights is not None or k in keep:
            return sop
        return _weights_in_place(sop)

    return _mapped(schedule, unbuffered)


def _weights_in_place(sop: ScheduledOperation) -> ScheduledOperation:
    """A weight-buffered operation (of its own buffer) reading its weights where they are stored."""
    return evolve(sop, weight_buffer=False, cost=sop.direct_cost, direct_cost=None, depth_step=0, single_slot=False,
                  encoded=sop.direct_encoded if sop.depth_step else sop.encoded, direct_encoded=None)


def without_staging(schedule: NpuSchedule, positions: Collection[int]) -> NpuSchedule:
    """The same schedule with the operations at `positions` reading their IFMs in place, not
    from a staged copy (`input_staging`)."""
    arch = _Target.of(schedule).arch
    return _mapped(schedule, lambda k, sop: unstaged(sop, arch) if k in positions else sop)


def unchained(sop: ScheduledOperation) -> ScheduledOperation:
    """`sop` as it was costed before it was chained (`ScheduledOperation.chain`)."""
    return replace(sop, chain=(), cost=sop.unchained_cost, unchained_cost=None) if sop.chain else sop


@dataclass
class ChainingPasses:
    """What this module asks of the Ethos-U85's chaining, which builds on it (`u85_chaining`
    registers itself in CHAINING when imported; unset, schedules are left unchained): `rechain`
    chains a schedule again after its operations changed (`_mapped`), `cycles` costs a chain
    with some operands moved to another memory (`eviction_cycles`)."""

    rechain: Any = None  # (schedule) -> schedule
    cycles: Any = None  # (chain operations, moved operand names per operation, target, memory) -> cycles


CHAINING = ChainingPasses()


def _mapped(schedule: NpuSchedule, change) -> NpuSchedule:
    """`schedule` with each operation replaced by `change(position, operation)`. On the
    Ethos-U85 `change` sees each operation unchained, and the result is chained again: a new
    weight buffer or block of a chain's first operation changes its chain's cost, and may
    leave the chain no faster (`CHAINING.rechain`)."""
    segments, k = [], 0
    for seg in schedule.segments:
        ops = []
        for sop in seg.operations:
            ops.append(change(k, unchained(sop)))
            k += 1
        segments.append(SegmentSchedule(seg.segment, ops))
    mapped = replace(schedule, segments=segments)
    return CHAINING.rechain(mapped) if CHAINING.rechain is not None else mapped


def fit_weight_buffers(schedule: NpuSchedule, graph: SubGraph, lean_memory: tuple | None = None,
                       above_peak_gain: float | None = None, budgeted: bool = False,
                       lean_live: np.ndarray | None = None, capacity: int | None = None,
                       capacity_only: bool = False, sliced: dict | None = None,
                       bounds: list | None = None) -> NpuSchedule:
    """Keep the weight buffers that fit under the feature maps' own peak.

    Copying weights into SRAM saves cycles but costs SRAM. Uncascaded, the feature maps fix a
    peak anyway; a buffer is kept when, over the two steps it is live (its DMA runs under the
    previous operation), the feature maps live then leave room for it below that peak. The most
    cycles saved per byte go first. The SRAM a compile uses is then the feature maps' alone.
    An operation after a dropped buffer is then costed again with the slack the operation
    before it now gives, and buffered where that pays and fits by the same rules.
    With `above_peak_gain`, a buffer that does not fit under the peak is kept too when it saves
    at least that many cycles per byte it raises the peak by (a 1.1 KB buffer of a 1x1
    convolution at MobileNetV1-0.75's peak saves 47,600 cycles on U65-512).
    O(operations log operations) after one live-range pass. `lean_memory`: the
    `memory_schedule` of `without_weight_buffers(schedule)`, when the caller has it.
    `budgeted`: the layout will be held to a budget, so a depth-sliced buffer counts as it is
    live (one slot under the previous operation, two under its own). Without a budget it
    counts as two slots over both steps: the layout of many small slots lands well above
    their live bytes (zoo MobileNetV2 on U65-512: 181,616 B laid out for a 138,240 B peak,
    Vela 149,664), and the headroom keeps SRAM within the peak. `lean_live`: `live_bytes` of
    `lean_memory`'s schedule, when the caller has it (a copy is changed, not it). `capacity`:
    a budget the bytes live at once may fill, above the feature maps' peak (a compile held to
    a budget between the two keeps the buffers that fit it, the most cycles per byte first, a
    buffer over it re-sliced thinner where that makes it fit: `_thinner_buffer`).
    `capacity_only`: a buffer must fit `capacity`, even one under the peak (a peak above the
    budget, as a cascade's can count, is no room for more). `sliced`: the thinner buffers
    `_thinner_buffer` made for this `schedule` before, to share with it (a dict the caller keeps
    while `schedule` lives: the allocator fits one schedule to several capacities). `bounds`:
    [low, high], narrowed here to the capacities every comparison with `capacity` comes out
    the same for (low <= capacity < high): the fit is the same for each of them (the allocator
    fits a schedule to budgets a few bytes apart, `allocation.Lean.fit`).
    """
    msched, _, op_steps = lean_memory or memory_schedule(without_weight_buffers(schedule), graph)
    # Python ints, not the array: each buffer reads and adds a step or two of it at a time.
    live = (live_bytes(msched, ties=bool(schedule.overlap_chains)) if lean_live is None else lean_live).tolist()
    peak = max([0, *live])
    ops = schedule.operations
    wanted = _own_weight_buffers(schedule)
    saved = {k: ops[k].direct_cost.total_cycles - ops[k].cost.total_cycles for k in wanted}
    keep: set[int] = set()
    replaced: dict[int, ScheduledOperation] = {}  # re-sliced thinner to fit `capacity`, or newly buffered

    def top_of(sop: ScheduledOperation, k: int) -> tuple[int, list]:
        # The spans overlap (a depth-sliced buffer's two slots under its own operation): the
        # top is where their sum is highest, not the highest of each alone.
        # A span is two steps at most: summed step by step, not as arrays (a re-sliced fit
        # tries thousands: zoo lstm_kws on U65-256).
        spans = _buffer_spans(sop, op_steps[k], exact=budgeted)
        if len(spans) == 1:  # most buffers: the highest of its steps, plus its bytes
            steps, size = spans[0]
            return max(live[steps]) + size, spans
        lo, hi = min(s.start for s, _ in spans), max(s.stop for s, _ in spans)
        return max(live[i] + sum(size for steps, size in spans if steps.start <= i < steps.stop)
                   for i in range(lo, hi)), spans

    def within(top: int) -> bool:
        """`top <= capacity`, `bounds` narrowed to the capacities that compare alike."""
        fits = top <= capacity
        if bounds is not None:
            if fits:
                bounds[0] = max(bounds[0], top)
            else:
                bounds[1] = min(bounds[1], top)
        return fits

    def allowed(top: int, gain: float) -> bool:
        """Under the peak, paying for what it raises the peak by, or within `capacity`."""
        if capacity_only:
            return within(top)
        return top <= peak or (above_peak_gain is not None and gain >= above_peak_gain * (top - peak)) or (
            capacity is not None and within(top))

    def take(k: int, spans: list, top: int) -> None:
        nonlocal peak
        for steps, size in spans:
            for i in range(steps.start, steps.stop):
                live[i] += size
        peak = max(peak, top)
        keep.add(k)

    for k in sorted(wanted, key=lambda k: -saved[k] / max(_buffer_size(ops[k]), 1)):
        top, spans = top_of(ops[k], k)
        if not allowed(top, saved[k]):
            if capacity is None:
                continue
            option = _thinner_buffer(schedule, k, lambda sop: within(top_of(sop, k)[0]), sliced)
            if option is None:
                continue
            replaced[k] = option
            top, spans = top_of(option, k)
        take(k, spans, top)
    # An operation after one whose buffer was dropped may hide a weight DMA of its own under
    # that longer operation now (tflm hello_world's last FC on U65 within 304 B: 337 -> 326
    # cycles, as Vela's binary). Taken where it fits as the buffers above did.
    target = _Target.of(schedule)
    fitted = without_weight_buffers(_mapped(schedule, lambda k, sop: replaced.get(k, sop)), keep, staged=True)
    for k, sop in enumerate(fitted.operations):
        if sop.weight_buffer or sop.lowered.weights is None or k == 0 or k - 1 in keep or k - 1 not in wanted:
            continue
        slack = _slack_before(fitted, k)
        option = schedule_operation(sop.lowered, target, slack, True, sop.encoded, choice=(sop.block, sop.part_kernel_first),
                                    busy=fitted.operations[k - 1].cost.access_cycles.get(target.weight_memory, 0))
        if not option.weight_buffer or option.cost.total_cycles >= sop.cost.total_cycles:
            continue
        top, spans = top_of(option, k)
        if allowed(top, sop.cost.total_cycles - option.cost.total_cycles):
            take(k, spans, top)
            replaced[k] = option
    if replaced:
        schedule = _mapped(schedule, lambda k, sop: replaced.get(k, sop))
    return without_weight_buffers(schedule, keep, staged=True)


def _thinner_buffer(schedule: NpuSchedule, k: int, fits, sliced: dict | None = None) -> ScheduledOperation | None:
    """Operation `k` with its weights double-buffered in thinner depth slices than it has, the
    thickest that `fits` and still beats reading them from flash, or None. Vela slices to fit
    the SRAM it is given the same way (its half-buffer limit). `sliced`: the options made
    before for `schedule` (see fit_weight_buffers), kept there too."""
    sop = schedule.operations[k]
    depth = sop.lowered.ofm.shape[2]
    encoded = sop.direct_encoded if sop.depth_step else sop.encoded
    target, slack = _Target.of(schedule), _slack_before(schedule, k)
    sliced = {} if sliced is None else sliced

    def option(step: int, single_slot: bool = False) -> ScheduledOperation:
        # Keyed by the operation itself (held with the option, so that its id names no other);
        # its streams are shared by the operations of the same weights (`_sliced_streams`).
        key = ("option", id(sop), slack, step, single_slot)
        if key not in sliced:
            sliced[key] = sop, depth_sliced(sop, target, slack, step, sop.direct_cost, encoded, single_slot, sliced)
        return sliced[key][1]

    # Zoo fc_autoencoder on U65-512 within 32,512 B: of its 640 channels, 112 per slice fits
    # where 128 does not, and 96 or 80 are slower (as Vela slices it).
    for step in (s for s in slice_steps(depth) if s < (sop.depth_step or depth)):
        thinner = option(step)
        if thinner.cost.total_cycles < sop.direct_cost.total_cycles and fits(thinner):
            return thinner
    # No double buffer fits: one slot the slices take turns in, the thickest that fits (see
    # ScheduledOperation.single_slot). Its DMAs no longer overlap its kernels, so it must
    # still beat reading the weights in place.
    # A slot's size grows with its step: the thickest that fits is found by bisection (each
    # try encodes the weights; a 768-deep OFM has 47 steps).
    steps = [s for s in slice_steps(depth) if s <= (sop.depth_step or depth)][::-1]  # thinnest first
    best, lo, hi = None, 0, len(steps)
    while lo < hi:
        mid = (lo + hi) // 2
        slot = option(steps[mid], single_slot=True)
        if fits(slot):
            best, lo = slot, mid + 1
        else:
            hi = mid
    return best if best is not None and best.cost.total_cycles < sop.direct_cost.total_cycles else None


def _slack_before(schedule: NpuSchedule, k: int) -> int:
    """The cycles operation `k`'s weight DMA may hide under: the previous operation's in its
    segment, as `schedule_uncascaded` costed it."""
    position = 0
    for seg in schedule.segments:
        if k < position + len(seg.operations):
            i = k - position
            return seg.operations[i - 1].cost.buffering_slack_cycles if i > 0 else 0
        position += len(seg.operations)
    raise IndexError(k)


def weight_buffers_peak(schedule: NpuSchedule, lean_memory: tuple) -> int:
    """The most bytes live at once in `schedule` with all its weight buffers: a lower bound of
    its layout's size, from the memory schedule without the weight buffers of operations run
    alone (`lean_memory`, as `fit_weight_buffers` takes it) and each such buffer over the two
    steps it is live. A budget below it cannot fit, and the layout need not be tried."""
    msched, _, op_steps = lean_memory
    live = live_bytes(msched, arena_only=True, ties=bool(schedule.overlap_chains)).tolist()  # a step or two a buffer
    ops = schedule.operations
    for k in _own_weight_buffers(schedule):
        for steps, size in _buffer_spans(ops[k], op_steps[k]):
            for i in range(steps.start, steps.stop):
                live[i] += size
    return max([0, *live])


def live_bytes(msched: mem.Schedule, arena_only: bool = False, ties: bool = False) -> np.ndarray:
    """Bytes live at each step of a memory schedule (each live range's size, aligned);
    `arena_only`: only the ranges the scratch arenas hold (not LUTs, persistent state or
    constants, which the layout puts in arenas of their own). `ties`: a staircase's shared
    bytes (`mem.Alias`) count once while both its ranges live, as the layout's lower bound
    counts them (the ties may all be kept: a layout need not reach it)."""
    r = mem.live_ranges(msched)
    sizes = (r.size + r.alignment - 1) // r.alignment * r.alignment
    if arena_only:
        buffers = msched.buffers
        sizes[np.array([buffers[b].persistent or buffers[b].kind == "lut" or buffers[b].constant
                        for b in r.range_buffer.tolist()], dtype=bool)] = 0
    # Each range adds its bytes where it starts and takes them off where it ends (within the
    # steps and one past them: `build_live_ranges`), summed up step by step.
    change = np.zeros(len(msched.steps) + 2, dtype=np.int64)
    np.add.at(change, r.start, sizes)
    np.add.at(change, r.end, -sizes)
    live = np.cumsum(change[:-1])
    if ties:
        for lower, upper, offset in r.ties:
            begin, end = max(r.start[lower], r.start[upper]), min(r.end[lower], r.end[upper])
            if begin < end:
                live[begin:end] -= max(0, min(int(r.size[lower]) - offset, int(r.size[upper])))
    return live


def _own_weight_buffers(schedule: NpuSchedule) -> list[int]:
    """Positions of the operations with a weight buffer of their own (not a cascade's)."""
    return [k for k, sop in enumerate(schedule.operations) if sop.weight_buffer and sop.shared_weights is None]


def _buffer_size(sop: ScheduledOperation) -> int:
    slots = 2 if sop.depth_step and not sop.single_slot else 1
    return slots * ((weight_buffer_bytes(sop) + 15) // 16 * 16)


def _buffer_spans(sop: ScheduledOperation, step: int, exact: bool = True) -> list[tuple[slice, int]]:
    """The steps an operation's own weight buffer is live, and its bytes there: its (first
    slice's) DMA runs under the previous step; a depth-sliced one fills its second slot under
    its own (not `exact`: both slots over both steps)."""
    slot = (weight_buffer_bytes(sop) + 15) // 16 * 16
    if not sop.depth_step or sop.single_slot or not exact:
        return [(slice(max(step - 1, 0), step + 1), _buffer_size(sop))]
    return [(slice(max(step - 1, 0), step + 1), slot), (slice(step, step + 1), slot)]


def memory_schedule(schedule: NpuSchedule, graph: SubGraph) -> tuple[mem.Schedule, dict[Any, int], list[int]]:
    """The memory planner's view: a buffer per feature-map buffer and per weight buffer, a step
    per operation and per CPU operator (so the NPU subgraphs' IFMs and OFMs stay live across
    the CPU work between them).

    Returns the schedule, the index of each buffer in it (feature-map buffers by tensor index,
    weight buffers by ``weights_key`` and ``second_slot_key``), and the step of each
    operation.
    """
    fms = _feature_map_schedule(schedule, graph)
    index = dict(fms.index)
    specs = list(fms.specs)  # each buffer's (name, kind, size, cpu_visible)
    steps = list(fms.steps)
    # What evicting each buffer to the slow memory (Dedicated_Sram) costs, in bytes at the
    # memory planner's per-byte rate: the allocator evicts the least costly per byte first.
    # Feature maps: the cycles their operations gain with them in the slow memory, as the cycle
    # model re-costs each (bytes times a rate missed most of it: it put MobileNetV1-0.75's
    # evictions on U65-256 at 55k cycles; the binary ran 420k slower). An operation's weight
    # buffer: the cycles it gains reading its weights in place. Constant copies: their bytes.
    access: dict[int, float] = {}
    arch = arch_of(schedule)
    fast = arch.region_memory(_core.Region.FastCache)
    slow = arch.region_memory(_core.Region.Arena)
    per_byte = _core.access_cycles_per_byte(arch, slow) - _core.access_cycles_per_byte(arch, fast)
    fast_name, slow_name = fast.name, slow.name  # an enum's name is a property call: not per operation
    for position, ((i, sop), (step, fm_reads, operands)) in enumerate(zip(_operations_in_order(schedule), fms.ops)):
        lo = sop.lowered
        # Without the op's description (a cost not from a schedule) or a slower memory: bytes.
        if per_byte > 0 and sop.cost.described is not None:
            # The family's schedules share most operations' costs: each one's shares are made
            # into per-buffer bytes once (kept with the family, by cost).
            found = fms.operand_access.get(id(sop.cost))
            if found is None:
                shares = sop.cost.eviction_cycles(fast_name, slow_name, arch)
                found = fms.operand_access[id(sop.cost)] = (
                    sop.cost, [(b, shares.get(name, 0.0) / per_byte) for name, b, _ in operands])
            for b, moved in found[1]:
                access[b] = access.get(b, 0.0) + moved
        else:
            for _, b, nbytes in operands:
                access[b] = access.get(b, 0.0) + nbytes
        extra = []  # the buffers it reads besides feature maps
        own = sop.shared_weights is None
        if own and not sop.weight_buffer and sop.constant_ifm2 != "copy" and not sop.staged_cycles:
            continue  # it reads feature maps only (its own weights' key is its position: no other made it)
        key = ("weights", position if own else sop.shared_weights)  # weights_key
        second = None  # the second slot of its own depth-sliced buffer (second_slot_key)
        if sop.weight_buffer and key not in index:
            index[key] = len(specs)
            buffer_kind = "double_weights" if sop.depth_step and not own else "weights"
            specs.append((f"{lo.name} weights", buffer_kind, (weight_buffer_bytes(sop) + 15) // 16 * 16, False))
            if sop.depth_step and own and not sop.single_slot:
                second = index[second_slot_key(position)] = len(specs)
                specs.append((f"{lo.name} weights (second slot)", "copy", specs[-1][2], False))
        for w in (index.get(key), second):
            if w is None:
                continue
            extra.append(w)
            if per_byte > 0 and sop.weight_buffer and sop.direct_cost is not None:
                # An evicted weight buffer is dropped: the operation reads its weights where
                # they are stored (see allocation.allocate), at its direct cost.
                moved = max(sop.direct_cost.total_cycles - sop.cost.total_cycles, 0.0) / per_byte
            else:
                moved = (2 if sop.weight_buffer else 1) * specs[w][2]  # copied in, read
            access[w] = access.get(w, 0.0) + moved
        for v in copied_constants(sop):
            copy = index[constant_key(position, v)] = len(specs)
            extra.append(copy)
            size = (len(schedule.segments[i].segment.constants[v.buffer]) + 15) // 16 * 16
            specs.append((f"{lo.name} constant", "copy", size, False))
            # Copied in, then read once per OFM element (broadcast).
            access[copy] = size + math.prod(lo.ofm.shape) * ELEMENT_SIZE[v.dtype]
        if sop.staged_cycles:
            copy = index[staged_key(position, lo.ifm.buffer)] = len(specs)
            extra.append(copy)
            specs.append((f"{lo.name} staged input", "copy", round16(schedule.segments[i].segment.buffers[lo.ifm.buffer]),
                          False))
            # Evicted, the copy only moves the map from one slow memory to another: what the
            # operation gains reading it in the fast memory, net of the DMA.
            gain = max(unstaged(sop, arch).cost.total_cycles - sop.cost.total_cycles - sop.staged_cycles, 0.0)
            access[copy] = gain / per_byte if per_byte > 0 else specs[copy][2]
        if extra:
            steps[step] = mem.step(fm_reads + tuple(extra), steps[step].writes, lo.name)
    # The schedules of a family share most buffers as they are, access bytes and all: each is
    # made once (a compile makes thousands, most of them equal to one made before).
    made = fms.buffers
    buffers = []
    for b, spec in enumerate(specs):
        key = (spec, access.get(b, 0.0))
        buf = made.get(key)
        if buf is None:
            name, kind, size, cpu, *state = spec
            buf = made[key] = mem.ScheduledBuffer(name, kind, size, access_bytes=key[1], cpu_visible=cpu,
                                                  persistent=bool(state and state[0]))
        buffers.append(buf)
    return mem.Schedule(buffers, steps, list(fms.aliases)), index, [step for step, _, _ in fms.ops]


def arch_of(schedule: NpuSchedule) -> "_core.ArchConfig":
    """The cycle model's target of `schedule`: its scheduler's, resolved once, else resolved now."""
    kept = schedule.target
    if kept is not None and (kept.accelerator, kept.system, kept.memory_mode) == (
            schedule.accelerator, schedule.system, schedule.memory_mode):
        return kept.arch
    return arch_config(schedule.accelerator, schedule.system, schedule.memory_mode)


def eviction_cycles(schedule: NpuSchedule, graph: SubGraph, buffers: list[mem.ScheduledBuffer], slow: set[int]
                    ) -> float:
    """The cycles `schedule` gains with the buffers `slow` (indices of `buffers`, its
    `memory_schedule`'s) moved to the slow memory: each operation with feature maps among them costed
    again by the cycle model with exactly those operands moved. The layout ranks evictions by
    each operand's share of its operation's gain (`memory_schedule`), and those shares add up
    to the gain only where every operand of an operation moves: one moved alone can make the
    operation as slow as all of them (openmv_yolov8n_192 on U85-256 within 147,456 B: the
    shares 5.46M cycles, the binary 6.25M, this 6.25M). Other buffers (weight buffers, copies)
    count as the layout counts them."""
    fms = _feature_map_schedule(schedule, graph)
    arch = arch_of(schedule)
    fast = arch.region_memory(_core.Region.FastCache)
    slow_memory = arch.region_memory(_core.Region.Arena)
    per_byte = _core.access_cycles_per_byte(arch, slow_memory) - _core.access_cycles_per_byte(arch, fast)
    total = sum(buffers[b].access_bytes * per_byte for b in slow if b >= len(fms.specs))
    gains: dict[tuple, float] = {}  # an operation's stripes share their cost: costed once per move
    ordered = [(sop, operands) for (_, sop), (_, _, operands) in zip(_operations_in_order(schedule), fms.ops)]
    for k, (sop, operands) in enumerate(ordered):
        # A map in a U85 chaining buffer (`chain`) is in no memory; a chain is costed as a
        # whole at its first operation, with its joiners' operands moved too.
        in_chain = dict(sop.chain)
        moved = tuple(name for name, b, _ in operands if b in slow and name not in in_chain)
        joins = bool({"ifm", "ifm2"} & in_chain.keys())
        if "ofm" in in_chain and not joins:
            n = 1
            while k + n < len(ordered) and {"ifm", "ifm2"} & dict(ordered[k + n][0].chain).keys():
                n += 1
            members = ordered[k:k + n]
            every = [tuple(name for name, b, _ in ops if b in slow and name not in dict(s.chain)) for s, ops in members]
            if any(every):
                total += max(CHAINING.cycles([s for s, _ in members], every, schedule.target or _Target.of(schedule),
                                             slow_memory) - sop.cost.total_cycles, 0.0)
            continue
        if joins or not moved:
            continue
        op = sop.cost.described
        if op is None:  # a cost not from a schedule: bytes at the planner's rate, as the layout
            total += sum(nbytes * per_byte for _, b, nbytes in operands if b in slow)
            continue
        key = (id(sop.cost), moved)
        if key not in gains:
            homes = {}
            for name in moved:  # FeatureMap fields are copies: each set back whole
                fm = getattr(op, name)
                if fm is not None and fm.memory == fast:
                    homes[name] = fm.memory
                    fm.memory = slow_memory
                    setattr(op, name, fm)
            gains[key] = max(_core.estimate(op, arch).total_cycles - sop.cost.total_cycles, 0.0) if homes else 0.0
            for name, home in homes.items():
                fm = getattr(op, name)
                fm.memory = home
                setattr(op, name, fm)
        total += gains[key]
    return total


def _operations_in_order(schedule: NpuSchedule) -> Iterator[tuple[int, ScheduledOperation]]:
    """Each NPU operation in execution order, with its segment's number."""
    for kind, i in schedule.order:
        if kind == "npu":
            for sop in schedule.segments[i].operations:
                yield i, sop


class _BufferSpec(NamedTuple):
    """A feature-map buffer as the memory schedule makes it (`mem.ScheduledBuffer`'s fields but
    the access bytes, which depend on the operations' costs)."""

    name: str
    kind: str
    size: int
    cpu_visible: bool
    persistent: bool = False  # state that outlives an inference: never aliased, never evicted


class _FeatureMapSchedule(NamedTuple):
    """The part of a memory schedule that its feature maps fix: the same for every schedule of
    the same stripes, whatever their weight buffers and costs (a budgeted compile lays out each
    candidate two or three times: without its weight buffers, with those that fit, without
    those the layout evicted). Made once per such family (see `_feature_map_schedule`)."""

    index: dict[Any, int]  # tensor -> its feature-map buffer
    specs: list[_BufferSpec]  # each feature-map buffer's
    steps: list[mem.Step]  # the operations' steps read their feature maps only
    # Per operation in execution order: its step, the feature maps it reads, and per operand
    # buffer ("ifm"/"ifm2"/"ofm", buffer, bytes).
    ops: list[tuple[int, tuple[int, ...], tuple[tuple[str, int, int], ...]]]
    aliases: list[mem.Alias]  # in-place operations and staircases: feature maps only
    named: tuple  # the objects the cache key names by id, held so that no id names another
    # The family's memory-planner buffers by (spec, access bytes), and each operation's
    # feature-map access bytes by its cost (held with them): see memory_schedule.
    buffers: dict[tuple, mem.ScheduledBuffer]
    operand_access: dict[int, tuple[Any, list[tuple[int, float]]]]


def _feature_map_schedule(schedule: NpuSchedule, graph: SubGraph) -> _FeatureMapSchedule:
    """`_FeatureMapSchedule` of `schedule`, from the cache its target keeps (a compile's
    schedules share one target) when a schedule of the same stripes was laid out lately."""
    ops = list(_operations_in_order(schedule))
    segments = tuple(s.segment for s in schedule.segments)
    # Blocks and depth slices count only where operations overlap (`_overlapping_operations`,
    # `_operator_runs`): elsewhere a schedule with weight buffers shares its lean one's (the
    # planner's budgeted points lay out both).
    if schedule.overlapping:
        operations = tuple([(id(sop.lowered), sop.cascade, sop.block, sop.depth_step, sop.chain) for _, sop in ops])
    else:
        operations = tuple([(id(sop.lowered), sop.cascade, sop.chain) for _, sop in ops])
    key = (id(graph), tuple(schedule.order), tuple(map(id, segments)), schedule.overlapping, schedule.overlap_chains,
           operations)
    cache = schedule.target.feature_map_schedules if schedule.target is not None else {}
    found = cache.get(key)
    if found is None:
        named = (graph, segments, [sop.lowered for _, sop in ops])
        found = keep_recent(cache, key, _make_feature_map_schedule(schedule, graph, ops, named),
                            _FEATURE_MAP_SCHEDULES_KEPT)
    return found


def keep_recent(cache: dict, key: Any, value: Any, kept: int) -> Any:
    """Store `value` under `key` in one of the target's caches and drop the oldest entries
    beyond `kept` (dicts keep insertion order); returns `value`."""
    cache[key] = value
    while len(cache) > kept:
        del cache[next(iter(cache))]
    return value


# A budgeted compile lays out one family of schedules at a time, but `cascader.plan` compiles
# dozens of budgets of one target, each trying the same few proposals again (MobileNetV2-224 on
# U65-256: 36 families, made 253 times with 4 kept, 36 times with 32; 2.2 -> 1.9 s CPU, +8 MB).
_FEATURE_MAP_SCHEDULES_KEPT = 32


def _feature_map_buffers(schedule: NpuSchedule, graph: SubGraph
                         ) -> tuple[dict[Any, int], list[_BufferSpec], tuple[int, ...]]:
    """The feature-map buffers of a schedule's segments (`_FeatureMapSchedule.index` and
    `specs`) and the resource variables' among them (live across the whole inference): they
    depend on the segments alone, not on the operations' stripes or blocks."""
    # A tensor is one buffer for the whole inference. Each segment resolves its own aliases
    # (a reshape in one segment, its output read as an IFM by the next): join them across
    # segments so that every segment's name for the bytes lands on the same buffer.
    parent: dict[int, int] = {}

    def find(t: int) -> int:
        while parent.get(t, t) != t:
            parent[t] = parent.get(parent[t], parent[t])
            t = parent[t]
        return t

    for s in schedule.segments:
        for t, b in s.segment.aliases.items():
            rt, rb = find(t), find(b)
            if rt != rb:
                parent[max(rt, rb)] = min(rt, rb)
    sizes: dict[int, int] = {}
    cpu_visible: set[int] = set()
    names: dict[int, str] = {}  # the segments' own buffers; the rest are the graph's tensors
    persistent: set[int] = set()
    resident: set[int] = set()  # resource variables: in the arena, live across the whole inference
    for s in schedule.segments:
        seg = s.segment
        names.update(seg.scratch)
        persistent.update(find(b) for b in seg.persistent)
        resident.update(find(b) for b in seg.resident)
        cpu_visible.update(resident)  # at one arena offset, dense, as the CPU's maps
        for b, size in seg.buffers.items():
            sizes[find(b)] = max(sizes.get(find(b), 0), size)
        cpu_visible.update(find(t) for t in (*seg.ifms, *seg.ofms))
    specs: list[_BufferSpec] = []
    index: dict[Any, int] = {}
    for root in sorted(sizes):
        index[root] = len(specs)
        name = names[root] if root in names else graph.tensors[root].name
        specs.append(_BufferSpec(name, "feature_map", sizes[root], root in cpu_visible, root in persistent))
    for s in schedule.segments:
        for t, b in s.segment.aliases.items():
            index[t] = index[b] = index[find(b)]
    # A variable holds its value from one inference to the next: it is live from the first step
    # to the last, as a model input that is also an output.
    kept = tuple(sorted(index[b] for b in resident))
    return index, specs, kept


def _make_feature_map_schedule(schedule: NpuSchedule, graph: SubGraph, ops: list[tuple[int, ScheduledOperation]],
                               named: tuple) -> _FeatureMapSchedule:
    index, specs, kept = _feature_map_buffers(schedule, graph)
    # A map kept in the Ethos-U85's chaining buffer (u85_chaining) takes no memory.
    chained = {index[sop.lowered.ofm.buffer] for _, sop in ops if sop.chain and "ofm" in dict(sop.chain)}
    if chained:
        specs = [s._replace(size=0) if b in chained else s for b, s in enumerate(specs)]
    steps: list[mem.Step] = [mem.Step(writes=tuple(index[t] for t in graph.inputs if t in index) + kept,
                                      name="inputs")]
    op_rows = []
    npu = iter(ops)
    at = index.get
    for kind, i in schedule.order:
        if kind == "cpu":
            op = graph.operators[i]
            steps.append(mem.Step(tuple(index[t] for t in op.inputs if t in index),
                                  tuple(index[t] for t in op.outputs if t in index), f"cpu {i}"))
            continue
        for _ in schedule.segments[i].operations:
            lo = next(npu)[1].lowered
            reads, operands = [], []
            for name, v in (("ifm", lo.ifm), ("ifm2", lo.ifm2), ("ofm", lo.ofm)):
                b = at(v.buffer) if v is not None else None
                if b is not None:
                    operands.append((name, b, math.prod(v.shape) * ELEMENT_SIZE[v.dtype]))
                    if v is not lo.ofm:
                        reads.append(b)
            reads = tuple(reads)
            op_rows.append((len(steps), reads, tuple(operands)))
            steps.append(mem.step(reads, (index[lo.ofm.buffer],), lo.name))
    steps.append(mem.Step(tuple(index[t] for t in graph.outputs if t in index) + kept, name="outputs"))
    buffers = specs  # what the alias rules read of a buffer: its kind, size and visibility
    op_steps = [step for step, _, _ in op_rows]
    uses = _StepUses(steps)
    aliases = _in_place_elementwise(schedule, uses, index, op_steps, buffers,
                                    {index[t] for t in (*graph.inputs, *graph.outputs) if t in index} | set(kept))
    aliases += _staircases(schedule, uses, index, op_steps, buffers, aliases)
    if schedule.overlapping:
        aliases += _overlapping_operations(schedule, uses, steps, index, op_steps, buffers, aliases)
    aliases = [a for a in aliases if a.buffer not in chained and a.target not in chained]
    return _FeatureMapSchedule(index, specs, steps, op_rows, aliases, named, {}, {})


class _StepUses:
    """Per buffer, the first and last steps that use it and the first that writes it."""

    def __init__(self, steps: list[mem.Step]) -> None:
        last: dict[int, int] = {}
        first: dict[int, int] = {}
        first_write: dict[int, int] = {}
        for k, step in enumerate(steps):
            for b in step.reads:
                last[b] = k
                first.setdefault(b, k)
            for b in step.writes:
                last[b] = k
                first.setdefault(b, k)
                first_write.setdefault(b, k)
        self.last, self.first, self.first_write = last, first, first_write


def _row_bytes(view: FeatureMapView) -> tuple[int, int]:
    """The bytes of the whole rows a view touches in its buffer (H is the outermost axis of
    both layouts): a superset of its bytes when it covers part of the width."""
    first = view.offset // view.strides[0]
    return first * view.strides[0], (first + view.shape[0]) * view.strides[0]


def _view_span(view: FeatureMapView) -> tuple[int, int]:
    """The bytes from a view's first to its last element, whatever its strides (an NHWC view
    whose H stride is not the largest, as a transpose's steps read and write)."""
    return view.offset, view.offset + sum((n - 1) * s for n, s in zip(view.shape, view.strides)) + view.element_size


def _operator_runs(schedule: NpuSchedule, op_steps: list[int]) -> list[list[tuple[ScheduledOperation, int]]]:
    """The runs of two or more consecutive lone NPU operations (no cascade, no depth slices) of
    one TFLite operator: a TRANSPOSE's row steps, each reading one row of its input and writing
    one of its output."""
    def lone(sop: ScheduledOperation) -> bool:  # NHWC views only: `_view_span` spans them
        lo = sop.lowered
        return sop.cascade is None and not sop.depth_step and all(
            v is None or v.layout == "NHWC" for v in (lo.ifm, lo.ifm2, lo.ofm))

    runs: list[list[tuple[ScheduledOperation, int]]] = []
    current: list[tuple[ScheduledOperation, int]] = []
    for sop, k in zip(schedule.operations, op_steps):
        if lone(sop) and (not current or (sop.lowered.sources == current[-1][0].lowered.sources
                                          and k == current[-1][1] + 1)):
            current.append((sop, k))
            continue
        if len(current) > 1:
            runs.append(current)
        current = [(sop, k)] if lone(sop) else []
    if len(current) > 1:
        runs.append(current)
    return runs


def _staircases(schedule: NpuSchedule, uses: "_StepUses", index: dict[Any, int], op_steps: list[int],
                buffers: list[_BufferSpec], partners: list[mem.Alias]) -> list[mem.Alias]:
    """Each cascade's output written over an input it consumes, where that saves bytes
    (memory/staircase.hpp; the planner counts the same). The input must be a feature map
    read for the last time in the cascade; input and output are not both tensors the CPU
    sees (TFLM would see two of its tensors share bytes). The shift comes from the stripes' own
    byte accesses, whole rows each (partial widths, from column bands, count as their whole
    rows: safe, and no gain). `partners`: the in-place, slice and reshape aliases made so far; a
    buffer and its partners are one range, which is the sink of one staircase and the source of
    one at most, and whose bytes and steps are all its members' (each at its place in the
    range): a PRELU's OFM written in place over its positive part, which the PRELU writes first,
    was tied over the PRELU's input by the OFM's own writes alone, and the positive part then
    overwrote the input its next operation read (random network uint8 seed 2530 on U55-128 at
    its least SRAM, every output wrong).

    With `schedule.overlapping` (the least-SRAM variant), a run of one operator's lone
    operations (`_operator_runs`) counts as a cascade too, each operation's accesses the span
    of its views (`_view_span`): zoo mobilenet_v2_nchw's TRANSPOSE (its first step swaps H and W
    of the model input into a scratch copy, each later step writes one output row from it)
    writes its NHWC output one row (288 B) below the model input, which only its first step
    reads. The planner does not count these (its bound stays a lower bound)."""
    parent = {a.buffer: a for a in partners}

    def group(b: int) -> int:
        while b in parent:
            b = parent[b].target
        return b

    def place(b: int) -> int:
        """Bytes from its range's root to `b` (in place: `shift` below its target; a slice or
        reshape: `offset` into it)."""
        at = 0
        while b in parent:
            at += parent[b].offset - parent[b].shift
            b = parent[b].target
        return at

    members: dict[int, list[int]] = {}
    for b in set(uses.first) | set(uses.last):
        members.setdefault(group(b), []).append(b)
    first = {g: min(uses.first[b] for b in bs) for g, bs in members.items()}
    last = {g: max(uses.last[b] for b in bs) for g, bs in members.items()}

    def kept(g: int, attribute: str) -> bool:  # a member of range `g` is persistent, CPU-visible
        return any(getattr(buffers[b], attribute) for b in members[g])

    cascades: dict[Any, list[tuple[ScheduledOperation, int]]] = {}
    for sop, k in zip(schedule.operations, op_steps):
        if sop.cascade is not None:
            cascades.setdefault(sop.cascade, []).append((sop, k))
    spans = set()  # the keys of the runs, whose accesses are their views' spans
    if schedule.overlapping:
        for run in _operator_runs(schedule, op_steps):
            cascades[("run", run[0][1])] = run
            spans.add(("run", run[0][1]))
    sinks: set[int] = set()
    sources: set[int] = set()
    aliases = []
    for key, ops in cascades.items():
        begin, end = ops[0][1], ops[-1][1]
        extent = _view_span if key in spans else _row_bytes
        writes: dict[int, list] = {}
        reads: dict[int, list] = {}
        for sop, k in ops:
            lo = sop.lowered
            out = index.get(lo.ofm.buffer)
            if out is not None and not lo.ofm.wrap_rows:
                at = place(out)
                lowest, highest = extent(lo.ofm)
                writes.setdefault(group(out), []).append((k, lowest + at, highest + at))
            for v in (lo.ifm, lo.ifm2):
                b = index.get(v.buffer) if v is not None else None
                if b is not None and not v.wrap_rows:
                    at = place(b)
                    lowest, highest = extent(v)
                    reads.setdefault(group(b), []).append((k, lowest + at, highest + at))
        for sink, written in writes.items():
            if sink in sinks or first[sink] < begin:
                continue
            best = None
            for source, read in reads.items():
                if (source in sources or source == sink or source in writes
                        or any(buffers[b].kind != "feature_map" for b in members[source])
                        or first[source] >= begin or last[source] > end
                        or kept(source, "persistent") or kept(sink, "persistent")
                        or (kept(sink, "cpu_visible") and kept(source, "cpu_visible"))):
                    continue
                shift = mem.staircase_shift(written, read)
                shared = min(buffers[sink].size - shift, buffers[source].size)
                if shared > 0 and (best is None or shared > best[0]):
                    best = (shared, source, shift)
            if best is not None:
                aliases.append(mem.Alias(sink, best[1], kind="staircase", shift=best[2]))
                sinks.add(sink)
                sources.add(best[1])
    return aliases


# The operations whose OFM may run over the IFM rows they have consumed (`_overlapping_operations`):
# those the block traversal (arch/block_traversal.hpp) knows on the U55 and U65.
_OVERLAP_KINDS = ("conv", "depthwise", "pool")


def _overlapping_operations(schedule: NpuSchedule, uses: "_StepUses", steps: list[mem.Step], index: dict[Any, int],
                            op_steps: list[int], buffers: list[_BufferSpec], others: list[mem.Alias]) -> list[mem.Alias]:
    """An operation run whole (no cascade) written over the IFM it consumes, partly in place: the
    OFM starts `shift` bytes below the IFM and its blocks overwrite only IFM rows no later block
    reads (a 10x8 stride-2 convolution of a 49x40 map writes its 25 OFM rows over the input rows
    behind its window). A staircase alias (a tie: each keeps its own lifetime).

    The shift (`_overlap_shift`) puts every OFM block's IFM reads, in the NPU's block order and
    with the operation's own block config, above every byte an earlier block wrote; a block
    may write over its own footprint. That rule is the hardware's (sim/in_place_hazard.hpp):
    jobs are fetched in order, each reads its IFM footprint into the SHRAM before its OFM block
    is written, and a job's writes follow its accumulation, which follows every earlier job's.
    Pipelining (the next job's IFM fetched while this one computes, OFM write-back trailing)
    only moves a later job's reads earlier or an earlier job's writes later: it never lets a
    job read a byte the rule lets another overwrite before it, so no extra slack is kept. The
    simulator replays the same rule on every binary and rejects an operation that breaks it
    (`BinaryError`).

    Taken where: the U55 and U65 (the traversal does not model the U85's); a convolution,
    depthwise or pooling with one input, run as one NPU operation (no depth slices) writing all
    of its OFM buffer alone, from offset 0, first written here; the IFM viewed from offset 0,
    read for the last time here and not by the operation before (its margin, as the
    staircase's: consecutive operations may overlap where BLOCKDEP lets them, ours emit 0); not
    both tensors the CPU sees; neither persistent nor in another alias; and only where bytes are
    shared (OFM bytes beyond the shift). Not where one output position reads all of the IFM (a
    dense layer, a global pool): a single job could write over an input it has read whole,
    but the floor (`floor.floor`) counts such an input whole beside its output, element by
    element, and stays a lower bound only if no layout shares them.

    Taken only where it lowers the peak: at a step whose live feature-map bytes are the most
    of any step's (`_live_bytes`), one at a time. A tie elsewhere saves nothing and costs the
    greedy layout's search over which ties to keep (movenet's 26 lone operations all tied:
    255,744 B for a least-SRAM proposal laid out in 246,528 B without them). `others`: the
    in-place and staircase aliases made so far: their buffers are left alone, but for a
    staircase's output, which may be written over here, and its input, which may be written
    over its own input (a chain of ties).

    With `overlap_chains`, of the operations at those positions, every candidate is taken, and
    an operation's IFM may be written over its own IFM by the operation before (a chain of
    ties, as a staircase's are: the layout places a chain as one unit, or cuts it where that is
    lower). A chain puts an OFM over an
    input two steps back, which the operation before read: ours emit BLOCKDEP 0, so that
    operation has finished (the one-step margin kept is the pair's own).
    """
    if Accelerator(schedule.accelerator).product == ethos_u85.PRODUCT:
        return []
    # A staircase's output may still be written over here (the lower of one tie and the upper
    # of another: a chain), and its input may still be written over its own input.
    aliased = {b for a in others if a.kind != "staircase" for b in (a.buffer, a.target)}
    lowers = {a.buffer for a in others if a.kind == "staircase"}
    uppers = {a.target for a in others if a.kind == "staircase"}
    chained = schedule.overlap_chains
    writers: dict[int, int] = {}
    for step in steps:
        for b in step.writes:
            writers[b] = writers.get(b, 0) + 1
    candidates = []  # (step, bytes shared, alias)
    for position, (sop, k) in enumerate(zip(schedule.operations, op_steps)):
        lo = sop.lowered
        if not _may_overlap(sop) or (chained and position not in chained):
            continue
        out, source = index.get(lo.ofm.buffer), index.get(lo.ifm.buffer)
        if (out is None or source is None or out == source or out in aliased or source in aliased
                or out in lowers or source in uppers or writers.get(out) != 1 or uses.first.get(out) != k
                or uses.last.get(source) != k
                or uses.first.get(source, k) >= k or source in steps[k - 1].reads
                or buffers[out].kind != "feature_map" or buffers[source].kind != "feature_map"
                or buffers[out].persistent or buffers[source].persistent
                or (buffers[out].cpu_visible and buffers[source].cpu_visible)):
            continue
        shift = _overlap_shift(sop, schedule.target)
        shared = min(buffers[out].size - shift, buffers[source].size)
        if shared > 0:
            candidates.append((k, shared, mem.Alias(out, source, kind="staircase", shift=shift)))
            if chained:
                lowers.add(out)
                uppers.add(source)
            else:
                aliased.update((out, source))
    if chained or not candidates:
        return [alias for _, _, alias in candidates]
    live = _live_bytes(uses, len(steps), buffers, others)
    aliases = []
    while candidates:
        top = max(live)
        at_peak = [c for c in candidates if live[c[0]] == top]
        if not at_peak:
            break
        k, shared, alias = max(at_peak, key=lambda c: c[1])
        candidates.remove((k, shared, alias))
        aliases.append(alias)
        live[k] -= shared  # the source dies at k, where the sink is born: they meet there only
    return aliases


def _may_overlap(sop: ScheduledOperation) -> bool:
    """The operation's own form lets it write over its IFM (`_overlapping_operations`; its
    buffers decide the rest): run whole as one NPU operation, of one input, both maps from
    offset 0 and unwrapped, no output position reading all of the IFM."""
    lo = sop.lowered
    return not (sop.cascade is not None or sop.depth_step or lo.kind not in _OVERLAP_KINDS or lo.ifm2 is not None
                or lo.ifm.offset or lo.ofm.offset or lo.ifm.wrap_rows or lo.ofm.wrap_rows
                or position_reads_all(lo, lo.ifm))


def _live_bytes(uses: "_StepUses", steps: int, buffers: list[_BufferSpec], aliases: list[mem.Alias]) -> list[int]:
    """Per step, the bytes of the feature maps live there, as `mem.peak_live_bytes` counts them:
    an in-place alias's buffer within its target's (their range the union of both), a
    staircase's shared bytes once where both live."""
    first, last = dict(uses.first), dict(uses.last)
    merged = set()
    for a in aliases:
        if a.kind == "in_place" and a.buffer in first and a.target in first:
            first[a.target] = min(first[a.target], first[a.buffer])
            last[a.target] = max(last[a.target], last[a.buffer])
            merged.add(a.buffer)
    diff = [0] * (steps + 1)
    for b, spec in enumerate(buffers):
        if b in first and b not in merged and not spec.persistent:
            diff[first[b]] += spec.size
            diff[last[b] + 1] -= spec.size
    for a in aliases:
        if a.kind == "staircase" and a.buffer in first and a.target in first:
            begin, end = max(first[a.buffer], first[a.target]), min(last[a.buffer], last[a.target])
            if begin <= end:
                shared = max(0, min(buffers[a.buffer].size - a.shift, buffers[a.target].size))
                diff[begin] -= shared
                diff[end + 1] += shared
    return list(itertools.accumulate(diff[:steps]))


def with_overlapping_blocks(schedule: NpuSchedule, graph: SubGraph, above: int = 0) -> NpuSchedule:
    """The least-SRAM variant of a schedule (`compiler._Prepared.least_scratch`): `schedule`
    with `overlapping` on, each operation written over its IFM (`_overlapping_operations`) on
    the block config that lets the pair take the fewest bytes, max(OFM, shift + IFM), the
    fastest of those by the cycle model; its weights, re-encoded for that block, read from
    flash. The block the cycle model picks for speed may need a larger shift (tflm
    micro_speech's 10x8 stride-2 convolution on U55-128: its 11x10 blocks need the output
    2,704 B below the 1,960 B input, 4,664 B the pair; with 5x20 blocks 1,760 B, and the input
    fits inside the output's 4,000 B).

    Tried are the blocks of the scheduled one's width and depth with fewer rows, and those
    spanning the OFM's width (each band of rows one job, which may overwrite its own input);
    only for pairs above `above` bytes (the floor, say: a pair within it cannot be what keeps
    a schedule above it) that another block could shrink, and only where both maps are whole
    in every schedule (a tensor the CPU sees, or one an operation reads all of at one output
    position): a pair a cascade can stripe away is not worth a slower block nor a variant.
    Returns `schedule` itself where no such pair is written over its input."""
    if schedule.overlapping:
        return schedule
    index, specs, _ = _feature_map_buffers(schedule, graph)
    whole = {b for b, spec in enumerate(specs) if spec.cpu_visible}
    for _, sop in _operations_in_order(schedule):
        for v in (sop.lowered.ifm, sop.lowered.ifm2):
            if v is not None and v.buffer in index and position_reads_all(sop.lowered, v):
                whole.add(index[v.buffer])
    # Only an operation written over its IFM with both maps whole makes a variant: where none
    # may be, the overlapping schedule (its in-place shifts, each a walk of the operation's
    # jobs) is not made (MobileNetV2-224: 9 ms of a 90 ms `plan`).
    if not any(_may_overlap(sop) and index.get(sop.lowered.ofm.buffer) in whole
               and index.get(sop.lowered.ifm.buffer) in whole
               and not (specs[index[sop.lowered.ofm.buffer]].cpu_visible and specs[index[sop.lowered.ifm.buffer]].cpu_visible)
               for seg in schedule.segments for sop in seg.operations):
        return schedule
    variant = replace(schedule, overlapping=True)
    fms = _feature_map_schedule(variant, graph)
    overlaps = {(a.buffer, a.target): a.shift for a in fms.aliases if a.kind == "staircase"}
    target = schedule.target or _Target(schedule.accelerator, schedule.system, schedule.memory_mode,
                                        [s.segment for s in schedule.segments])
    paired = False  # a pair of whole maps written over its input

    def leaner(_: int, sop: ScheduledOperation) -> ScheduledOperation:
        nonlocal paired
        lo = sop.lowered
        out, source = fms.index.get(lo.ofm.buffer), fms.index.get(lo.ifm.buffer)
        shift = overlaps.get((out, source)) if sop.cascade is None and lo.kind in _OVERLAP_KINDS else None
        if shift is None or out not in whole or source not in whole:
            return sop
        paired = True
        ofm_bytes, ifm_bytes = _view_bytes(lo.ofm), _view_bytes(lo.ifm)
        if max(ofm_bytes, shift + ifm_bytes) <= max(above, ofm_bytes, ifm_bytes) or target.is_u85:
            # Lean enough; or the U85's, whose block configs (and the traversal the shift
            # follows) are not modelled: an operator run's staircase there (a MIRROR_PAD's
            # copies) keeps its scheduled blocks (random network uint8 seed 4189 on U85-256:
            # `cascader.plan` raised InvalidArgumentError from the block enumeration).
            return sop
        raw = _raw_stream_bytes(lo)
        best = (max(ofm_bytes, shift + ifm_bytes), -1.0, sop.block, sop.part_kernel_first)
        for block, pkf in _block_options(target, lo):
            if not ((block[1:] == tuple(sop.block[1:]) and block[0] < sop.block[0]) or block[1] >= lo.ofm.shape[1]):
                continue
            candidate = replace(sop, block=block, part_kernel_first=pkf)
            need = max(ofm_bytes, _overlap_shift(candidate, target) + ifm_bytes)
            if need < best[0] or (need == best[0] and best[1] >= 0):
                cycles = target.cost(lo, *raw, block, pkf if lo.kind == "conv" else None).total_cycles
                if need < best[0] or cycles < best[1]:
                    best = (need, cycles, block, pkf)
        if best[1] < 0:
            return sop  # the scheduled block is already the leanest
        block, pkf = best[2], best[3]
        if lo.weights is None:
            return replace(sop, block=block, part_kernel_first=pkf, cost=target.cost(lo, block=block))
        encoded = _encode(lo, block, pkf, target.accelerator)
        cost = target.cost(lo, *_stream_bytes(encoded), block, pkf if lo.kind == "conv" else None)
        return replace(sop, block=block, part_kernel_first=pkf, cost=cost, encoded=encoded, weight_buffer=False,
                       direct_cost=None, depth_step=0, single_slot=False, direct_encoded=None)

    leanest = _mapped(variant, leaner)
    return leanest if paired else schedule


# Of the blocks that would let an operation start its OFM fewer bytes below its IFM, the
# leanest this many whose cost on the raw weight bytes is no slower are encoded and costed
# exactly (`_leanest_block`): each encoding is a pass over the weights.
LEANEST_BLOCKS_ENCODED = 4


def with_weight_room(schedule: NpuSchedule) -> NpuSchedule | None:
    """`schedule` with lone operations written over their IFMs, chained, every tie the
    layout's to keep or break (`overlapping`, `overlap_chains`), each such operation on the
    block config of the least shift (`_overlap_shift`) among those the cycle model costs no
    slower than its own, with its weights as scheduled (a weight buffer stays, its streams
    re-encoded for the block): the variant a budgeted compile tries where weight buffers do not
    fit beside whole feature maps. A buffer's DMA runs under the operation before, so it needs
    room beside that operation's IFM and OFM as well as beside its own: zoo DS-CNN's 25x5x64
    maps fill Vela's Size SRAM (16,000 B) on U55-128, and its 1x1 convolutions then read their
    4.7 KB of weights from flash once per OFM block (14.2k cycles each, 5.9k buffered). Its
    depthwise on 5x6x16 blocks needs a 1,600 B shift (3,840 B on the scheduled 13x6x16, and
    7,584 cycles against 8,064), its 1x1 convolutions on 4x6x64 none (a job may write over its
    own input): the chain of maps then leaves room for the buffers of the first two of four.

    Only the operations a buffer is live beside are offered, each buffered operation and the
    one before it: a chain drifts down by its shifts, and one through the whole network cost
    the layout's search the room it makes (zoo kws_mean at 16,000 B: the first two buffers
    laid out in 17,120 B with every operation chained, within 16,000 B so).

    None on the U85 (its traversal is not modelled) or where no operation run alone has a
    weight buffer of its own."""
    target = _Target.of(schedule)
    own = _own_weight_buffers(schedule)
    if target.is_u85 or schedule.overlapping or not own:
        return None
    beside = frozenset(j for k in own for j in (k - 1, k) if j >= 0)
    segments, position = [], 0
    for seg in schedule.segments:
        ops: list[ScheduledOperation] = []
        for sop in seg.operations:
            slack = ops[-1].cost.buffering_slack_cycles if ops else 0
            moved = bool(ops) and ops[-1] is not seg.operations[len(ops) - 1]
            ops.append(_leanest_block(sop, target, slack, moved, position in beside))
            position += 1
        segments.append(SegmentSchedule(seg.segment, ops))
    return replace(schedule, segments=segments, overlapping=True, overlap_chains=beside)


def _leanest_block(sop: ScheduledOperation, target: _Target, slack: int, moved: bool, offered: bool
                   ) -> ScheduledOperation:
    """`with_weight_room`'s block for one operation: its own, or, where it is `offered` to be
    written over its IFM, the one of the least shift the cycle model costs no slower (`slack`:
    the operation before's, as that one now runs). `moved`: the operation before changed, so
    a buffered operation is costed again with it."""
    lo = sop.lowered
    traversal = (lambda pkf: pkf) if lo.kind == "conv" else (lambda pkf: None)
    buffered = sop.weight_buffer and sop.shared_weights is None

    def costed(block, pkf: bool, streams: tuple[int, int]) -> OpCost:
        return target.cost(lo, *streams, block, traversal(pkf), buffered=buffered, slack=slack)

    if moved and buffered:  # the slack its DMA hides under changed
        sop = replace(sop, cost=_sliced_cost(lo, sop.block, sop.part_kernel_first, sop.encoded, sop.depth_step, target,
                                             None if sop.single_slot else slack)
                      if sop.depth_step else costed(sop.block, sop.part_kernel_first, _stream_bytes(sop.encoded)))
    if not offered or not _may_overlap(sop) or sop.staged_cycles or sop.shared_weights is not None:
        return sop
    shift = _overlap_shift(sop, target)
    if shift == 0:
        return sop
    raw = _raw_stream_bytes(lo)
    bar = costed(sop.block, sop.part_kernel_first, raw).total_cycles
    leaner = []  # (shift, raw cycles, block, part-kernel-first)
    for block, pkf in _block_options(target, lo):
        if block == tuple(sop.block) and pkf == sop.part_kernel_first:
            continue
        cycles = costed(block, pkf, raw).total_cycles
        if cycles <= bar:
            need = _overlap_shift(replace(sop, block=block, part_kernel_first=pkf), target)
            if need < shift:
                leaner.append((need, cycles, block, pkf))
    for _, _, block, pkf in sorted(leaner)[:LEANEST_BLOCKS_ENCODED]:
        if lo.weights is None:
            cost = costed(block, pkf, (0, 0))
            if cost.total_cycles <= sop.cost.total_cycles:
                return replace(sop, block=block, part_kernel_first=pkf, cost=cost)
            continue
        encoded = _encode(lo, block, pkf, target.accelerator)
        streams = _stream_bytes(encoded)
        cost = costed(block, pkf, streams)
        if cost.total_cycles <= sop.cost.total_cycles:
            direct = target.cost(lo, *streams, block, traversal(pkf)) if buffered else None
            return replace(sop, block=block, part_kernel_first=pkf, cost=cost, encoded=encoded, direct_cost=direct)
    return sop


def _block_options(target: _Target, lo: LoweredOperation) -> Iterator[tuple[tuple[int, int, int], bool]]:
    """Every (OFM block, part-kernel-first) of the target's block configs for `lo` (the
    traversal only for a convolution)."""
    for config in _core.enumerate_block_configs(target._accelerator._config, _core.block_query(target.npu_op(lo))):
        block = config.ofm_block
        yield (block.height, block.width, block.depth), config.part_kernel_first if lo.kind == "conv" else False


def _view_bytes(view: FeatureMapView) -> int:
    """The bytes a whole-buffer view spans: its rows at its row stride."""
    return view.shape[0] * view.strides[0]


def _overlap_shift(sop: ScheduledOperation, target: "_Target | None" = None) -> int:
    """The trailing shift of a lone operation as its block config runs it: the fewest bytes (a
    multiple of 16) its OFM may start below its IFM with every job's IFM reads above every byte
    an earlier job wrote (the jobs and their footprints in the NPU's order:
    arch/block_traversal.hpp). Safe at that shift and at any larger one; `_core.min_in_place_shift`'s
    bound when its search gives up. Its search for the least safe shift can go lower (a job may
    read past a gap in what earlier ones wrote), but replays every byte run (over a second for
    a 257x257x16 depthwise); this is one pass over the jobs' corners. `target`: the schedule's,
    whose cache keeps the shift for the other schedules of a compile."""
    lo = sop.lowered
    key = (id(lo), tuple(sop.block), sop.part_kernel_first)
    cache = target.overlap_shifts if target is not None else {}
    if key not in cache:
        cache[key] = (lo, _trailing_shift(sop))
    return cache[key][1]


def _trailing_shift(sop: ScheduledOperation) -> int:
    """`_overlap_shift`, computed."""
    lo = sop.lowered
    r = lo.registers

    def feature_map(v: FeatureMapView, operand: bool) -> dict:
        h, w, c = v.shape
        return {"region": 1, "base": [0, 0, 0, 0], "shape": (1, 1, c) if operand else (h, w, c),
                "tiles": (h, h, w), "strides": tuple(v.strides), "dtype": v.dtype, "layout": v.layout,
                "zero_point": 0}

    record = {"kind": lo.kind, "ifm": feature_map(lo.ifm, True), "ofm": feature_map(lo.ofm, False),
              "kernel": dict(r["kernel"], part_kernel_first=sop.part_kernel_first),
              "padding": tuple(r.get("padding", (0, 0, 0, 0))), "block": tuple(sop.block),
              "ifm_upscale": r.get("ifm_upscale", 0)}
    if "sub_op" in r:
        record["sub_op"] = r["sub_op"]
    jobs = np.array(_core.block_traversal(record), dtype=np.int64)  # job, (ofm, ifm, ifm2), (y, x, c), (begin, end)

    def address(v: FeatureMapView, y: np.ndarray, x: np.ndarray, c: np.ndarray) -> np.ndarray:
        # Increasing in each coordinate in both layouts: a box's bytes lie between its corners.
        sy, sx, sc = v.strides
        if v.layout == "NHCWB16":
            return y * sy + x * sx + c // 16 * sc + c % 16 * v.element_size
        return y * sy + x * sx + c * sc

    ofm, ifm = jobs[:, 0], jobs[:, 1]
    written = address(lo.ofm, ofm[:, 0, 1] - 1, ofm[:, 1, 1] - 1, ofm[:, 2, 1] - 1) + lo.ofm.element_size
    before = np.maximum.accumulate(written)[:-1]  # the highest byte end the jobs before each wrote
    reads = (ifm[1:, :, 0] < ifm[1:, :, 1]).all(axis=1)  # a job wholly in the padding reads nothing
    first_read = address(lo.ifm, ifm[1:, 0, 0], ifm[1:, 1, 0], ifm[1:, 2, 0])
    need = int((before - first_read)[reads].max(initial=0))
    return -(-max(need, 0) // 16) * 16


def _in_place_elementwise(schedule: NpuSchedule, uses: "_StepUses", index: dict[Any, int], op_steps: list[int],
                          buffers: list[_BufferSpec], model_io: set[int]) -> list[mem.Alias]:
    """An elementwise OFM written over an operand read for the last time (a residual ADD's
    input, typically): the same bytes, one buffer less.

    Safe at offset 0: each OFM element depends only on the operand elements at its own
    position, which the NPU reads before it writes that block (proven block by block in
    tests/test_in_place.py). The operand must be viewed whole, in the OFM's shape and layout,
    and live no longer than this step; model inputs and outputs are left alone.
    """
    last, first_write = uses.last, uses.first_write
    aliased: set[int] = set()
    aliases = []
    for sop, k in zip(schedule.operations, op_steps):
        lo = sop.lowered
        if lo.kind != "elementwise" or lo.ofm.offset:
            continue
        out = index[lo.ofm.buffer]
        if out in aliased or out in model_io or first_write.get(out) != k:
            continue
        for v in (lo.ifm, lo.ifm2):
            t = index.get(v.buffer) if v is not None else None
            if (t is None or t in aliased or t in model_io or last.get(t) != k or v.offset
                    or (v.shape, v.layout, v.strides) != (lo.ofm.shape, lo.ofm.layout, lo.ofm.strides)
                    or buffers[t].size != buffers[out].size or buffers[t].cpu_visible != buffers[out].cpu_visible
                    or buffers[t].persistent or buffers[out].persistent):
                continue
            aliases.append(mem.Alias(out, t, kind="in_place"))
            aliased.update((out, t))
            break
    return aliases


def unflattened(lo: LoweredOperation, shapes: dict[int, tuple[int, int, int]]) -> LoweredOperation:
    """A per-element copy that the lowering streams 16 channels wide (`_flatten_copies`), seen
    in its tensors' own shapes again: the planner stripes rows of those."""
    r = lo.registers
    if (lo.kind != "pool" or r.get("sub_op") != "AVERAGE" or (r["kernel"]["height"], r["kernel"]["width"]) != (1, 1)
            or lo.ifm.buffer not in shapes or lo.ofm.buffer not in shapes):
        return lo
    a, b = shapes[lo.ifm.buffer], shapes[lo.ofm.buffer]
    if (a != b or lo.ifm.shape == a or lo.ifm.offset or lo.ofm.offset or lo.ifm.layout != "NHWC"
            or lo.ofm.layout != "NHWC" or math.prod(a) != math.prod(lo.ifm.shape)):
        return lo
    return replace(lo, ifm=replace(lo.ifm, shape=a, strides=dense_strides(a, lo.ifm.element_size)),
                   ofm=replace(lo.ofm, shape=b, strides=dense_strides(b, lo.ofm.element_size)))
