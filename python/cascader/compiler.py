"""`cascader.compile`: a TFLite model -> an Ethos-U binary, as values through each stage.

lower (frontend.lower) -> schedule (schedule) -> allocate (memory.layout) -> emit (emit.program)
-> package (tflite.ethos_u). Each stage is a function of the previous one's value, so a
notebook can stop after any of them.
"""

from __future__ import annotations

import math
import os
import re
import time
from functools import cached_property
from typing import Iterator, NamedTuple, Union

import numpy as np

from .arch import DEFAULT_MODE, DEFAULT_SYSTEM, Accelerator, MemoryMode, arch_config
from .brick_layout import MIN_TOTAL_SAVING, brick_padded_maps
from .compiled import CompiledModel
from .emit.program import ARENA_REGIONS, FlashImage, Placement, RecordTemplates, emit_segment
from .errors import BudgetError, InfeasibleError, InvalidArgumentError, ModelError, UnsupportedError
from .frontend.lower import lower_segment
from .frontend.lowered import LoweredSegment
from .frontend.partition import NPU, Partition, partition
from .frontend.support import Verdict
from .memory import MemoryConfig, MemoryLayout, layout
from .progress import progress as stage_bar
from .gc_pause import paused_gc
from .schedule import (NpuSchedule, SegmentSchedule, fit_weight_buffers, live_bytes, memory_schedule,
                       schedule_uncascaded, second_slot_key, weight_buffers_peak, weights_key, without_weight_buffers)
from .tflite import Model, load_model
from .tflite.ethos_u import ArenaSizes, NpuSubgraph, driver_payload, package

ModelLike = Union[str, os.PathLike, bytes, bytearray, Model]
# Dedicated_Sram: proposals that fit a budget only with feature maps in DRAM are compiled beside
# the fastest that fits without: at most this many, and only while their stripe operations
# together stay within EVICTING_WORK (a layout, an emission and an estimate cost about 25 us per
# operation: MobileNetV2-224's proposals have 460 to 1,740, palm detection's up to 9,000).
EVICTING_CANDIDATES = 6
EVICTING_WORK = 6000
_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1000, "KIB": 1024, "M": 1 << 20, "MB": 1000**2, "MIB": 1 << 20}


