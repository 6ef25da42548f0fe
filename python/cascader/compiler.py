"""The compile policy: which schedules to try, how they are ranked, what is kept.

The stages are functions of values, each in its own module, and none imports this one:

    lower (lowering) -> schedule (scheduling) -> plan (planner, stripes) -> allocate (allocation)
    -> emit (emit.binary) -> package (emit.binary over tflite.ethos_u)

`compile` runs them once in that order. What it decides: the uncascaded schedule when it fits
(Vela's Performance choice), else the fastest cascaded proposal that fits; the bricked variant
of a schedule where that is faster; on Dedicated_Sram under a budget, proposals that fit by
moving feature maps to DRAM (and the same with the operations on those maps given blocks for
DRAM, `evicted_blocks`), ranked by the estimator on their command streams.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Union

from .allocation import allocate
from .arch import Accelerator, MemoryMode, arch_config
from .compiled import CompiledModel
from .emit.binary import Emission, emit
from .evicted_blocks import reblocked_allocations
from .packaging import package_binary
from .emit.program import RecordTemplates
from .errors import InfeasibleError, InvalidArgumentError
from .floor import floor
from .frontend.partition import Partition
from .gc_pause import paused_gc
from .lowering import lower
from .memory import MemoryConfig, sram_bytes
from .planner import Frontier, PlanOptions, lay_out_leanest, plan_schedule, plan_scheduled, unscored
from .planner import plan as planner_plan
from .progress import progress as stage_bar
from .schedule import (NpuSchedule, _Target, keep_recent, weight_buffer_bytes, with_overlapping_blocks,
                       with_weight_room, without_weight_buffers)
from .scheduling import evicted_bricks, schedules
from .sizes import parse_size
from .stripes import proposal_schedules, with_buffered_weights
from .tflite import Model, ModelLike, as_model
from .tflite.ethos_u import driver_payload

__all__ = ["compile", "plan", "CompiledPoint", "ModelLike", "parse_size"]

# Dedicated_Sram: proposals that fit a budget only with feature maps in DRAM are compiled beside
# the fastest that fits without: at most this many, and only while their stripe operations
# together stay within EVICTING_WORK (a layout, an emission and an estimate cost about 25 us per
# operation: MobileNetV2-224's proposals have 460 to 1,740, palm detection's up to 9,000).
EVICTING_CANDIDATES = 6
EVICTING_WORK = 6000
# Schedules `_weight_room_options` lays out at most: each leaves one more weight buffer out.
WEIGHT_ROOM_TRIES = 4
# `_Prepared.weight_room`'s variants kept: a compile tries a few schedules' (the uncascaded
# one's, those of the proposals it compiles), each with WEIGHT_ROOM_TRIES sets of buffers.
WEIGHT_ROOMS_KEPT = 16


def _uncascaded(part: Partition, sched: NpuSchedule, bricked: NpuSchedule | None, budget: int | None
                ) -> tuple[tuple, list[tuple]]:
    """The uncascaded schedule laid out under the budget: `bricked`
    (`scheduling.bricked_schedule`) when it fits with every feature map in the fast memory,
    else `sched`. The bricks are a speed choice: a
    budget they overflow gets the dense maps, not a cascade. Returns the allocation and, as
    options to rank (with no planned cycles), the bricked one if it fitted only by moving maps
    to DRAM (Dedicated_Sram).

    Raises `InfeasibleError` (with `sched`'s minimum) when `sched` does not fit.
    """
    options = []
    if bricked is not None:
        try:
            allocated = allocate(bricked, part, budget, reslice=True)
            if allocated[1].eviction_cycles == 0:
                return allocated, []
            options.append((allocated, None))
        except InfeasibleError:
            pass
    return allocate(sched, part, budget, reslice=True), options


def _weight_room_options(prepared: "_Prepared", buffered: NpuSchedule, chosen: tuple, budget: int | None
                         ) -> list[tuple]:
    """Where a schedule of `prepared`'s (`buffered`: the uncascaded one, or a proposal's with
    the weight buffers of its operations run alone) laid out within `budget` (`chosen`) lost
    weight buffers: the same schedule with its lone operations written over their IFMs on the
    blocks that make room for the buffers (`schedule.with_weight_room`), laid out within it,
    as an option to rank (no planned cycles) when the layout keeps more of them. Chained maps drift down by
    their shifts, so a layout may hold fewer buffers than the bytes live at once suggest: the
    buffers saving the fewest cycles per byte (of equals the latest) are left out one at a time,
    each operation left without one back on the blocks that suit reading its weights in place,
    up to WEIGHT_ROOM_TRIES schedules (zoo DS-CNN on U55-128 at Vela's Size SRAM, 16,000 B:
    all four 1x1 convolutions' buffers lay out in 17,488 B, the first two within 16,000 B:
    114,892 -> 96,956 cycles, Vela's 122,001). The planner's frontier leaves these schedules
    out: its memory bound counts an operation's maps apart, and stays a lower bound of its own
    proposals."""
    if budget is None or chosen[0].total_cycles <= buffered.total_cycles:
        return []
    ops = buffered.operations
    worth = {k: (ops[k].direct_cost.total_cycles - ops[k].cost.total_cycles) / max(weight_buffer_bytes(ops[k]), 1)
             for k, sop in enumerate(ops) if sop.weight_buffer and sop.shared_weights is None}
    order = sorted(worth, key=lambda k: (worth[k], -k))
    for dropped in range(min(len(order), WEIGHT_ROOM_TRIES)):
        room = prepared.weight_room(buffered, frozenset(order[dropped:]))
        if room is None:
            continue
        try:
            allocated = allocate(room, prepared.part, budget, reslice=True)
        except InfeasibleError:
            continue
        if allocated[0].total_cycles < chosen[0].total_cycles:
            return [(allocated, None)]
    return []


def _fastest(options: list[tuple], accelerator: str, system, memory_mode: str, templates: RecordTemplates
             ) -> tuple[float, tuple, float | None, Emission]:
    """Of (allocated, planned cycles) options, the one whose command streams the estimator says
    run fastest: (its cycles, allocated, planned cycles, emission)."""
    best = (math.inf, None, None, None)
    for allocated, planned_cycles in options:
        emitted = emit(allocated, accelerator, templates)
        cycles = _stream_cycles(emitted, accelerator, system, memory_mode)
        if cycles < best[0]:
            best = (cycles, allocated, planned_cycles, emitted)
    return best


def _frontier(part: Partition, sched: NpuSchedule, lean: NpuSchedule | None = None):
    """The planner's frontier of `sched`'s proposals (their own memory bound, not laid out).
    `lean`: `without_weight_buffers(sched)`, when the caller has it."""

    lean = lean or without_weight_buffers(sched)
    return plan_schedule(lean, part.graph, _Target.of(sched), score=False, buffered=sched)


def _cascade(part: Partition, sched: NpuSchedule, budget: int | None, smallest: bool = False,
             uncascaded_minimum: int | None = None, frontier=None, prepared: "_Prepared | None" = None):
    """A cascaded schedule from the planner's frontier that fits `budget`: the fastest (from
    the fastest point that claims to fit down to the leanest) or, with `smallest`, the least
    SRAM (from the leanest point up). Returns the allocated schedule and the planner's cycles
    for the proposal it came from. `frontier`: `_frontier(part, sched)`, when the caller has it;
    `prepared`: the model's `_Prepared`, whose lean schedule and proposals' stripes are shared
    by its compiles at every budget.

    Raises InfeasibleError naming the least SRAM that compiles when none fits.
    """

    lean = prepared.lean(sched) if prepared is not None else without_weight_buffers(sched)
    target = _Target.of(sched)
    # The planner's memory bound is a lower bound of a layout (up to the 16-byte rounding of the
    # topmost buffer, which the layout need not pad): only proposals within the budget by it can
    # fit, and only those are laid out.
    frontier = frontier or _frontier(part, sched, lean)
    pg = frontier.graph
    candidates = [p for p in frontier.points if budget is None or p.sram_bytes - 15 <= budget]
    config = MemoryConfig.for_target(sched.accelerator, sched.system, sched.memory_mode)

    def planned(allocated: tuple, proposed: NpuSchedule, point) -> float:
        # The planner's cycles for the schedule compiled. When the layout dropped weight
        # buffers of operations run alone, that is another proposal of the same cascades: the
        # planner costs those operations as the schedule does, so the difference carries over.
        return point.cycles + allocated[0].total_cycles - proposed.total_cycles

    fallback = None  # (allocated, planned cycles): the fastest compiled without all its weight buffers
    for point in [] if smallest else sorted(candidates, key=lambda p: p.cycles):
        if fallback is not None and point.cycles >= fallback[1]:
            break  # the points left are planned slower than a schedule already compiled
        striped, buffered = (prepared.proposal_schedules(sched, point) if prepared is not None
                             else proposal_schedules(lean, pg, point.proposal, target, sched))
        try:
            allocated = allocate(buffered, part, budget)
        except InfeasibleError:
            continue
        exact = allocated[0] is buffered
        if budget is not None:
            # The operations run alone whose weight buffers the proposal left out (no buffer
            # fitted its memory bound whole) may still fit the budget sliced thinner, in one
            # slot where no double buffer fits (MobileNetV1-0.75 at 353 x 481 on U55-128 at
            # Vela's Size SRAM: its last 768 x 768 pointwise read its weights from flash 23
            # times; in one 16-channel slot, as Vela's Size binary does it, 28.3M -> 18.9M
            # cycles, Vela's 23.1M).
            every = with_buffered_weights(striped, lean, pg, point.proposal, sched, every=True)
            if every.total_cycles < allocated[0].total_cycles:
                try:
                    resliced = allocate(every, part, budget, reslice=True)
                    if resliced[0].total_cycles < allocated[0].total_cycles:
                        allocated = resliced
                except InfeasibleError:
                    pass
            if prepared is not None and not exact:
                # Its lone operations written over their IFMs may make room for more of them
                # (zoo ResNet-8 on U55-128 within 35,840 B: its second stage's 3x3 convolution
                # on 16x16x32 then buffers its 9 KB of weights, 233,802 -> 222,874 cycles).
                for room, _ in _weight_room_options(prepared, every, allocated, budget):
                    allocated = room
        if exact:
            return allocated, planned(allocated, buffered, point)
        # Its weight buffers did not all fit the exact layout: a faster point may still
        # compile as planned.
        if fallback is None or planned(allocated, buffered, point) < fallback[1]:
            fallback = (allocated, planned(allocated, buffered, point))
    if fallback is not None:
        return fallback
    # The least SRAM that really compiles: the leanest points as the compile lays them out,
    # without weight buffers (the planner's bound leaves out what only the binary has, e.g.
    # arena placement rules, and a chain of staircases drifts).
    # Of equally lean layouts the fastest proposal (emza's SSD on U55-128 for the least SRAM:
    # two proposals lay out in 68,736 B, planned 829k and 939k cycles).
    need, point, striped, lean_memory = min(lay_out_leanest(frontier, part.graph, lean, config,
                                                            fits=None if smallest else budget),
                                            key=lambda o: (o[0], o[1].cycles))
    if budget is None or need <= budget:
        # Within the budget (the planner's bound may even have filtered it out: movenet's
        # leanest point had a bound of 546,048 B and was laid out in 435,456 B): then
        # whatever weight buffers fit within that same SRAM (allocate tries the fastest first).
        # `striped` is `buffered` without its lone operations' weight buffers: one memory
        # schedule serves both.
        buffered = with_buffered_weights(striped, lean, pg, point.proposal, sched)
        cap = need if smallest else budget
        try:
            allocated = allocate(buffered, part, cap, lean_memory)
        except InfeasibleError:
            allocated = allocate(striped, part, cap, lean_memory)  # none of its weight buffers fit
        return allocated, planned(allocated, buffered, point)
    if smallest:
        try:  # Dedicated_Sram: feature maps may move to DRAM to fit
            allocated = allocate(striped, part, budget, lean_memory)
            return allocated, planned(allocated, striped, point)
        except InfeasibleError:
            pass
    least = min(need, uncascaded_minimum or need)
    raise InfeasibleError.below(least, budget, "the model cascaded")


def _evicting_cascades(part: Partition, sched: NpuSchedule, budget: int, frontier, faster_than: float,
                       prepared: "_Prepared") -> list[tuple]:
    """Dedicated_Sram: the proposals planned faster than `faster_than` cycles whose feature maps
    do not all fit `budget`, laid out within it by moving some of them to DRAM (the allocator's
    eviction), fastest planned first, within EVICTING_CANDIDATES and EVICTING_WORK. The planner
    costs every tensor in SRAM; the layout adds what its evictions cost (`memory_schedule`).
    They are laid out by the greedy planner, quick and valid (the exact one proves each
    eviction round's fit, 0.2 s a proposal on palm detection): the caller compiles them and lays
    out the one it keeps again exactly."""

    out, work = [], 0
    for point in sorted(frontier.points, key=lambda p: p.cycles):
        if point.cycles >= faster_than or len(out) == EVICTING_CANDIDATES:
            break
        if point.sram_bytes - 15 <= budget:
            continue  # fits as planned: `_cascade`'s
        striped, buffered = prepared.proposal_schedules(sched, point)
        work += len(striped.operations)
        if work > EVICTING_WORK:
            break
        try:
            out.append(allocate(buffered, part, budget, solver="greedy"))
        except InfeasibleError:
            continue
    return out


def _reblocked(options: list[tuple], part: Partition, budget: int) -> list[tuple]:
    """Dedicated_Sram: of (allocated, planned cycles) options, those whose layouts moved feature
    maps to DRAM with the operations on those maps given the blocks that run fastest there,
    laid out again (`evicted_blocks.reblocked_allocations`)."""
    return [a for allocated, _ in options for a in reblocked_allocations(allocated, part, budget)]


def _stream_cycles(emission: Emission, accelerator: str, system, memory_mode: str) -> float:
    """The estimator's cycles of the binary `_emit` makes of an emission, from its command
    streams alone: the flash image only laid out, nothing packaged."""
    from .sim.estimator import payload_cycles

    payloads = [driver_payload(words, accelerator) for _, _, words in emission.segments]
    return payload_cycles(payloads, arch_config(accelerator, system, memory_mode))


@paused_gc()
def compile(
    model: ModelLike,
    sram: Union[int, str, None] = None,
    accelerator: Union[str, Accelerator] = "ethos-u55-128",
    system: str | None = None,
    memory_mode: Union[str, MemoryMode, None] = None,
    optimise: str = "performance",
    progress: bool = False,
) -> CompiledModel:
    """Compile a TFLite model for an Ethos-U NPU.

    Parameters
    ----------
    model
        A path, the bytes of a `.tflite`, or a :class:`cascader.Model`.
    sram
        A hard cap on the SRAM the layout uses: bytes, a size string ("256KiB", "1.5MiB") or
        None (unlimited).
    accelerator
        ethos-u55-32/64/128/256 or ethos-u65-256/512.
    system, memory_mode
        A vela.ini system preset (e.g. "Ethos_U55_High_End_Embedded") or a
        :class:`cascader.SystemConfig` (``SystemConfig.from_ini``), and a memory mode
        ("Shared_Sram", "Sram_Only", "Dedicated_Sram", or a sized preset such as
        "Dedicated_Sram_384KB", whose cache size also caps `sram`); the accelerator's defaults
        when None.
    optimise
        "performance": the fastest schedule within the budget (uncascaded when it fits, else the
        fastest cascaded proposal that fits). "size": the least SRAM the planner's proposals
        reach (within the budget, if one is given).
    progress
        Show a progress bar of the stages on stderr when the compile takes more than 2 s.

    Returns
    -------
    CompiledModel

    Raises
    ------
    ModelError
        The file is not a readable TFLite model.
    InvalidArgumentError
        An unknown accelerator, system or memory mode, a malformed `sram` or `optimise`.
    InfeasibleError
        The model does not fit the SRAM budget; `minimum_sram` names the smallest that does.
    """
    start = time.perf_counter()
    optimise = _checked_optimise(optimise)
    budget = _budget(sram, memory_mode)
    bar = stage_bar(total=4, desc="lower", enabled=progress, unit="stage")
    prepared = _prepare(model, accelerator, system, memory_mode, optimise, bar)
    return _compile_either(prepared, budget, optimise, bar, start)


def _checked_optimise(optimise: str) -> str:
    optimise = str(optimise).lower()
    if optimise not in ("performance", "size"):
        raise InvalidArgumentError(f"optimise must be 'performance' or 'size' (Vela's names), not {optimise!r}")
    return optimise


def _budget(sram: Union[int, str, None], memory_mode: Union[str, MemoryMode, None]) -> int | None:
    """The SRAM budget: `sram`, and a sized memory mode's arena cache (Dedicated_Sram_384KB
    names a budget too), the smaller of the two."""
    budget = parse_size(sram)
    cache = MemoryMode.cache_size(memory_mode) if memory_mode is not None else None
    if cache is not None:
        budget = cache if budget is None else min(budget, cache)
    return budget


class _Prepared:
    """A model lowered and scheduled for one target: what the compiles of one model at any
    budget share. None of it depends on the budget: the planner's frontier of a schedule, the
    schedule without its weight buffers, and each proposal's stripes are made once, when first
    asked for (`cascader.plan` compiles 20-50 budgets of one `_Prepared`)."""

    def __init__(self, model: Model, accelerator: str, system, memory_mode: str, part: Partition,
                 sched: NpuSchedule, bricked: NpuSchedule | None, optimise: str = "performance",
                 least_scratch: bool = False):
        self.model, self.accelerator, self.system, self.memory_mode = model, accelerator, system, memory_mode
        self.part, self.sched, self.bricked = part, sched, bricked
        self.config = MemoryConfig.for_target(accelerator, system, memory_mode)
        # By the id of the dense or the bricked schedule (both held here, so no id names another).
        self._frontiers: dict[int, Frontier] = {}
        self.optimise, self.is_least_scratch = optimise, least_scratch
        self._least_scratch: _Prepared | None = None
        self._overlapped: _Prepared | None = None
        # By (schedule id, the weight buffers kept): (the schedule, held so that its id names
        # no other, and its variant), the WEIGHT_ROOMS_KEPT made last.
        self._weight_rooms: dict[tuple[int, frozenset], tuple] = {}
        self._leans: dict[int, NpuSchedule] = {}
        self._evicted_bricks: NpuSchedule | None | bool = False  # False: not made yet
        # By (schedule id, proposal id): the proposals are held by the frontiers above.
        self._proposal_schedules: dict[tuple[int, int], tuple[NpuSchedule, NpuSchedule]] = {}

    def least_scratch(self) -> "_Prepared | None":
        """The same model lowered with the least scratch (`lowering.lower(...,
        least_scratch=True)`) and its OFMs written over their IFMs on the blocks that let them
        run furthest (`schedule.with_overlapping_blocks`, pairs above the floor), made when
        first asked for; None where that is this schedule, or this is it."""
        if self.is_least_scratch:
            return None
        if self._least_scratch is None:
            if self.part.trades_scratch:
                self._least_scratch = _prepare(self.model, self.accelerator, self.system, self.memory_mode,
                                               self.optimise, stage_bar(total=2, enabled=False), least_scratch=True)
            else:
                leanest = with_overlapping_blocks(self.sched, self.part.graph,
                                                  floor(self.part, self.lean(self.sched), resident=True).bytes)
                self._least_scratch = leanest is not self.sched and _Prepared(
                    self.model, self.accelerator, self.system, self.memory_mode, self.part, leanest, self.bricked,
                    self.optimise, least_scratch=True)
        return self._least_scratch or None

    def overlapped(self) -> "_Prepared | None":
        """This lowering with its operations written over the inputs they consume
        (`NpuSchedule.overlapping`: `schedule._overlapping_operations`, and a run of one
        operator's operations as a staircase), on the blocks scheduled, made when first asked
        for; None where `least_scratch` is that already (a model that trades no scratch) or
        this is a variant. Zoo mobilenet_v2_nchw on U55-128: the TRANSPOSE's steps (its default
        lowering) then lay out in 55,360 B, within Vela's Size SRAM (62,208 B), where its
        least-scratch lowering's per-channel planes are slower (987,781 cycles against
        Vela's 836,754)."""
        if self.is_least_scratch or not self.part.trades_scratch:
            return None
        if self._overlapped is None:
            self._overlapped = _Prepared(self.model, self.accelerator, self.system, self.memory_mode, self.part,
                                         replace(self.sched, overlapping=True), self.bricked, self.optimise,
                                         least_scratch=True)
        return self._overlapped

    def variants(self) -> list["_Prepared"]:
        """The leaner variants compiled where this one does not fit, or for the least SRAM:
        `least_scratch` and `overlapped`, those that exist."""
        return [v for v in (self.least_scratch(), self.overlapped()) if v is not None]

    def weight_room(self, sched: NpuSchedule, keep: frozenset) -> NpuSchedule | None:
        """`schedule.with_weight_room` of `sched` (the dense schedule, or a proposal's with the
        weight buffers of its lone operations) with only the weight buffers at positions `keep`,
        made when first asked for."""
        key = (id(sched), keep)
        if key not in self._weight_rooms:
            room = with_weight_room(without_weight_buffers(sched, keep, staged=True))
            keep_recent(self._weight_rooms, key, (sched, room), WEIGHT_ROOMS_KEPT)
        return self._weight_rooms[key][1]

    def evicted_bricks(self) -> NpuSchedule | None:
        """`scheduling.evicted_bricks` of the dense schedule, made when first asked for."""
        if self._evicted_bricks is False:
            self._evicted_bricks = evicted_bricks(self.part, self.sched)
        return self._evicted_bricks

    def lean(self, sched: NpuSchedule) -> NpuSchedule:
        """`without_weight_buffers(sched)`, one object per schedule: the stripes the target
        caches (`stripes._cascade_stripes`) are keyed by its operations' identities."""
        if id(sched) not in self._leans:
            self._leans[id(sched)] = without_weight_buffers(sched)
        return self._leans[id(sched)]

    def frontier(self, sched: NpuSchedule) -> Frontier:
        """`_frontier(part, sched)` for this model's dense or bricked schedule."""
        if id(sched) not in self._frontiers:
            self._frontiers[id(sched)] = _frontier(self.part, sched, self.lean(sched))
        return self._frontiers[id(sched)]

    def share_frontier(self, sched: NpuSchedule, frontier: Frontier) -> None:
        """Take `frontier` as `frontier(sched)` (made by the caller from the same schedule)."""
        self._frontiers[id(sched)] = frontier

    def proposal_schedules(self, sched: NpuSchedule, point) -> tuple[NpuSchedule, NpuSchedule]:
        """`stripes.proposal_schedules` of a point of `frontier(sched)`: its stripes and the same
        with the weight buffers of operations run alone."""
        key = (id(sched), id(point.proposal))
        if key not in self._proposal_schedules:
            self._proposal_schedules[key] = proposal_schedules(self.lean(sched), self.frontier(sched).graph,
                                                               point.proposal, _Target.of(sched), sched)
        return self._proposal_schedules[key]


