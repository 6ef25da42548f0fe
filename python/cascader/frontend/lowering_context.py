"""What a lowering rule may use of the segment being lowered: `LoweringContext`, `Box`, and
`placement_cycles`, the yardstick of the rewrites that keep the faster of two forms.

The lowering core (`lower`) walks a segment's operators and owns what they share: the views
of tensors as feature maps (through reshapes, folded pads, concatenation slices and slices
read in place), the scratch and constant buffers, and the operations made so far. Each rule
(`lower_*`, looked up in `lowering_rules`) turns one operator into NPU operations through this
interface. The rules depend on this module and not on the core, so the core imports its
rules without the rules importing it back. `LoweringContext` is a Protocol because the core's
state is built by the core's own passes; a new rule that needs more of it adds the member
here, where the next reader sees everything a rule can touch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..tflite.model import SubGraph, Tensor
from .lowered import FeatureMapView, LoweredOperation
from .operator_view import OperatorView


@dataclass(frozen=True)
class Box:
    """A strided box of `source` in the NPU's H x W x C terms: element `origin`, `extent`
    elements per axis, every `step`-th one."""

    source: int
    origin: tuple[int, int, int]
    extent: tuple[int, int, int]
    step: tuple[int, int, int] = (1, 1, 1)


class LoweringContext(Protocol):
    """One NPU segment's lowering in progress, as the rules see it."""

    graph: SubGraph
    operators: tuple[int, ...]  # the segment's operators, in execution order
    members: set[int]  # the same, as a set
    consumers: dict[int, list[int]]  # tensor -> the operators that read it (those the partition keeps)
    ops: list[LoweredOperation]  # the NPU operations made so far, in order
    skipped: set[int]  # operators that need no operation of their own (folded away, or read in place)
    # A PAD folded into the convolution that reads it: consumer -> (top, left, bottom, right),
    # and consumer -> the PAD's input, which the convolution reads instead.
    folded_pad: dict[int, tuple[int, int, int, int]]
    folded_input: dict[int, int]
    # Concatenation inputs their producer writes straight into the output's slice:
    # tensor -> (concatenation output, axis in H/W/C, start along it).
    slices: dict[int, tuple[int, int, int]]
    subviews: dict[int, Box]  # slicing outputs read in place: tensor -> its box of the sliced tensor
    root: dict[int, int]  # tensors that name another's bytes (a reshape's output -> its input)
    fused_away: set[int]  # buffers no operation writes or reads: their operator folded into another's
    # Where a rule trades scratch SRAM for cycles (BATCH_MATMUL's products; a bilinear resize
    # in operations a cascade stripes through; a transpose as per-channel planes), take the
    # least scratch: the lowering of a model's least-SRAM points (`lowering.SCRATCH_TRADING_OPERATORS`).
    least_scratch: bool
    # The target (None: any); a rule lowers otherwise only where the target has a mechanism of
    # its own (the Ethos-U85's OFM transpose, `lower_ofm_transpose`).
    accelerator: str | None
    # The target scales each elementwise operand with a multiplier and TFLite's double rounding
    # of its own (the Ethos-U85's IFM_SCALE/IFM2_SCALE): an ADD/SUB is then one operation with
    # the reference's arithmetic (emit/ethos_u85), where the U55/U65 may need a chain.
    scaled_operands: bool
    # Transposes as per-channel planes where they can be (`lower_movement.channel_planes`):
    # the least-scratch lowering's choice, and the Ethos-U85's.
    channel_planes: bool
    # The target multiplies two feature maps as matrices (the Ethos-U85's convolution that takes
    # its weights from IFM2): a BATCH_MATMUL of two computed operands is then one operation.
    matmul_from_ifm2: bool
    # Buffers every operation views in another shape than their tensor's: buffer -> that shape,
    # which the segment records as the buffer's own (a CPU input read as column groups, `column_fold`).
    reshaped: dict[int, tuple[int, int, int]]

    def buffer(self, t: int) -> int:
        """The tensor owning `t`'s bytes: through reshapes, folded pads and concatenation slices."""
        ...

    def cpu_visible(self) -> set[int]:
        """The buffers of the segment's tensors the CPU hands in and reads back: in the arena,
        which is not the fast memory on a Dedicated_Sram system (`schedule._Target`)."""
        ...

    def cycles(self, operations: list, weights: bool = False, staged: bool = False) -> float | None:
        """The cycle model's total for `operations` run uncascaded on the target (its default
        system), the `cpu_visible` buffers in the arena (`staged`: in the fast memory too, as
        input staging may copy them) and the other maps in the fast memory; `weights`: with the
        weights' raw sizes read in place (else no weight traffic). None where the lowering was
        given no cycle model (`lower_segment`'s `cost`). Raises InvalidArgumentError where no
        block of the target holds an operation."""
        ...

    def natural(self, b: int) -> tuple[tuple[int, int, int], str]:
        """Buffer `b`'s own shape and element type: its tensor's, or a scratch buffer's."""
        ...

    def view(self, t: int, shape: tuple[int, int, int] | None = None) -> FeatureMapView:
        """Tensor `t` as a feature map (in `shape`, if given), in the buffer that owns its bytes."""
        ...

    def scratch(self, index: int, name: str, shape: tuple[int, int, int], dtype: str,
                zero_point: int = 0, scale: float = 1.0) -> FeatureMapView:
        """A new buffer only this segment's operations use, for operator `index`'s intermediates."""
        ...

    def state(self, index: int, name: str, shape: tuple[int, int, int], dtype: str) -> FeatureMapView:
        """A scratch buffer in the persistent arena: it outlives the inference, zeroed at first."""
        ...

    def resident(self, buffer: int, name: str, like: Tensor) -> FeatureMapView:
        """Buffer `buffer` (a tensor index the segment names it by) with `like`'s shape, type and
        quantization, at one offset of the scratch arena for the whole inference and across
        inferences (a resource variable, `lower_resource_variables`); registered once."""
        ...

    def constant(self, values: np.ndarray, dtype: str) -> FeatureMapView:
        """A constant feature map in flash (a 1 x 1 x N vector of `values`)."""
        ...

    def fill(self, value: int, like: FeatureMapView, shape: tuple[int, int, int]) -> FeatureMapView:
        """A constant feature map of `shape` holding `value` everywhere, quantized as `like`."""
        ...

    def add(self, op: LoweredOperation) -> None:
        """Append an operation to the segment."""
        ...


def placement_cycles(lw: LoweringContext, op: LoweredOperation) -> tuple[float, float] | None:
    """A rewrite's yardstick: `op`'s cycles with its weights, its input where the schedule may
    read it: in the arena, and staged in the fast memory (`LoweringContext.cycles`). None
    without a cycle model."""
    arena, staged = lw.cycles([op], weights=True), lw.cycles([op], weights=True, staged=True)
    return None if arena is None or staged is None else (arena, staged)


# A lowering rule: appends operator `v`'s NPU operations through the context, or raises
# UnsupportedError (the compiler then sends the operator to the CPU).
LoweringRule = Callable[[LoweringContext, OperatorView], None]
