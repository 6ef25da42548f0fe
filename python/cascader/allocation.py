"""The allocate stage: a schedule laid out under an SRAM budget (`memory.layout`, the exact
allocator), keeping the weight buffers the budget can hold.

Which weight buffers live in SRAM is the allocator's choice, as in Vela's and TFLM's: the
schedule's buffers are tried fastest first, then those that fit the budget (re-sliced thinner
where that makes them fit), then those under the feature maps' own peak, then none. Which
*schedule* to allocate (uncascaded, bricked, a cascade) is the compile policy's (`compiler`).
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Iterator

import numpy as np

from .emit.program import ARENA_REGIONS, Placement
from .errors import BudgetError, InfeasibleError
from .floor import ALIGNMENT
from .frontend.partition import Partition
from .input_staging import staged_key
from .memory import MemoryConfig, MemoryLayout, layout, sram_bytes
from .schedule import (NpuSchedule, arch_of, eviction_cycles, fit_weight_buffers, live_bytes, memory_schedule,
                       second_slot_key, weight_buffers_peak, weights_key, without_staging, without_weight_buffers)


class Lean:
    """A schedule without the weight buffers of operations run alone
    (`without_weight_buffers`), and its `memory_schedule`: each made once, when first asked
    for, either may be given by a caller that has it already (`own_memory`: that of `sched`
    itself, likewise). It keeps the weight-buffer choices made for `sched` too (`fit`), and
    their memory schedules (`memory_of`), so that allocations of the same schedule within other
    budgets share them (`allocate`'s `lean`)."""

    def __init__(self, sched: NpuSchedule, graph, memory: tuple | None = None, schedule: NpuSchedule | None = None,
                 own_memory: tuple | None = None):
        self.sched, self.graph, self._memory, self.own_memory = sched, graph, memory, own_memory
        self._schedule: NpuSchedule | None = schedule
        self._fitted: dict[tuple, NpuSchedule] = {}
        # Fits to a capacity, by their other options: (low, high, fit) each, the fit the same for
        # every capacity in [low, high) (`fit_weight_buffers`' `bounds`).
        self._fitted_within: dict[tuple, list[tuple[float, float, NpuSchedule]]] = {}
        self._sliced: dict = {}  # `fit_weight_buffers`' thinner buffers of `sched`
        self._memories: dict[int, tuple[NpuSchedule, tuple]] = {}  # `memory_of`, by schedule id

    @property
    def schedule(self) -> NpuSchedule:
        if self._schedule is None:
            self._schedule = without_weight_buffers(self.sched)
        return self._schedule

    @property
    def memory(self) -> tuple:
        if self._memory is None:
            self._memory = memory_schedule(self.schedule, self.graph)
        return self._memory

    @cached_property
    def live(self) -> np.ndarray:
        """Bytes live at each step of `memory` (`live_bytes`; an `overlap_chains` schedule's
        ties counted once)."""
        return live_bytes(self.memory[0], ties=bool(self.sched.overlap_chains))

    @cached_property
    def peak(self) -> int:
        """`weight_buffers_peak` of `sched`."""
        return weight_buffers_peak(self.sched, self.memory)

    def fit(self, **options) -> NpuSchedule:
        """`fit_weight_buffers` of `sched` with these options, made once; with a `capacity`,
        made once for every capacity that fits alike (the planner's budgeted points allocate
        within two budgets a few bytes apart, each at three shares of it)."""
        capacity = options.get("capacity")
        key = tuple(sorted(options.items()))
        if capacity is None:
            if key not in self._fitted:
                self._fitted[key] = fit_weight_buffers(self.sched, self.graph, self.memory, lean_live=self.live,
                                                       sliced=self._sliced, **options)
            return self._fitted[key]
        alike = self._fitted_within.setdefault(tuple(item for item in key if item[0] != "capacity"), [])
        for low, high, fitted in alike:
            if low <= capacity < high:
                return fitted
        bounds = [-math.inf, math.inf]
        fitted = fit_weight_buffers(self.sched, self.graph, self.memory, lean_live=self.live, sliced=self._sliced,
                                    bounds=bounds, **options)
        alike.append((bounds[0], bounds[1], fitted))
        return fitted

    def memory_of(self, candidate: NpuSchedule) -> tuple:
        """`memory_schedule` of a schedule `allocate` lays out (`sched`, one of its fits, or one
        of those with buffers dropped), made once while this lives: a fit that serves several
        budgets is laid out within each."""
        if candidate is self.sched and self.own_memory is not None:
            return self.own_memory
        found = self._memories.get(id(candidate))
        if found is None:  # held with its schedule, so that its id names no other
            found = self._memories[id(candidate)] = (candidate, memory_schedule(candidate, self.graph))
        return found[1]


# Shares of a budget the weight buffers re-sliced to fit it may fill (bytes live at once).
RESLICED_SHARES = (1.0, 0.9, 0.8)

# Cycles a weight buffer above the feature maps' peak must save per byte it adds, on
# Dedicated_Sram (`_weight_buffer_choices`).
GAIN_PER_BYTE = 0.05


def _weight_buffer_choices(sched: NpuSchedule, lean: Lean, config: MemoryConfig, reslice: bool = False
                           ) -> Iterator[tuple[NpuSchedule, tuple | None]]:
    """The schedules `allocate` tries, fastest first, with their memory schedules where known:
    every weight buffer that pays, then (`reslice`, under a budget) those that fit the budget,
    re-sliced thinner where that makes them fit, then those that fit under the feature maps'
    own peak, then none. The buffers under the peak and the re-sliced ones are made together,
    when every buffer did not fit."""
    if not any(op.weight_buffer and op.shared_weights is None for op in sched.operations):
        if not any(op.staged_cycles for op in sched.operations):
            yield sched, lean.memory  # nothing to drop: the schedule is its own lean one
            return
        yield sched, None  # its staged inputs (`allocate` drops those the layout evicts), then none
        yield lean.schedule, lean.memory
        return
    budget = config.fast_capacity
    if config.shared_sram:
        # Every buffer kept: laid out only when the bytes live at once can fit the budget. The
        # peak counts each buffer rounded up to its alignment, the topmost one's too, which the
        # layout need not pad (random network uint8 seed 928 on U65-256 Shared_Sram: a peak of
        # 816 B laid out in 812 B, so within 812 B the weight buffer was never tried, 1,103
        # cycles in 220 B where unlimited gave 1,088 in 812 B).
        if budget is None or lean.peak - (ALIGNMENT - 1) <= budget:
            yield sched, None
        fitted = lean.fit()
        faster = []
    else:
        budgeted = budget is not None
        fitted = lean.fit(budgeted=budgeted)
        # Dedicated_Sram: SRAM is a cache beside DRAM. When the buffers that fit under the
        # feature maps' peak are within 5% as fast, the SRAM the rest would take is not worth
        # it (on the shared models this keeps SRAM within Vela's on every U65 row), except for
        # buffers that save at least a cycle per 20 bytes they add (zoo MobileNetV1's 3x3x256
        # pointwise on U65-256: 1,391 cycles for 14,848 B, as Vela's binary; at a cycle per byte,
        # as unlimited compiles asked before, its binary was 0.9% slower than Vela's and
        # tflm_person_detect's 0.4%, both still within Vela's SRAM with it; a generous budget
        # still does not buy zoo mobilenet_v3_blocks 1% for five times the SRAM).
        worth_it = fitted.total_cycles > 1.05 * sched.total_cycles
        if worth_it:
            yield sched, None
        faster = [lean.fit(above_peak_gain=GAIN_PER_BYTE, budgeted=budgeted)]
    if reslice and budget is not None and (config.shared_sram or worth_it):
        # A budget above the feature maps' peak, when every buffer is wanted but does not fit:
        # the buffers that fit within it, re-sliced thinner where that makes them fit, not only
        # those under the peak (MLPerf Tiny's ResNet on U55-128 within 128 KiB: 1,223,448 ->
        # 1,133,548 cycles, where Vela's binary takes 1,167,798). On Dedicated_Sram only where
        # the buffers are worth their SRAM (above): else a generous budget would buy 1% with
        # five times the SRAM.
        # The layout may need more than the bytes live at once (zoo fc_autoencoder on U65-512:
        # buffers live within 32,512 B laid out in 35,120), so a little less is tried too.
        faster += [lean.fit(budgeted=True, capacity=int(budget * share)) for share in RESLICED_SHARES]
    seen = set()

    def unseen(candidate: NpuSchedule) -> bool:
        buffers = tuple((op.weight_buffer, op.depth_step, op.single_slot) for op in candidate.operations)
        fresh = buffers not in seen
        seen.add(buffers)
        return fresh

    for candidate in sorted((c for c in faster if c.total_cycles < fitted.total_cycles), key=lambda c: c.total_cycles):
        if unseen(candidate):
            yield candidate, None
    if unseen(fitted):
        yield fitted, None
    if reslice and budget is not None and (config.shared_sram or worth_it):
        # The buffers under the feature maps' peak did not fit the layout either (a peak
        # that is a cascade's counts more than the budget's arena holds elsewhere): only
        # those that fit the budget, sliced thinner or into one slot where that makes them
        # fit (MobileNetV1-0.75 at 353 x 481 on U55-128 at Vela's Size SRAM: its last 768 x
        # 768 pointwise beside its 547 KB IFM and OFM, 16 channels at a time).
        within = [lean.fit(budgeted=True, capacity=int(budget * share), capacity_only=True) for share in RESLICED_SHARES]
        lean_cycles = lean.schedule.total_cycles
        for candidate in sorted((c for c in within if c.total_cycles < lean_cycles), key=lambda c: c.total_cycles):
            if unseen(candidate):
                yield candidate, None
    yield lean.schedule, lean.memory


def allocate(sched: NpuSchedule, part: Partition, sram: int | None, lean_memory: tuple | None = None,
             solver: str = "exact", reslice: bool = False, lean: Lean | None = None
             ) -> tuple[NpuSchedule, MemoryLayout, Placement, dict[int, int]]:
    """Lay out every buffer under the SRAM budget.

    When the schedule's weight buffers do not fit, the same schedule without them (weights read
    from flash) is tried before giving up. Returns the schedule that fits, the layout, each
    buffer's (region, address), and the TFLM arena offset of every tensor the CPU sees (the
    NPU subgraphs' IFMs and OFMs). `lean_memory`: the `memory_schedule` of
    `without_weight_buffers(sched)`, when the caller has it (it is not made again). `solver`:
    the memory planner's ("greedy" for a quick layout that is valid but may evict more).
    `reslice`: also try the weight buffers that fit the budget, re-sliced thinner where that
    makes them fit (`fit_weight_buffers`' `capacity`), and when a choice fits only by dropping
    the buffers the layout evicted, the later choices too, keeping the fastest. Only for the
    uncascaded schedule: a cascade's planned cycles, which rank the choices, are Vela's
    accounting only roughly, and a faster-planned choice compiled slower (MLPerf Tiny's ResNet
    on U55-128 within 95,180 B: 1,250,028 -> 1,313,436 cycles). `lean`: a `Lean(sched, ...)`
    the caller keeps to allocate `sched` within more budgets (the planner does: its memory
    schedules then serve, not `lean_memory`).

    Raises
    ------
    InfeasibleError
        The budget is below what even the leanest schedule needs; the message and
        `minimum_sram` give the smallest budget that works.
    """
    config = MemoryConfig.for_arch(arch_of(sched), sram_size=sram, solver=solver)
    if lean is None or lean.sched is not sched or lean.graph is not part.graph:
        lean = Lean(sched, part.graph, lean_memory)
    fallback = None  # the fastest choice that fitted only without some of its weight buffers
    for candidate, known in _weight_buffer_choices(sched, lean, config, reslice):
        if fallback is not None and candidate.total_cycles >= fallback[0].total_cycles:
            break
        chosen = candidate
        while True:
            # A choice's own memory schedule is kept (another budget may lay it out too); one
            # changed below (buffers dropped) is made anew.
            msched, index, _ = known or (lean.memory_of(candidate) if candidate is chosen
                                         else memory_schedule(candidate, part.graph))
            known = None  # a candidate changed below is scheduled again
            try:
                result = layout(msched, config)
            except BudgetError:
                break
            arenas, offsets = result.arenas, result.offsets
            # Dedicated_Sram: a weight buffer evicted to the slow memory only copies the
            # weights from one slow memory to another. Such operations read their weights in
            # place instead, and the rest is laid out again (the bytes freed may keep feature
            # maps in SRAM). Each round drops buffers, so this ends.
            evicted = {k for k, sop in enumerate(candidate.operations)
                       if sop.weight_buffer and sop.shared_weights is None
                       and any(arenas[index[key]] == "scratch"
                               for key in (weights_key(sop, k), second_slot_key(k)) if key in index)}
            if evicted and not config.shared_sram:
                candidate = without_weight_buffers(
                    candidate, {k for k, sop in enumerate(candidate.operations) if sop.weight_buffer and k not in evicted},
                    staged=True)
                continue
            # So is a staged input's copy (input_staging): the operation reads its input in place.
            evicted = {k for k, sop in enumerate(candidate.operations) if sop.staged_cycles
                       and arenas[index[staged_key(k, sop.lowered.ifm.buffer)]] == "scratch"}
            if evicted:
                candidate = without_staging(candidate, evicted)
                continue
            address = {b: (ARENA_REGIONS[arenas[i]], offsets[i]) for b, i in index.items()}
            cpu_offsets = {t: address[b][1] for s in candidate.segments for t, b in s.segment.aliases.items()
                           if arenas[index[b]] == "scratch" and t not in s.segment.scratch}
            allocated = candidate, result, Placement(address), cpu_offsets
            if candidate is chosen or not reslice:
                return allocated
            # It fitted only without the buffers it evicted: a later, leaner choice may be
            # faster (zoo fc_autoencoder on U65-256 within 34,656 B: all 9 buffers, then 5 of
            # them evicted, 51,929 cycles; the buffers that fit the budget, 44,588; Vela 44,906).
            if fallback is None or candidate.total_cycles < fallback[0].total_cycles:
                fallback = allocated
            break
    if fallback is not None:
        return fallback
    msched, _, _ = lean.memory
    unlimited = MemoryConfig.for_target(sched.accelerator, sched.system, sched.memory_mode)
    need = sram_bytes(layout(msched, unlimited), unlimited)
    raise InfeasibleError.below(need, sram, "the model uncascaded", ", or let compile cascade")


def eviction_cost(allocated: tuple, graph) -> float:
    """The cycles an `allocate` result's schedule gains from the feature maps its layout moved
    to the slow memory (Dedicated_Sram): each operation costed again by the cycle model with
    exactly those operands there (`schedule.eviction_cycles`). The layout's own
    `eviction_cycles` adds each operand's share of its operation's gain, which ranks evictions
    but overstates what they cost together (coral tf2 MobileNetV2-224 on U65-256, a cascaded
    proposal within 389,184 B: 58,896 cycles by shares, 15,048 costed again, 5,450 on the
    estimator). Buffers the CPU sees live in the slow memory anyway: they cost nothing here."""
    sched, result = allocated[:2]
    buffers = result.spans[0]  # the layout's memory schedule's
    slow = {b for b, arena in enumerate(result.arenas) if arena == "scratch" and not buffers[b].cpu_visible}
    return eviction_cycles(sched, graph, buffers, slow)