def _prepare(model: ModelLike, accelerator: Union[str, Accelerator], system, memory_mode, optimise: str,
             bar, least_scratch: bool = False) -> _Prepared:
    """The lower and schedule stages, with the target's defaults resolved (the result names the
    system and mode it ran on). `least_scratch`: the lowering that takes the least scratch
    (`lowering.lower`)."""
    acc = Accelerator(accelerator)
    m = as_model(model)
    acc.require_compiles()
    part, segments = lower(m, acc.name, least_scratch)
    bar.update()
    bar.set_description("schedule")
    mode = (MemoryMode.parse(memory_mode) if memory_mode is not None else acc.default_memory_mode).value
    system = system if system is not None else acc.default_system
    # Performance: with the padded maps that run faster as bricks so stored too.
    sched, bricked = schedules(part, segments, acc.name, system, mode, bricks=optimise == "performance")
    if least_scratch:
        sched = with_overlapping_blocks(sched, part.graph, floor(part, without_weight_buffers(sched), resident=True).bytes)
    bar.update()
    return _Prepared(m, acc.name, system, mode, part, sched, bricked, optimise, least_scratch)


def _compile_either(prepared: _Prepared, budget: int | None, optimise: str, bar, start: float) -> CompiledModel:
    """`_compile_within` the model's own lowering and, where they differ (`_Prepared.variants`),
    its leaner variants too: when the first does not fit the budget, or for the least SRAM
    ("size"). Those are slower where the first fits, so "performance" takes one only then: the
    one whose binary the estimator says runs fastest ("size": the least SRAM)."""
    try:
        chosen = _compile_within(prepared, budget, optimise, bar, start)
    except InfeasibleError as e:
        chosen, missed = None, e
    if chosen is not None and optimise == "performance":
        return chosen
    variants = prepared.variants()  # made only when asked for: their blocks are chosen on the floor
    if not variants:
        if chosen is None:
            raise missed
        return chosen
    options, minima = [], [] if chosen is not None else [missed.minimum_sram]
    for variant in variants:
        try:
            options.append(_compile_within(variant, budget, optimise, bar, start))
        except InfeasibleError as e:
            minima.append(e.minimum_sram)
    if not options:
        if chosen is not None:
            return chosen
        least = min((m for m in minima if m is not None), default=None)
        if least is None:
            raise missed
        raise InfeasibleError.below(least, budget, "the leanest schedule") from None
    if chosen is None and optimise == "performance":
        return min(options, key=lambda c: c.estimate().total_cycles)
    leaner = min(options, key=lambda c: c.sram_bytes)
    return leaner if chosen is None or leaner.sram_bytes < chosen.sram_bytes else chosen