def parse_size(value: Union[int, str, None]) -> int | None:
    """Bytes from an int or a string such as "256KiB", "1.5MiB", "300kB" (None: unlimited)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidArgumentError(f"sram must be bytes or a size such as '256KiB', not {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise InvalidArgumentError(f"sram must not be negative, got {value}")
        return value
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(value))
    unit = m.group(2).upper() if m else None
    if m is None or unit not in _UNITS:
        raise InvalidArgumentError(f"sram {value!r} is not a size; write bytes or e.g. '256KiB', '1.5MiB'")
    return int(float(m.group(1)) * _UNITS[unit])


def _as_model(model: ModelLike) -> Model:
    if isinstance(model, Model):
        return model
    if isinstance(model, (bytes, bytearray)):
        return load_model(bytes(model))
    if isinstance(model, (str, os.PathLike)):
        return load_model(model)
    raise InvalidArgumentError(f"model must be a path, bytes or a cascader.Model, not {type(model).__name__}")


def lower(model: Model) -> tuple[Partition, list[LoweredSegment]]:
    """Partition the model and lower every NPU segment.

    An operator the rules accept but the lowering cannot express goes to the CPU, with the
    lowering's reason as its verdict, and the partition is redone.
    """
    forced: dict[int, Verdict] = {}
    while True:
        part = partition(model, forced)
        malformed = [(i, v) for i, v in enumerate(part.verdicts) if v.rule == "operand_count"]
        if malformed:  # not a limit of the NPU: the model itself is broken
            i, v = malformed[0]
            raise ModelError(f"operator {i} is malformed: {v.reason}")
        try:
            return part, [lower_segment(part.graph, s.operators, part.removed)
                          for s in part.segments if s.target == NPU]
        except UnsupportedError as e:
            op = getattr(e, "operator", None)
            if op is None or op in forced:
                raise
            forced[op] = Verdict(False, "lowering", str(e))


def schedule(part: Partition, segments: list[LoweredSegment], accelerator: str, system=None,
             memory_mode=None) -> NpuSchedule:
    """The uncascaded schedule: one whole-tensor stripe per operation, in partition order."""
    order: list[tuple[str, int]] = []
    k = 0
    for s in part.segments:
        if s.target == NPU:
            order.append(("npu", k))
            k += 1
        else:
            order.extend(("cpu", i) for i in s.operators)
    return schedule_uncascaded(segments, order, accelerator, system, memory_mode)


class _Lean:
    """A schedule without the weight buffers of operations run alone
    (`without_weight_buffers`), and its `memory_schedule`: each made once, when first asked
    for. `memory` may be given by a caller that has it already."""

    def __init__(self, sched: NpuSchedule, graph, memory: tuple | None = None):
        self._sched, self.graph, self._memory = sched, graph, memory
        self._schedule: NpuSchedule | None = None

    @property
    def schedule(self) -> NpuSchedule:
        if self._schedule is None:
            self._schedule = without_weight_buffers(self._sched)
        return self._schedule

    @property
    def memory(self) -> tuple:
        if self._memory is None:
            self._memory = memory_schedule(self.schedule, self.graph)
        return self._memory

    @cached_property
    def live(self) -> np.ndarray:
        """Bytes live at each step of `memory` (`live_bytes`)."""
        return live_bytes(self.memory[0])


# Shares of a budget the weight buffers re-sliced to fit it may fill (bytes live at once).
RESLICED_SHARES = (1.0, 0.9, 0.8)

# Cycles a weight buffer above the feature maps' peak must save per byte it adds, on
# Dedicated_Sram under a budget (`_weight_buffer_choices`).
BUDGETED_GAIN_PER_BYTE = 0.05


def _weight_buffer_choices(sched: NpuSchedule, lean: _Lean, config: MemoryConfig, reslice: bool = False
                           ) -> Iterator[tuple[NpuSchedule, tuple | None]]:
    """The schedules `allocate` tries, fastest first, with their memory schedules where known:
    every weight buffer that pays, then (`reslice`, under a budget) those that fit the budget,
    re-sliced thinner where that makes them fit, then those that fit under the feature maps'
    own peak, then none. The buffers under the peak and the re-sliced ones are made together,
    when every buffer did not fit."""
    if not any(op.weight_buffer and op.shared_weights is None for op in sched.operations):
        yield sched, lean.memory  # nothing to drop: the schedule is its own lean one
        return
    budget = config.fast_capacity
    if config.shared_sram:
        # Every buffer kept: laid out only when the bytes live at once can fit the budget.
        if budget is None or weight_buffers_peak(sched, lean.memory) <= budget:
            yield sched, None
        fitted = fit_weight_buffers(sched, lean.graph, lean.memory, lean_live=lean.live)
        faster = []
    else:
        budgeted = budget is not None
        fitted = fit_weight_buffers(sched, lean.graph, lean.memory, budgeted=budgeted, lean_live=lean.live)
        # Dedicated_Sram: SRAM is a cache beside DRAM. When the buffers that fit under the
        # feature maps' peak are within 5% as fast, the SRAM the rest would take is not worth
        # it (on the shared models this keeps SRAM within Vela's on every U65 row), except for
        # buffers that save at least a cycle per byte they add; under a budget, the SRAM is the
        # user's to spend: a cycle per 20 bytes (zoo MobileNetV1's 3x3x256 pointwise on U65-256:
        # 1,391 cycles for 14,848 B, as Vela's binary within 1.5x its Size SRAM; a generous
        # budget still does not buy zoo mobilenet_v3_blocks 1% for five times the SRAM).
        worth_it = fitted.total_cycles > 1.05 * sched.total_cycles
        if worth_it:
            yield sched, None
        gain = BUDGETED_GAIN_PER_BYTE if budgeted else 1.0
        faster = [fit_weight_buffers(sched, lean.graph, lean.memory, above_peak_gain=gain, budgeted=budgeted,
                                     lean_live=lean.live)]
    if reslice and budget is not None and (config.shared_sram or worth_it):
        # A budget above the feature maps' peak, when every buffer is wanted but does not fit:
        # the buffers that fit within it, re-sliced thinner where that makes them fit, not only
        # those under the peak (MLPerf Tiny's ResNet on U55-128 within 128 KiB: 1,223,448 ->
        # 1,133,548 cycles, where Vela's binary takes 1,167,798). On Dedicated_Sram only where
        # the buffers are worth their SRAM (above): else a generous budget would buy 1% with
        # five times the SRAM.
        # The layout may need more than the bytes live at once (zoo fc_autoencoder on U65-512:
        # buffers live within 32,512 B laid out in 35,120), so a little less is tried too.
        faster += [fit_weight_buffers(sched, lean.graph, lean.memory, budgeted=True, lean_live=lean.live,
                                      capacity=int(budget * share)) for share in RESLICED_SHARES]
    seen = set()
    for candidate in sorted((c for c in faster if c.total_cycles < fitted.total_cycles), key=lambda c: c.total_cycles):
        buffers = tuple((op.weight_buffer, op.depth_step) for op in candidate.operations)
        if buffers not in seen:
            seen.add(buffers)
            yield candidate, None
    yield fitted, None
    yield lean.schedule, lean.memory


def allocate(sched: NpuSchedule, part: Partition, sram: int | None, lean_memory: tuple | None = None,
             solver: str = "exact", reslice: bool = False) -> tuple[NpuSchedule, MemoryLayout, Placement, dict[int, int]]:
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
    on U55-128 within 95,180 B: 1,250,028 -> 1,313,436 cycles).

    Raises
    ------
    InfeasibleError
        The budget is below what even the leanest schedule needs; the message and
        `minimum_sram` give the smallest budget that works.
    """
    config = MemoryConfig.for_target(sched.accelerator, sched.system, sched.memory_mode, sram_size=sram, solver=solver)
    lean = _Lean(sched, part.graph, lean_memory)
    fallback = None  # the fastest choice that fitted only without some of its weight buffers
    for candidate, known in _weight_buffer_choices(sched, lean, config, reslice):
        if fallback is not None and candidate.total_cycles >= fallback[0].total_cycles:
            break
        chosen = candidate
        while True:
            msched, index, _ = known or memory_schedule(candidate, part.graph)
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
                    candidate, {k for k, sop in enumerate(candidate.operations) if sop.weight_buffer and k not in evicted})
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
    raise InfeasibleError(
        f"the model needs at least {need:,} B of SRAM uncascaded; the budget is {sram:,} B. "
        f"Pass sram={need} or more, or let compile cascade",
        minimum_sram=need,
    )


