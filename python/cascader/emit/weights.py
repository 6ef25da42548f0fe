"""Weight and scale streams: an operation's constants in the form the NPU fetches them.

The encoder is in C++ (`emit/weight_encoder`); this module only shapes the arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import numpy as np

from .. import _core
from ..arch import Accelerator
from ..errors import InvalidArgumentError


@dataclass(frozen=True)
class StreamRanges:
    """One core's streams of one depth slice: byte offsets and lengths inside `EncodedWeights.data`."""

    scale_offset: int
    scale_length: int
    weight_offset: int
    weight_length: int


@dataclass(frozen=True)
class EncodedWeights:
    """An operation's encoded constants: per OFM-depth slice, per core, scales then weights."""

    data: bytes
    slices: tuple[tuple[StreamRanges, ...], ...]
    # Ethos-U85 streams (emit/ethos_u85): per slice one StreamRanges per weight decoder, the
    # first with the scale stream; otherwise one per core, each with its own scales.
    u85: bool = False

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
        return EncodedWeights(bytes(self.data[start:end]), (tuple(
            StreamRanges(r.scale_offset - start if r.scale_length else 0, r.scale_length,
                         r.weight_offset - start if r.weight_length else 0, r.weight_length)
            for r in self.slices[s]),), u85=self.u85)

    @cached_property
    def largest_span(self) -> int:
        """Bytes of the largest depth slice's streams: what one slot of a double buffer holds.
        Cached: the memory planner asks for it per operation of every schedule it lays out."""
        return max(end - start for start, end in (self.span(s) for s in range(len(self.slices))))


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

    Raises
    ------
    InvalidArgumentError
        Inconsistent sizes, a weight minus zero point outside -255..255, a bias beyond 40 bits.
    """
    acc = Accelerator(accelerator)
    w = np.asarray(weights)
    if w.ndim != 4:
        raise InvalidArgumentError(f"weights must be OHWI (4 dimensions), got shape {w.shape}")
    zp = np.broadcast_to(np.asarray(zero_points, dtype=np.int64).reshape(-1), (w.shape[0],))
    # Weights go as they are (int8/uint8 as a model stores them): the core widens them.
    data, slices = _core.encode_operation_weights(
        w, zp.astype(np.int32), np.asarray(bias, np.int64), np.asarray(scale, np.int64), np.asarray(shift, np.int64),
        int(ofm_block_depth), bool(depthwise), bool(part_kernel_first), int(ifm_bits), int(dilation[0]), int(dilation[1]),
        acc.ifm_ublock[2], acc.ofm_ublock[2], acc._config.cores, int(depth_step or 0),
    )
    return EncodedWeights(data, tuple(tuple(StreamRanges(*r) for r in streams) for streams in slices))