def _compile_within(prepared: _Prepared, budget: int | None, optimise: str, bar, start: float) -> CompiledModel:
    """The rest of `compile` for a prepared model: choose the schedule that fits `budget`,
    allocate, emit and package it."""
    part, sched, bricked, config = prepared.part, prepared.sched, prepared.bricked, prepared.config
    acc, system, mode = prepared.accelerator, prepared.system, prepared.memory_mode
    bar.set_description("allocate" if optimise == "performance" else "plan")
    planned = None  # the planner's cycles for the proposal compiled (None: not a proposal as planned)
    bricked_options: list[tuple] = []  # the bricked schedule's, once the dense one needs cascading or DRAM
    if optimise == "size":
        chosen, planned = _cascade(part, sched, budget, smallest=True, frontier=prepared.frontier(sched),
                                   prepared=prepared)
    else:
        uncascaded_minimum = None
        try:
            chosen, bricked_options = _uncascaded(part, sched, bricked, budget)
            bricked_options += _weight_room_options(prepared, sched, chosen, budget)
        except InfeasibleError as uncascaded:
            uncascaded_minimum = uncascaded.minimum_sram
        if uncascaded_minimum is not None:  # out of the handler: one error, not a chain of two
            bar.set_description("plan")
            chosen, planned = _cascade(part, sched, budget, uncascaded_minimum=uncascaded_minimum,
                                       frontier=prepared.frontier(sched), prepared=prepared)
        if bricked is not None and (planned is not None or chosen[1].eviction_cycles > 0):
            # The bricks may pay in a cascade too (MobileNetV1-0.75 on U65-512 within 128 KiB:
            # 1,366,849 -> 1,112,313 cycles); the estimate ranks it with the dense options.
            try:
                bricked_options.append(_cascade(part, bricked, budget, frontier=prepared.frontier(bricked),
                                                        prepared=prepared))
            except InfeasibleError:
                pass
    bar.update()
    bar.set_description("emit")
    templates = RecordTemplates()
    emission = None  # the chosen schedule's, when it was emitted to be ranked
    if optimise == "performance" and budget is not None and not config.shared_sram and (
            planned is not None or chosen[1].eviction_cycles > 0):
        # Dedicated_Sram under a budget: feature maps may also live in DRAM. The uncascaded
        # schedule may fit only by moving some there, and a cascade may keep them all in SRAM;
        # a proposal planned faster than the fastest that fits may fit by moving some of its
        # own there (MobileNetV1-0.75 on U65-256 at Vela's Size SRAM, 347,136 B: 1,731,897
        # cycles all in SRAM, 1,711,461 with part of a faster proposal in DRAM). Compile
        # those too and keep the binary the estimator says is fastest (Vela's accounting,
        # which the planner's stripes as run do not follow).
        frontier = prepared.frontier(sched)
        options = [(chosen, planned)]
        if planned is None:
            try:
                options.append(_cascade(part, sched, budget, frontier=frontier, prepared=prepared))
            except InfeasibleError:
                pass
        fastest_fitting = min((p for _, p in options if p is not None), default=math.inf)
        # The evicting proposals are compiled too. Their schedule plus the layout's eviction
        # cost comes within 0-3% of the estimate with stripes as run, but ranks close ones
        # otherwise than the estimate (Vela's accounting): of MobileNetV2-224's six at its least
        # SRAM on U65-256, the three it ranks first miss the estimate's best by 0.8%. The
        # planner's prediction does not cover evicted buffers: none is claimed for these.
        evicting = _evicting_cascades(part, sched, budget, frontier, fastest_fitting, prepared)
        evicting += _reblocked(options + bricked_options + [(a, None) for a in evicting], part, budget)
        # Ranked by the estimate of their command streams: only the one kept is packaged, from
        # the emission it was ranked on.
        best, chosen, planned, emission = _fastest(options + bricked_options + [(a, None) for a in evicting],
                                                   acc, system, mode, templates)
        bricks = prepared.evicted_bricks()
        if bricks is not None:
            # Padded maps evicted to DRAM pay as bricks: the same options of the schedule with
            # those bricked (`evicted_bricks`), uncascaded and the evicting proposals, ranked
            # against the fastest, whatever that evicts (MobileNetV1-0.75 96x128 on U65-256
            # within 48 KiB: the fastest dense option evicts other maps than the bricked ones,
            # 669,698 cycles; with the bricks evicted, 645,889).
            whole = []
            try:
                evicted = allocate(bricks, part, budget, reslice=True)
                if evicted[1].eviction_cycles > 0:
                    whole.append((evicted, None))
            except InfeasibleError:
                pass
            bricked_evicting = _evicting_cascades(part, bricks, budget, prepared.frontier(bricks), fastest_fitting,
                                                  prepared)
            bricked_evicting += _reblocked(whole + [(a, None) for a in bricked_evicting], part, budget)
            faster = _fastest(whole + [(a, None) for a in bricked_evicting], acc, system, mode, templates)
            if faster[0] < best:
                best, chosen, planned, emission = faster
                evicting += bricked_evicting
        if any(chosen is a for a in evicting):
            # It was compared laid out by the greedy planner; the exact one evicts no more.
            exact = allocate(chosen[0], part, budget)
            emitted = emit(exact, acc, templates)
            if _stream_cycles(emitted, acc, system, mode) <= best:
                chosen, emission = exact, emitted
    elif bricked_options:
        _, chosen, planned, emission = _fastest([(chosen, planned)] + bricked_options, acc, system, mode, templates)
    emission = emission or emit(chosen, acc, templates)
    out, flash, records = package_binary(prepared.model, chosen, emission, acc, part.removed)
    sched, result = chosen[0], chosen[1]
    bar.update()
    bar.close()
    return CompiledModel(
        model=out, source=prepared.model, partition=part, schedule=sched, layout=result, sram_budget=budget,
        sram_bytes=sram_bytes(result, config), flash_bytes=len(flash), accelerator=acc, system=system,
        memory_mode=mode, operations=records, compile_seconds=time.perf_counter() - start,
        frontier=partial(plan, prepared.model, acc, system, mode),
    )


