"""Weight and scale streams: an operation's constants in the form the NPU fetches them.

The encoder is in C++ (`emit/weight_encoder`); this module only shapes the arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Sequence

import numpy as np

from .. import _core
from ..arch import Accelerator
from ..errors import InvalidArgumentError
from ..workers import shared_pool


@dataclass(frozen=True)
class StreamRanges:
    """One core's streams of one depth slice: byte offsets and lengths inside `EncodedWeights.data`."""

    scale_offset: int
    scale_length: int
    weight_offset: int
    weight_length: int


def _stream_ranges(scale_offset: int, scale_length: int, weight_offset: int, weight_length: int) -> StreamRanges:
    """`StreamRanges(...)` without the frozen dataclass's `__init__` (which sets each field
    through `object.__setattr__`): the planner makes one per stream of every encoding it tries.
    The same object (no `__post_init__`)."""
    r = object.__new__(StreamRanges)
    r.__dict__.update(scale_offset=scale_offset, scale_length=scale_length, weight_offset=weight_offset,
                      weight_length=weight_length)
    return r


class EncodedWeights:
    """An operation's encoded constants: per OFM-depth slice, per core, scales then weights.

    Made with every stream's place and length (`slices`, `size`); the bytes (`data`) are
    written on first use, once (`write_all` writes many on every core). The planner reads
    the sizes of every encoding it tries; a binary needs the bytes of those it emits only.
    Until written, it holds the weights' codes (2 bytes a weight) in the core. One made
    written (`of_data`: a depth slice cut from another) has its bytes from the start.
    """

    # Ethos-U85 streams (emit/ethos_u85): per slice one StreamRanges per weight decoder, the
    # first with the scale stream; otherwise one per core, each with its own scales.
    u85: bool = False

    def __init__(self, planned: "_core.PlannedWeights", u85: bool = False) -> None:
        self._planned, self.u85 = planned, u85
        self._data: bytes | None = None
        self.size: int = planned.size  # bytes of `data`
        self.slices: tuple[tuple[StreamRanges, ...], ...] = tuple(
            tuple(_stream_ranges(*r) for r in streams) for streams in planned.slices)

    @classmethod
    def of_data(cls, data: bytes, slices: tuple[tuple[StreamRanges, ...], ...], u85: bool = False) -> "EncodedWeights":
        """An encoding already written: `data` with its streams at `slices`."""
        e = cls.__new__(cls)
        e._planned, e._data, e.size, e.slices, e.u85 = None, bytes(data), len(data), slices, u85
        return e

    @property
    def data(self) -> bytes:
        if self._data is None:
            # Set before the plan is dropped: a thread that finds no plan finds the data.
            planned = self._planned
            self._data = planned.write() if planned is not None else self._data
            self._planned = None  # its codes are no longer needed
        return self._data

    @property
    def written(self) -> bool:
        return self._data is not None

    def __getstate__(self) -> dict:
        # The plan is a core object, which does not pickle: the data goes instead.
        return {**self.__dict__, "_data": self.data, "_planned": None}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EncodedWeights):
            return NotImplemented
        return self.size == other.size and self.slices == other.slices and self.data == other.data

    def __hash__(self) -> int:
        return hash((self.size, self.slices))

    def __repr__(self) -> str:
        return f"EncodedWeights({self.size:,} B, {len(self.slices)} depth slices)"

    @property
    def weight_bytes(self) -> int:
        return sum(s.weight_length for streams in self.slices for s in streams)

    @property
    def scale_bytes(self) -> int:
        return sum(s.scale_length for streams in self.slices for s in streams)

    def span(self, s: int) -> tuple[int, int]:
        """[start, end) of depth slice `s`'s streams (every core's scales and weights) in `data`."""
        streams = [r for r in self.slices[s] if r.scale_length or r.weight_length]
        return (min(r.scale_offset for r in streams),
                max(max(r.scale_offset + r.scale_length, r.weight_offset + r.weight_length) for r in streams))

    def depth_slice(self, s: int) -> "EncodedWeights":
        """Depth slice `s`'s streams alone (its bytes, offsets from 0): the weights of an
        operation computing only that slice's OFM channels (a depth-sliced cascade's)."""
        start, end = self.span(s)
        return EncodedWeights.of_data(self.data[start:end], (tuple(
            StreamRanges(r.scale_offset - start if r.scale_length else 0, r.scale_length,
                         r.weight_offset - start if r.weight_length else 0, r.weight_length)
            for r in self.slices[s]),), u85=self.u85)

    @cached_property
    def largest_span(self) -> int:
        """Bytes of the largest depth slice's streams: what one slot of a double buffer holds.
        Cached: the memory planner asks for it per operation of every schedule it lays out."""
        return max(end - start for start, end in (self.span(s) for s in range(len(self.slices))))


