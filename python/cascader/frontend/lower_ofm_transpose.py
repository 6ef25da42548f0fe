"""TRANSPOSE on the Ethos-U85: one 1x1 copy whose output unit writes each element at its
permuted place (OFM_PRECISION's transpose field), where the cycle model finds it faster than
the U55/U65's steps (`lower_movement.lower_transpose`).

The copy computes the output in the source's order (H x W x C); the OFM view holds, per
computed axis, the stride of the output axis it lands on, and the register
`ofm_transpose` names the stored order (emit.ethos_u85 writes the stored map's tiles and
strides). The U85 has every permutation of H, W and C (modes WHC 1, HCW 2, WCH 3, CHW 6,
CWH 7); Vela 5.2's U85 backend runs every TRANSPOSE of them this way, as a 1x1 pool.
"""

from __future__ import annotations

from dataclasses import replace

from ..arch import Accelerator
from ..errors import InvalidArgumentError
from .lowered import ELEMENT_SIZE, FeatureMapView, LoweredOperation, dense_strides
from .lowering_context import LoweringContext
from .ofm_transpose_modes import STORED_ORDER, TRANSPOSE_MODES
from .operation_builder import pool_copy


def _ofm_transpose_maps(lw: LoweringContext, src: FeatureMapView, dst: FeatureMapView,
                        source_axis: tuple[int, int, int]) -> tuple | None:
    """(IFM, OFM view, registers) of the U85 copy transposing `src` into `dst` (output axis k
    reads source axis `source_axis[k]`), or None where the target has no OFM transpose (not a
    U85) or `dst` is no dense NHWC map."""
    if not Accelerator.is_u85(lw.accelerator):
        return None
    mode = TRANSPOSE_MODES.get(tuple(source_axis))
    if mode is None or dst.layout != "NHWC" or dst.strides != dense_strides(dst.shape, dst.element_size):
        return None
    # Computed axis source_axis[k] lands on stored axis k: its stride is that axis's.
    strides = [0, 0, 0]
    for k, axis in enumerate(source_axis):
        strides[axis] = dst.strides[k]
    out = replace(dst, shape=src.shape, strides=tuple(strides))
    return (replace(src, zero_point=0), replace(out, zero_point=0), {"ofm_transpose": mode})


def ofm_transpose_copy(lw: LoweringContext, index: int, name: str, src: FeatureMapView, dst: FeatureMapView,
                       source_axis: tuple[int, int, int]) -> tuple[float, LoweredOperation] | None:
    """The U85 copy with an OFM transpose of `src` into `dst` (output axis k reads source axis
    `source_axis[k]`) the cycle model finds fastest over the ways to read `src` (`_readings`),
    with its cycles; not added to `lw`. None where the target has no OFM transpose for it (not
    a U85, `dst` not a dense NHWC map, no block holds it) or the lowering has no cycle model.
    The feature maps are costed where they will live: the tensors the CPU hands in and reads
    back in the arena (DRAM on the U85's default Dedicated_Sram system, where a transposed
    write of a model input's few channels is slow), the rest in the fast memory."""
    if not Accelerator.is_u85(lw.accelerator):
        return None
    copies = []
    for read, axes in _readings(src, source_axis, lw.cpu_visible()):
        made = _ofm_transpose_maps(lw, read, dst, axes)
        if made is None:
            continue
        ifm, ofm, tags = made
        trial = Trial(lw)
        pool_copy(trial, index, name, ifm, ofm, requantize=False, tags=tags)
        try:
            cycles = lw.cycles(trial.ops)
        except InvalidArgumentError:  # no OFM block of the target holds the transposed copy
            continue
        if cycles is None:  # no cycle model to choose by
            return None
        copies.append((cycles, trial.ops[0]))
    return min(copies, key=lambda c: c[0]) if copies else None


def lower_ofm_transpose(lw: LoweringContext, index: int, name: str, src: FeatureMapView, dst: FeatureMapView,
                        source_axis: tuple[int, int, int], steps) -> bool:
    """Lower the transpose as one U85 copy with an OFM transpose (`ofm_transpose_copy`) if the
    cycle model finds it faster than `steps(context)` (the U55/U65's lowering, costed on a
    context that keeps its operations aside); True if it did."""
    made = ofm_transpose_copy(lw, index, name, src, dst, source_axis)
    if made is None:
        return False
    others = Trial(lw)
    steps(others)
    cycles, copy = made
    faster = cycles < lw.cycles(others.ops)
    if faster:
        lw.add(copy)
    return faster