@dataclass
class CompiledPoint:
    """A point of the compiled frontier: what `compile` produces within `budget`. `sram_bytes`
    and `cycles` are the binary's (its layout, and the estimator's total, the headline
    yardstick). The planner's own prediction is not carried: a point has one figure per
    quantity, the binary's."""

    sram_bytes: int
    cycles: float
    budget: int | None
    binary: CompiledModel = field(repr=False)

    @property
    def cascades(self) -> int:
        return len({op.cascade for op in self.binary.schedule.operations if op.cascade is not None})

    def __repr__(self) -> str:
        return (f"CompiledPoint(sram={self.sram_bytes:,} B, cycles={self.cycles:,.0f}, {self.cascades} cascades; "
                f"compiled within {'no budget' if self.budget is None else f'{self.budget:,} B'})")


def _point(binary: CompiledModel, budget: int | None) -> CompiledPoint:
    return CompiledPoint(binary.sram_bytes, float(binary.estimate().total_cycles), budget, binary)


def _pareto(points: list[CompiledPoint]) -> list[CompiledPoint]:
    """The points no other beats on both SRAM and cycles, by increasing SRAM (of equal
    points, the one compiled within the smallest budget)."""
    front: list[CompiledPoint] = []
    for p in sorted(points, key=lambda p: (p.sram_bytes, p.cycles, math.inf if p.budget is None else p.budget)):
        if not front or p.cycles < front[-1].cycles:
            front.append(p)
    return front