def write_all(encodings: Iterable[EncodedWeights]) -> None:
    """Write the data of every encoding not yet written, on every core (the writer releases
    the GIL): an emission's streams, before it reads them one by one."""
    pending = list({id(e): e for e in encodings if not e.written}.values())
    workers = min(_core.core_count(), len(pending))
    if workers < 2:
        for e in pending:
            e.data
        return
    for _ in shared_pool().map(lambda e: e.data, pending):
        pass


def encode_weights(
    weights: np.ndarray,
    zero_points: np.ndarray | int,
    bias: Sequence[int],
    scale: Sequence[int],
    shift: Sequence[int],
    *,
    depthwise: bool,
    part_kernel_first: bool,
    ofm_block_depth: int,
    ifm_bits: int = 8,
    dilation: tuple[int, int] = (1, 1),
    accelerator: str | Accelerator = "ethos-u55-128",
    depth_step: int | None = None,
    whole: EncodedWeights | None = None,
) -> EncodedWeights:
    """Encode one convolution's weights and per-channel bias/rescale.

    Parameters
    ----------
    weights
        OHWI raw quantized weights; depthwise weights as (channels, H, W, 1).
    zero_points
        The weights' zero point, one per OFM channel or one for all.
    bias, scale, shift
        Per OFM channel: the 40-bit bias, the 32-bit multiplier and the 6-bit shift.
    depthwise, part_kernel_first, ofm_block_depth, ifm_bits, dilation
        The layout the NPU walks the weights in (block depth from the block config).
    accelerator
        Its micro-block depths and core count (Ethos-U65-512 splits the channels over 2 cores).
    depth_step
        Cut the OFM depth into independent streams of this many channels (weight buffering).
    whole
        The same weights encoded for the same layout without a depth step, if at hand: a
        depth slicing in whole OFM blocks cuts its streams from its codes (the same bytes,
        without reordering and counting every weight again). Ignored where it cannot serve.

    Raises
    ------
    InvalidArgumentError
        Inconsistent sizes, a weight minus zero point outside -255..255, a bias beyond 40 bits.
    """
    return EncodedWeights(_core.plan_operation_weights(
        *_planning_arguments(weights, zero_points, bias, scale, shift, depthwise, part_kernel_first, ofm_block_depth,
                             ifm_bits, dilation, accelerator, depth_step),
        whole._planned if whole is not None else None,  # None once written: its codes are dropped
    ))


def queue_weights(weights: np.ndarray, zero_points: np.ndarray | int, bias: Sequence[int], scale: Sequence[int],
                  shift: Sequence[int], *, depthwise: bool, part_kernel_first: bool, ofm_block_depth: int,
                  ifm_bits: int = 8, dilation: tuple[int, int] = (1, 1),
                  accelerator: str | Accelerator = "ethos-u55-128") -> "QueuedWeights":
    """`encode_weights` of a whole operation (no depth step), queued for the core's background
    threads (common/pending.hpp): `take()` the result when needed. The weights must not change
    until then."""
    return QueuedWeights(_core.queue_operation_weights(
        *_planning_arguments(weights, zero_points, bias, scale, shift, depthwise, part_kernel_first, ofm_block_depth,
                             ifm_bits, dilation, accelerator, None)))


class QueuedWeights:
    """An encoding `queue_weights` queued: `take()` gives its `EncodedWeights`, once (encoded on
    the calling thread if no background thread has started it, else waited for)."""

    def __init__(self, pending: "_core.PendingWeights") -> None:
        self._pending = pending

    def take(self) -> EncodedWeights:
        return EncodedWeights(self._pending.take())

    def drop(self) -> None:
        """Forgets the encoding: dropped if no thread has started it, else waited for."""
        self._pending = None


def _planning_arguments(weights, zero_points, bias, scale, shift, depthwise, part_kernel_first, ofm_block_depth,
                        ifm_bits, dilation, accelerator, depth_step) -> tuple:
    """`_core.plan_operation_weights`' arguments but `whole`, checked and converted."""
    acc = Accelerator(accelerator)
    w = np.asarray(weights)
    if w.ndim != 4:
        raise InvalidArgumentError(f"weights must be OHWI (4 dimensions), got shape {w.shape}")
    zp = np.asarray(zero_points, dtype=np.int64).reshape(-1)
    if zp.size != w.shape[0]:  # one for all (np.broadcast_to costs more than the rest of this call)
        zp = np.broadcast_to(zp, (w.shape[0],))
    # Weights go as they are (int8/uint8 as a model stores them): the core widens them.
    return (w, zp.astype(np.int32), np.asarray(bias, np.int64), np.asarray(scale, np.int64),
            np.asarray(shift, np.int64), int(ofm_block_depth), bool(depthwise), bool(part_kernel_first), int(ifm_bits), int(dilation[0]),
            int(dilation[1]), acc.ifm_ublock[2], acc.ofm_ublock[2], acc._config.cores, int(depth_step or 0))