def _readings(src: FeatureMapView, source_axis: tuple[int, int, int], cpu_visible: set[int]) -> list:
    """The ways the copy may read `src`, each with the output's axes in its terms: as it is,
    and with its H and W swapped by the IFM's strides (free: the NPU reads any H and W
    strides), which leaves the OFM transpose another permutation with other blocks; an NCHW
    model input (3 x 96 x 96 as H x W x C) read as 96 x 3 x 96 needs only W and C swapped.
    The swapped view only of a buffer the CPU sees, which no later pass bricks or re-strides
    (`lower._choose_layouts` and `brick_layout` leave those NHWC)."""
    out = [(src, tuple(source_axis))]
    if src.layout == "NHWC" and src.buffer in cpu_visible and src.shape[0] > 1 and src.shape[1] > 1:
        (h, w, c), (sh, sw, sc) = src.shape, src.strides
        swapped = replace(src, shape=(w, h, c), strides=(sw, sh, sc))
        out.append((swapped, tuple((1, 0, 2)[a] for a in source_axis)))
    return out


def stored_shape(op) -> tuple[int, int, int]:
    """The OFM of a copy with an OFM transpose as it lies in memory."""
    order = STORED_ORDER[op.registers["ofm_transpose"]]
    return tuple(op.ofm.shape[a] for a in order)


def transposed_description(described, op, accelerator, arch) -> None:
    """`described` (the cycle model's NpuOp of `op`, a copy with an OFM transpose, its feature
    maps where they will be) with the OFM as it lies in memory and the block the model finds
    fastest over the computed map: the U85 writes the stored map, and Vela costs the operation
    over it with the block as the registers hold it. A computed axis stored as H or W takes
    blocks of at most the block's largest height and width (Vela's block limit, unpermuted).

    Raises InvalidArgumentError when no block of the target holds the copy."""
    from .. import _core

    order = STORED_ORDER[op.registers["ofm_transpose"]]
    most = accelerator._config.ofm_block_max
    limits = [0, 0, 0]
    for k, axis in enumerate(order):
        limits[axis] = (most.height, most.width, most.depth)[k]
    ub = _core.u85_micro_block(accelerator.name, described.type, 8 * op.ifm.element_size, tuple(op.ofm.shape), False)
    granules = (ub[0], ub[1], max(16, ub[2]))
    # The block registers tile the computed map (a block past its edge is cut there) while
    # the model costs them over the stored map: an axis's blocks go up to the longer of the two
    # (Vela's 16 x 4 x 64 on a 3 x 96 x 96 model input written W C H: a third of the DRAM
    # traffic of blocks cut at its 3 rows).
    lengths = [max(a, b) for a, b in zip(op.ofm.shape, stored_shape(op))]
    stored = _core.Shape4(1, *stored_shape(op))
    best = None
    for h in _tilings(lengths[0], granules[0], limits[0]):
        for w in _tilings(lengths[1], granules[1], limits[1]):
            for d in _tilings(lengths[2], granules[2], min(limits[2], most.depth)):
                cfg = _core.u85_try_block_config(described, accelerator._config, _core.BlockShape(h, w, d))
                if cfg is None:
                    continue
                candidate = _core.NpuOp(described)
                candidate.block_config = cfg
                candidate.ofm.shape = stored
                cycles = _core.estimate(candidate, arch).total_cycles
                if best is None or cycles < best[1] or (cycles == best[1] and h * w * d > _volume(best[0])):
                    best = ((h, w, d), cycles, cfg)
    if best is None:
        raise InvalidArgumentError(f"no OFM block of {accelerator.name} holds the transposed copy {op.name}")
    described.block_config = best[2]
    described.ofm.shape = stored


def _volume(block: tuple[int, int, int]) -> int:
    return block[0] * block[1] * block[2]


def _tilings(length: int, granule: int, most: int) -> list[int]:
    """An axis of `length` cut into 1, 2, 3... nearly equal parts rounded up to `granule`, at
    most `most` (the block search's grid, arch/ethos_u85/block_search)."""
    top = min(-(-length // granule) * granule, most // granule * granule)
    out: list[int] = []
    for parts in range(1, length + 1):
        v = min(-(-(-(-length // parts)) // granule) * granule, top)
        if not out or v < out[-1]:
            out.append(v)
        if v == granule or len(out) >= 24:
            break
    return out or [granule]


class Trial:
    """A lowering context that keeps the operations made aside and makes scratch maps that no
    segment holds: the operations are costed, not emitted."""

    def __init__(self, lw: LoweringContext) -> None:
        self._lw = lw
        self.ops: list = []

    def add(self, op) -> None:
        self.ops.append(op)

    def scratch(self, index: int, name: str, shape: tuple[int, int, int], dtype: str, zero_point: int = 0,
                scale: float = 1.0) -> FeatureMapView:
        return FeatureMapView(-1, shape, dtype, zero_point, scale, dense_strides(shape, ELEMENT_SIZE[dtype]))

    def __getattr__(self, name: str):
        return getattr(self._lw, name)


def trial_cycles(lw: LoweringContext, lower) -> float | None:
    """The cycle model's total (`LoweringContext.cycles`) for the operations `lower(context)`
    makes on a `Trial` of `lw`: a way of lowering costed before it is chosen. None where the
    lowering has no cycle model, `lower` returns False (it cannot lower so on the target) or
    no block of the target holds one of its operations."""
    trial = Trial(lw)
    if lower(trial) is False:
        return None
    try:
        return lw.cycles(trial.ops)
    except InvalidArgumentError:
        return None