# Compiles of one budget `_fixed_point` makes at most.
FIXED_POINT_ROUNDS = 4


def _compiled_point(prepared: _Prepared, budget: int | None, bar, compiled: dict) -> CompiledPoint:
    """The point `compile` makes of `prepared` within `budget`, from `compiled` (budget -> the
    point, or the InfeasibleError it raised) when that budget was compiled already: a compile
    is a function of the model, target and budget, and the fixed points of neighbouring budgets
    often meet at one SRAM (MobileNetV2-224 on U55-128: 53 compiles, 43 budgets)."""
    if budget not in compiled:
        try:
            compiled[budget] = _point(_compile_either(prepared, budget, "performance", bar, time.perf_counter()),
                                      budget)
        except InfeasibleError as e:
            compiled[budget] = e
    found = compiled[budget]
    if isinstance(found, InfeasibleError):
        raise found
    return found


def _fixed_point(prepared: _Prepared, budget: int | None, bar, compiled: dict | None = None) -> CompiledPoint | None:
    """The binary compiled within `budget`, as a point that compiling at its own SRAM gives
    again. A binary often uses less SRAM than its budget, and a compile within that smaller
    budget may choose otherwise (weight buffers that fitted the larger one, a proposal ranked
    differently): zoo MobileNetV2 on U55-128 within 33,120 B takes 32,256 B, and within
    32,256 B compiles to 31,648 B. So the budget shrinks to the binary's SRAM until a compile
    gives itself back. A planned size no binary reaches moves up to the least the compile
    names (`InfeasibleError.minimum_sram`, which compiles): its binary may be leaner than every
    planned size above (random network uint8 seed 1081 on U85-512 Sram_Only: the planned
    31,280..36,800 B all fail, the compile names 42,688 B and lays out 41,760 B, where the next
    planned size is 51,520 B). None: no binary fits, or none settled within FIXED_POINT_ROUNDS.
    `compiled`: the points compiled so far (`_compiled_point`), shared between budgets."""
    compiled = {} if compiled is None else compiled
    for _ in range(FIXED_POINT_ROUNDS):
        try:
            point = _compiled_point(prepared, budget, bar, compiled)
        except InfeasibleError as e:
            if e.minimum_sram is None or budget is None or e.minimum_sram <= budget:
                return None
            budget = e.minimum_sram
            continue
        if budget is None or point.sram_bytes == budget:
            return point
        try:
            again = _compiled_point(prepared, point.sram_bytes, bar, compiled)
        except InfeasibleError:
            # Its own SRAM does not compile again (a layout a few bytes under the least the
            # compile names: random network int8 seed 2835 on U55-128, 21,912 B within the
            # named 21,920 B): the point is the binary within its budget, which it keeps.
            return point
        if (again.sram_bytes, again.cycles) == (point.sram_bytes, point.cycles):
            return again
        budget = again.sram_bytes
    return None


