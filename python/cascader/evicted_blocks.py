"""Dedicated_Sram: the OFM blocks of operations whose feature maps a budget moved to the slow memory.

The scheduler picks each operation's block (and traversal) with its maps in the fast memory,
where an IFM read again once per OFM depth block costs little; the allocator may then move the
map to DRAM under a budget (`memory.layout`'s eviction), and the binary runs the same block
there. A block thin in depth then reads the IFM from DRAM many times: coral DeepLabV3's
`concat_projection`, a 1x1 convolution of a 33 x 33 x 512 map on U85-256, takes 593k cycles
with its 18 x 6 x 16 block and the IFM in SRAM, 6.48M with the IFM in DRAM, and 1.15M there
with an 18 x 2 x 96 block. `reblocked` gives such operations the block the cycle model picks
with their operands where the layout put them, the weights encoded for it; `cascader.compile`
lays the result out again and ranks it with the other options on the estimator.

An operation keeps its block where it is a stripe of a cascade (its stripes share one weight
stream, encoded for one block depth; a cascade reading or writing a map in DRAM keeps the
blocks chosen for it), shares its weights, joins a U85 chain (the chain runs its first
operation's block), stages its IFM, or reads a constant IFM2 (chosen apart).

The planner's DRAM points (`planner.evicting_points`) are costed reblocked too, as the compile
makes them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Collection

from .allocation import allocate
from .errors import InfeasibleError, InvalidArgumentError
from .schedule import (NpuSchedule, ScheduledOperation, _mapped, _operations_in_order, _schedule_operation,
                       _stream_bytes, _Target, block_choice, unchained)
from .tflite.ethos_u import REGION_SCRATCH

# Rounds of `reblocked_allocations`: a layout of the reblocked schedule may move other maps
# (coral DeepLabV3 on U85-256 within 271,510 B: the second round's layout moved the 33 x 33 x 480
# maps of three projections, 1.05M cycles each with their blocks for SRAM, 0.36M reblocked).
ROUNDS = 3
# A block is changed only where it saves at least this share of the operation's cycles with its
# operands in the slow memory: a new block re-encodes the weights and changes the layout.
MIN_SAVING = 0.02


def evicted_maps(allocated: tuple, target: _Target) -> set[int]:
    """The feature-map buffers an `allocation.allocate` result's layout put in the slow arena
    (DRAM), besides those the CPU sees, which live there anyway (`_Target.in_arena`)."""
    placement = allocated[2]
    return {b for b, (region, _) in placement.address.items()
            if isinstance(b, int) and region == REGION_SCRATCH and b not in target.in_arena}


def reblocked(sched: NpuSchedule, slow: Collection[int]) -> NpuSchedule | None:
    """`sched` with each operation that reads or writes a buffer of `slow` (feature maps in the
    slow memory) given the block the cycle model picks with those maps there, where that saves
    MIN_SAVING of its cycles there; None where no operation changes. Each changed operation is
    costed as the schedule costs the others, with its maps in the fast memory (the layout's
    eviction shares then price its move with the new block), its weight buffer kept or not as
    before."""
    target = _Target.of(sched)
    slow = set(slow)
    moved = _Target(target.accelerator, target.system, target.memory_mode, target.segments, cpu_visible=slow)
    ordered = list(_operations_in_order(sched))
    # A chain's later operations run its first one's block (a first one's block changed is
    # chained again by `_mapped`, where the later ones accept it).
    kept = {k for k, (_, sop) in enumerate(ordered) if {"ifm", "ifm2"} & dict(sop.chain).keys()}
    constants = {k: sched.segments[i].segment.constants for k, (i, _) in enumerate(ordered)}
    choices: dict[int, tuple] = {}
    for k, (_, sop) in enumerate(ordered):
        sop, lo = unchained(sop), sop.lowered
        if (k in kept or sop.stripe_of is not None or sop.shared_weights is not None or sop.staged_cycles
                or sop.constant_ifm2 or lo.kind == "dma" or sop.cost.described is None
                or not any(v is not None and v.buffer in slow for v in (lo.ifm, lo.ifm2, lo.ofm))):
            continue
        w, s = _stream_bytes(sop.encoded) if lo.weights is not None else (0, 0)
        conv = lo.kind == "conv"  # the only kind with a traversal to choose
        try:
            # An operation whose cost the target does not make again (a description of its
            # own, a block the search does not offer) keeps its block.
            again = target.cost(lo, w, s, sop.block, sop.part_kernel_first if conv else None,
                                slack=sop.cost.described.dma_slack_cycles)
        except InvalidArgumentError:
            continue
        if again.npu_cycles != sop.cost.npu_cycles:
            continue
        if lo.weights is None:
            block, pkf = tuple(moved.cost(lo).block_config.ofm_block), False
        else:
            block, pkf = block_choice(lo, moved)  # ranked with the raw weight bytes, as for the schedule
        old = moved.cost(lo, w, s, sop.block, sop.part_kernel_first if conv else None).total_cycles
        new = moved.cost(lo, w, s, block, pkf if conv else None).total_cycles
        if tuple(block) != tuple(sop.block) and new < (1 - MIN_SAVING) * old:
            choices[k] = (tuple(block), pkf)
    if not choices:
        return None

    def change(k: int, sop: ScheduledOperation) -> ScheduledOperation:
        if k not in choices:
            return sop
        before = unchained(ordered[k - 1][1]) if k > 0 and ordered[k - 1][0] == ordered[k][0] else None
        slack = before.cost.buffering_slack_cycles if before is not None else 0
        lo = sop.lowered
        block, pkf = choices[k]
        if lo.weights is None:
            return replace(sop, block=block, cost=target.cost(lo, slack=slack, block=block))
        busy = before.cost.access_cycles.get(target.weight_memory, 0) if before is not None else 0
        return _schedule_operation(lo, target, slack, sop.weight_buffer, None, constants[k], (block, pkf), busy)

    return _mapped(sched, change)


def reblocked_allocations(allocated: tuple, part, budget: int) -> list[tuple]:
    """The `allocation.allocate` results, laid out within `budget` by the greedy planner, of
    `allocated`'s schedule `reblocked` for the maps its layout moved to DRAM, then of that
    schedule reblocked for the maps its own layout moved, and so on for at most ROUNDS rounds
    (none when no map moved or no block changes). The blocks change the eviction shares and the
    weight streams' sizes: the layout is made again."""
    out = []
    for _ in range(ROUNDS):
        if allocated[1].eviction_cycles == 0:
            break
        sched = reblocked(allocated[0], evicted_maps(allocated, _Target.of(allocated[0])))
        if sched is None:
            break
        try:
            allocated = allocate(sched, part, budget, solver="greedy")
        except InfeasibleError:
            break
        out.append(allocated)
    return out