def _bricked(part: Partition, segments: list[LoweredSegment], sched: NpuSchedule) -> NpuSchedule | None:
    """`sched` with the padded maps that run faster as bricks on its target stored so
    (`brick_layout`), or None when that saves too little of the whole schedule's cycles."""
    from .schedule import _Target

    bricked = brick_padded_maps(segments, _Target.of(sched))
    if all(a is b for a, b in zip(bricked, segments)):
        return None
    faster = schedule(part, bricked, sched.accelerator, sched.system, sched.memory_mode)
    return faster if faster.total_cycles < (1 - MIN_TOTAL_SAVING) * sched.total_cycles else None


def _uncascaded(part: Partition, sched: NpuSchedule, bricked: NpuSchedule | None, budget: int | None
                ) -> tuple[tuple, list[tuple]]:
    """The uncascaded schedule laid out under the budget: `bricked` (`_bricked`) when it fits
    with every feature map in the fast memory, else `sched`. The bricks are a speed choice: a
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


def _fastest(options: list[tuple], accelerator: str, system, memory_mode: str, templates: RecordTemplates
             ) -> tuple[float, tuple, float | None, _Emission]:
    """Of (allocated, planned cycles) options, the one whose command streams the estimator says
    run fastest: (its cycles, allocated, planned cycles, emission)."""
    best = (math.inf, None, None, None)
    for allocated, planned_cycles in options:
        emitted = _emitted(allocated, accelerator, templates)
        cycles = _stream_cycles(emitted, accelerator, system, memory_mode)
        if cycles < best[0]:
            best = (cycles, allocated, planned_cycles, emitted)
    return best


def _frontier(part: Partition, sched: NpuSchedule):
    """The planner's frontier of `sched`'s proposals (their own memory bound, not laid out)."""
    from .planner import plan_schedule
    from .schedule import _Target

    return plan_schedule(without_weight_buffers(sched), part.graph, _Target.of(sched), score=False, buffered=sched)


def _cascade(part: Partition, sched: NpuSchedule, budget: int | None, smallest: bool = False,
             uncascaded_minimum: int | None = None, frontier=None):
    """A cascaded schedule from the planner's frontier that fits `budget`: the fastest (from
    the fastest point that claims to fit down to the leanest) or, with `smallest`, the least
    SRAM (from the leanest point up). Returns the allocated schedule and the planner's cycles
    for the proposal it came from. `frontier`: `_frontier(part, sched)`, when the caller has it.

    Raises InfeasibleError naming the least SRAM that compiles when none fits.
    """
    from .planner import lay_out_leanest
    from .schedule import _Target
    from .stripes import cascaded_schedule, with_buffered_weights

    lean = without_weight_buffers(sched)
    target = _Target.of(sched)
    # The planner's memory bound is a lower bound of a layout (up to the 16-byte rounding of the
    # topmost buffer, which the layout need not pad): only proposals within the budget by it can
    # fit, and only those are laid out.
    frontier = frontier or _frontier(part, sched)
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
        striped = cascaded_schedule(lean, pg, point.proposal, target)
        buffered = with_buffered_weights(striped, lean, pg, point.proposal, sched)
        try:
            allocated = allocate(buffered, part, budget)
        except InfeasibleError:
            continue
        if allocated[0] is buffered:
            return allocated, point.cycles
        # Its weight buffers did not all fit the exact layout: a faster point may still
        # compile as planned.
        if fallback is None or planned(allocated, buffered, point) < fallback[1]:
            fallback = (allocated, planned(allocated, buffered, point))
    if fallback is not None:
        return fallback
    # The least SRAM that really compiles: the leanest points as the compile lays them out,
    # without weight buffers (the planner's bound leaves out what only the binary has, e.g.
    # arena placement rules, and a chain of staircases drifts).
    need, point, striped, lean_memory = min(lay_out_leanest(frontier, part.graph, lean, config,
                                                            fits=None if smallest else budget), key=lambda o: o[0])
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
    raise InfeasibleError(
        f"the model needs at least {least:,} B of SRAM (cascaded); the budget is {budget:,} B. Pass sram={least} or more",
        minimum_sram=least,
    )


def _evicting_cascades(part: Partition, sched: NpuSchedule, budget: int, frontier, faster_than: float) -> list[tuple]:
    """Dedicated_Sram: the proposals planned faster than `faster_than` cycles whose feature maps
    do not all fit `budget`, laid out within it by moving some of them to DRAM (the allocator's
    eviction), fastest planned first, within EVICTING_CANDIDATES and EVICTING_WORK. The planner
    costs every tensor in SRAM; the layout adds what its evictions cost (`memory_schedule`).
    They are laid out by the greedy planner, quick and valid (the exact one proves each
    eviction round's fit, 0.2 s a proposal on palm detection): the caller compiles them and lays
    out the one it keeps again exactly."""
    from .schedule import _Target
    from .stripes import cascaded_schedule, with_buffered_weights

    lean = without_weight_buffers(sched)
    target = _Target.of(sched)
    out, work = [], 0
    for point in sorted(frontier.points, key=lambda p: p.cycles):
        if point.cycles >= faster_than or len(out) == EVICTING_CANDIDATES:
            break
        if point.sram_bytes - 15 <= budget:
            continue  # fits as planned: `_cascade`'s
        striped = cascaded_schedule(lean, frontier.graph, point.proposal, target)
        work += len(striped.operations)
        if work > EVICTING_WORK:
            break
        try:
            out.append(allocate(with_buffered_weights(striped, lean, frontier.graph, point.proposal, sched), part, budget,
                                solver="greedy"))
        except InfeasibleError:
            continue
    return out


class _Emission(NamedTuple):
    """An allocated schedule emitted: its flash image laid out, and each NPU segment with its
    operation records and command words, in order."""

    flash: FlashImage
    segments: list[tuple[SegmentSchedule, list[dict], np.ndarray]]


def _emitted(allocated: tuple, accelerator: str, templates: RecordTemplates | None = None) -> _Emission:
    """`allocated` emitted. `templates`: shared by the emissions of one compile (its candidate
    schedules share their lowered operations)."""
    sched, _, placement, _ = allocated
    flash, segments = FlashImage(), []
    templates = templates or RecordTemplates()
    first = 0  # the position of the segment's first operation in the whole schedule
    for seg in sched.segments:
        ops, words = emit_segment(seg, first, placement, flash, accelerator, templates)
        first += len(seg.operations)
        segments.append((seg, ops, words))
    return _Emission(flash, segments)


def _emit(m: Model, allocated: tuple, accelerator: str, templates: RecordTemplates | None = None,
          emission: _Emission | None = None, removed: tuple[int, ...] = ()) -> tuple[Model, bytes, list[list[dict]]]:
    """The packaged binary of an allocated schedule: the output model, its flash image and the
    emitted operation records per `ethos-u` operator. `emission`: `_emitted(allocated, ...)`,
    when the caller has it (a compile that ranked its candidates on their command streams).
    `removed`: the partition's operators left out (`Partition.removed`)."""
    sched, result, placement, offsets = allocated
    flash, segments = emission or _emitted(allocated, accelerator, templates)
    subgraphs, records = [], []
    for seg, ops, words in segments:
        records.append(ops)
        subgraphs.append(NpuSubgraph(seg.segment.operators, words))
    data = flash.data
    # Nothing on the NPU (every operator's verdict is CPU): the model runs on TFLM as it is.
    out = m if not subgraphs else package(m, subgraphs, data, ArenaSizes.from_layout(result), offsets,
                                          accelerator=accelerator, description="cascader Optimised", order=sched.order,
                                          removed=removed)
    return out, data, records


def _stream_cycles(emission: _Emission, accelerator: str, system, memory_mode: str) -> float:
    """The estimator's cycles of the binary `_emit` makes of an emission, from its command
    streams alone: the flash image only laid out, nothing packaged."""
    from .sim.estimator import payload_cycles

    payloads = [driver_payload(words, accelerator) for _, _, words in emission.segments]
    return payload_cycles(payloads, arch_config(accelerator, system, memory_mode))


def sram_bytes(result: MemoryLayout, config: MemoryConfig) -> int:
    """The SRAM a layout uses: the whole scratch arena when it is in SRAM (Shared_Sram,
    Sram_Only), else the fast arena."""
    return result.sizes.get("scratch", 0) if config.shared_sram else result.sizes.get("scratch_fast", 0)


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
    optimise = str(optimise).lower()
    if optimise not in ("performance", "size"):
        raise InvalidArgumentError(f"optimise must be 'performance' or 'size' (Vela's names), not {optimise!r}")
    budget = parse_size(sram)
    # A preset such as Dedicated_Sram_384KB names its arena cache: that is a budget too.
    cache = MemoryMode.cache_size(memory_mode) if memory_mode is not None else None
    if cache is not None:
        budget = cache if budget is None else min(budget, cache)
    acc = Accelerator(accelerator)
    m = _as_model(model)
    bar = stage_bar(total=4, desc="lower", enabled=progress, unit="stage")
    part, segments = lower(m)
    bar.update()
    bar.set_description("schedule")
    # The target's defaults, resolved here so the result names the system and mode it ran on.
    u65 = acc._config.is_u65
    mode = (MemoryMode.parse(memory_mode) if memory_mode is not None else DEFAULT_MODE[u65]).value
    system = system if system is not None else DEFAULT_SYSTEM[u65]
    sched = schedule(part, segments, acc.name, system, mode)
    # Performance: the same schedule with the padded maps that run faster as bricks so stored.
    bricked = _bricked(part, segments, sched) if optimise == "performance" else None
    bar.update()
    bar.set_description("allocate" if optimise == "performance" else "plan")
    config = MemoryConfig.for_target(acc.name, system, mode)
    planned = None  # the planner's cycles for the proposal compiled (None: not a proposal as planned)
    frontier = None
    bricked_options: list[tuple] = []  # the bricked schedule's, once the dense one needs cascading or DRAM
    if optimise == "size":
        chosen, planned = _cascade(part, sched, budget, smallest=True)
    else:
        try:
            chosen, bricked_options = _uncascaded(part, sched, bricked, budget)
        except InfeasibleError as uncascaded:
            bar.set_description("plan")
            frontier = _frontier(part, sched)
            chosen, planned = _cascade(part, sched, budget, uncascaded_minimum=uncascaded.minimum_sram,
                                       frontier=frontier)
        if bricked is not None and (planned is not None or chosen[1].eviction_cycles > 0):
            # The bricks may pay in a cascade too (MobileNetV1-0.75 on U65-512 within 128 KiB:
            # 1,366,849 -> 1,112,313 cycles); the estimate ranks it with the dense options.
            try:
                bricked_options.append(_cascade(part, bricked, budget))
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
        frontier = frontier or _frontier(part, sched)
        options = [(chosen, planned)]
        if planned is None:
            try:
                options.append(_cascade(part, sched, budget, frontier=frontier))
            except InfeasibleError:
                pass
        fastest_fitting = min((p for _, p in options if p is not None), default=math.inf)
        # The evicting proposals are compiled too. Their schedule plus the layout's eviction
        # cost comes within 0-3% of the estimate with stripes as run, but ranks close ones
        # otherwise than the estimate (Vela's accounting): of MobileNetV2-224's six at its least
        # SRAM on U65-256, the three it ranks first miss the estimate's best by 0.8%. The
        # planner's prediction does not cover evicted buffers: none is claimed for these.
        evicting = _evicting_cascades(part, sched, budget, frontier, fastest_fitting)
        # Ranked by the estimate of their command streams: only the one kept is packaged, from
        # the emission it was ranked on.
        best, chosen, planned, emission = _fastest(options + bricked_options + [(a, None) for a in evicting],
                                                   acc.name, system, mode, templates)
        if any(chosen is a for a in evicting):
            # It was compared laid out by the greedy planner; the exact one evicts no more.
            exact = allocate(chosen[0], part, budget)
            emitted = _emitted(exact, acc.name, templates)
            if _stream_cycles(emitted, acc.name, system, mode) <= best:
                chosen, emission = exact, emitted
    elif bricked_options:
        _, chosen, planned, emission = _fastest([(chosen, planned)] + bricked_options, acc.name, system, mode, templates)
    out, flash, records = _emit(m, chosen, acc.name, templates, emission, part.removed)
    sched, result = chosen[0], chosen[1]
    bar.update()
    bar.close()
    return CompiledModel(
        model=out, source=m, partition=part, schedule=sched, layout=result, sram_budget=budget,
        sram_bytes=sram_bytes(result, config), flash_bytes=len(flash), accelerator=acc.name, system=system,
        memory_mode=mode, operations=records, compile_seconds=time.perf_counter() - start,
        planned_cycles=planned,
    )