@paused_gc()
def plan(model: ModelLike, accelerator: Union[str, Accelerator] = "ethos-u55-128", system: str | None = None,
         memory_mode: Union[str, MemoryMode, None] = None, options: PlanOptions | None = None,
         compiled: bool = True, including: tuple[CompiledModel, ...] = ()) -> Frontier:
    """The SRAM-versus-cycles frontier of `model`: every point a binary.

    The planner's frontier (`planner.plan`) gives the SRAM sizes worth compiling at; each is
    compiled as `cascader.compile(model, sram=size)` compiles it, and so is the unlimited
    compile. A point is the binary's SRAM and cycles (the estimator's, the headline yardstick
    of every report), and compiling at a point's SRAM gives that point again (`_fixed_point`).
    Binaries that another beats on both SRAM and cycles are left out.

    Parameters
    ----------
    options
        The planner's options: they choose the sizes compiled at (each compile plans as
        `cascader.compile` does).
    compiled
        False: the planner's frontier alone, its predictions (`PlanPoint`s), without compiling.
    including
        Binaries of this model and target already compiled, taken as points too
        (`CompiledModel.pareto` passes itself).
    """
    start = time.perf_counter()
    if not compiled:
        return planner_plan(model, accelerator, system, memory_mode, options)
    bar = stage_bar(total=2, enabled=False)
    prepared = _prepare(model, accelerator, system, memory_mode, "performance", bar)
    planned = plan_scheduled(prepared.part, prepared.sched, options, lean=prepared.lean(prepared.sched))
    if options is None or options == PlanOptions():
        # The compiles plan with the default options: their frontier is this one's proposals
        # with the planner's own bound (`_frontier`), not planned again.
        prepared.share_frontier(prepared.sched, unscored(planned))
    sizes = {p.sram_bytes for p in planned.points}
    for frugal in prepared.variants():  # the leaner variants' points are worth compiling at too
        sizes |= {p.sram_bytes for p in plan_scheduled(frugal.part, frugal.sched, options).points}
        # and so is its least SRAM as laid out: the planner's bound does not see an OFM written
        # over its IFM (`schedule._overlapping_operations`), which its blocks are chosen for.
        try:
            sizes.add(_compile_within(frugal, None, "size", bar, time.perf_counter()).sram_bytes)
        except InfeasibleError:
            pass
    points = [_point(b, b.sram_budget) for b in including]
    compiled_points: dict = {}
    for budget in sorted(sizes) + [None]:
        point = _fixed_point(prepared, budget, bar, compiled_points)
        if point is not None:
            points.append(point)
    return Frontier(_pareto(points), planned.graph, time.perf_counter() - start, prepared.accelerator,
                    planner_seconds=planned.planner_seconds, compiled=True, floor_bytes=planned.floor_bytes,
                    floor_operator=planned.floor_operator)
