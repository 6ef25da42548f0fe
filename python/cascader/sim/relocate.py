"""A real scheduler's output as the memory planner's input: Vela's command streams.

A command stream is an ordered list of stripe-level operations (cascaded stripes, rolling
buffers, weight buffers and their DMAs). `stream_schedule` reads one back as a
`cascader.memory.Schedule` (the derivation is in the C++ core, `sim/stream_schedule.hpp`: one
buffer per version of the bytes a step writes, reads resolved through the block traversal's
IFM footprints), `plan` allocates its buffers per arena with our allocator, and
`relocated_command_streams` rewrites every arena address of the streams to the planned offsets
(`sim/relocate.hpp`). Simulating the relocated binary against the original is the end-to-end
test of the live-range builder and the allocator: a live range too short lets the allocator
put another buffer over bytes still to be read, and the outputs change.

What the sequential simulator cannot check is concurrency on the hardware. Two rules carry it:
a DMA that the stream does not precede with a kernel wait runs beside the operation before
it, so its buffer is a `weights` buffer whose range starts a step early; and, as in Vela's own
plans, a buffer last used at step s may share bytes with one first written at step s + 1
(Vela's allocations do this too, e.g. 13 times on zoo MobileNet v1; the hardware's kernel
pipelining is ordered by the BLOCKDEP register, which relocation keeps as Vela set it).
One schedule covers the whole inference: every `ethos-u` operator's stream and a step per CPU
operator, so feature maps passing between `ethos-u` operators through the shared scratch arena
(named or not) are buffers like any other.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np

from .. import _core
from ..errors import CascaderError
from ..memory import Alias, AllocationResult, ScheduledBuffer, Schedule, ScheduleRanges, Step, allocate, live_ranges
from ..tflite import Model
from ..tflite.ethos_u import REGION_SCRATCH, REGION_SCRATCH_FAST
from .binary import NpuCall, npu_calls

ARENA_NAMES = {REGION_SCRATCH: "scratch", REGION_SCRATCH_FAST: "scratch_fast"}


@dataclass(frozen=True)
class BoundaryTensor:
    """A tensor a step outside the NPU writes (`input`) or reads, at its place in the scratch arena."""

    tensor: int  # index in the binary's main subgraph
    name: str
    region: int
    address: int
    size: int
    input: bool


@dataclass(frozen=True)
class AddressUse:
    """One address register an operation uses, and the buffer it points into (-1: flash/SHRAM)."""

    stream: int  # which `ethos-u` operator (in operator order)
    operation: int
    register: str
    buffer: int
    address: int


@dataclass
class StreamSchedule:
    """The schedule of a binary's inference, and where Vela put each buffer.

    Steps, in operator order: one writing the model inputs that live in the scratch arena; per
    `ethos-u` operator, a step reading its IFMs, one per operation of its command stream and a
    step reading its OFMs; one per CPU operator (reading, then writing, its tensors in the
    scratch arena); one reading the model outputs.
    """

    schedule: Schedule
    memory: np.ndarray  # per buffer: the arena region (1 scratch, 2 scratch_fast)
    address: np.ndarray  # per buffer: Vela's offset in that arena
    uses: list[AddressUse]
    boundary: list[BoundaryTensor]
    boundary_buffer: list[int]
    parts: list  # what the core derived it from: command streams (uint32 arrays), outside steps
    memory_of_region: list[int]
    calls: list[NpuCall]

    @property
    def arenas(self) -> list[int]:
        """The arena regions that hold buffers."""
        return sorted({int(m) for m in self.memory})

    def _repr_html_(self) -> str:
        kinds: dict[str, int] = {}
        for b in self.schedule.buffers:
            kinds[b.kind] = kinds.get(b.kind, 0) + 1
        summary = ", ".join(f"{n} {html.escape(k)}" for k, n in sorted(kinds.items()))
        return (f"<p>{len(self.calls)} ethos-u operators, {len(self.schedule.steps)} steps, "
                f"{len(self.schedule.buffers)} buffers ({summary}), {len(self.uses)} address uses</p>")


def stream_schedule(binary: Model) -> StreamSchedule:
    """Derive the memory planner's schedule from a binary's `ethos-u` operators and CPU operators.

    Raises
    ------
    CascaderError
        No `ethos-u` operator, operators that do not share one scratch arena, or an IFM/OFM
        without an offset in it.
    BinaryError
        A stream uses a region other than flash / scratch / scratch_fast, or reads arena bytes
        nothing wrote.
    """
    calls = npu_calls(binary)
    if not calls:
        raise CascaderError("the binary has no ethos-u operator")
    first = calls[0]
    if any((c.scratch_tensor, c.scratch_fast_tensor) != (first.scratch_tensor, first.scratch_fast_tensor)
           for c in calls):
        raise CascaderError("the ethos-u operators do not share one scratch and scratch_fast tensor")
    sg = binary.main
    state = [t.name for t in sg.tensors if t.is_variable]
    if state:
        # The stream reads them before any step writes them (the last inference did), and
        # writes them once per time step: a schedule of one inference has no live range for them.
        raise CascaderError(f"the binary keeps state between inferences in its arena ({', '.join(state[:3])}): "
                            "relocation plans one inference and cannot move it")
    offsets = first.arena_offsets
    scratch = offsets.get(first.scratch_tensor, 0)
    scratch_end = scratch + sg.tensors[first.scratch_tensor].nbytes

    def in_scratch(t: int) -> bool:
        return (t >= 0 and t in offsets and t not in (first.scratch_tensor, first.scratch_fast_tensor)
                and scratch <= offsets[t] and offsets[t] + sg.tensors[t].nbytes <= scratch_end)

    boundary: list[BoundaryTensor] = []

    def step(reads, writes) -> list[tuple]:
        out = []
        for ts, written in ((reads, False), (writes, True)):
            for t in dict.fromkeys(ts):
                if not in_scratch(t):
                    continue
                b = BoundaryTensor(t, sg.tensors[t].name, REGION_SCRATCH, offsets[t] - scratch, sg.tensors[t].nbytes,
                                   written)
                boundary.append(b)
                out.append((b.name, b.region, b.address, b.size, written))
        return out

    by_index = {c.index: c for c in calls}
    parts: list = [step((), sg.inputs)]
    for index, op in enumerate(sg.operators):
        call = by_index.get(index)
        if call is None:
            parts.append(step([t for t in op.inputs if t >= 0], op.outputs))
            continue
        for t in (*call.ifms, *call.ofms):
            if not in_scratch(t):
                raise CascaderError(f"{sg.tensors[t].name!r} has no OfflineMemoryAllocation offset inside the scratch "
                                    "arena: its place there is unknown")
        parts.append(step(call.ifms, ()))
        parts.append(np.asarray(_core.split_driver_payload(call.payload)[1], dtype=np.uint32))
        parts.append(step(call.ofms, ()))
    parts.append(step(sg.outputs, ()))
    # Vela passes the scratch tensor again as region 2 when there is no dedicated fast memory.
    fast_region = REGION_SCRATCH if first.scratch_fast_tensor == first.scratch_tensor else REGION_SCRATCH_FAST
    memory_of_region = [-1, REGION_SCRATCH, fast_region, -1, -1, -1, -1, -1]
    d = _core.derive_schedule(parts, memory_of_region)
    buffers = [ScheduledBuffer(name, kind, size, alignment) for name, kind, size, alignment, _, _ in d["buffers"]]
    steps = [Step(tuple(r), tuple(w)) for r, w in d["steps"]]
    return StreamSchedule(
        schedule=Schedule(buffers, steps, [Alias(b, t, kind="in_place", shift=s) for b, t, s in d["in_place"]]),
        memory=np.array([m for *_, m, _ in d["buffers"]], dtype=np.int64),
        address=np.array([a for *_, a in d["buffers"]], dtype=np.int64),
        uses=[AddressUse(*u) for u in d["uses"]],
        boundary=boundary,
        boundary_buffer=list(d["boundary_buffer"]),
        parts=parts,
        memory_of_region=memory_of_region,
        calls=calls,
    )


@dataclass
class RelocationPlan:
    """New offsets for every buffer of a stream schedule, one allocation per arena."""

    new_address: np.ndarray  # per buffer
    sizes: dict[int, int]  # arena region -> bytes needed
    lower_bounds: dict[int, int]  # arena region -> peak live bytes
    allocations: dict[int, AllocationResult] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return sum(a.seconds for a in self.allocations.values())

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{ARENA_NAMES[r]}</td><td>{self.sizes[r]:,}</td><td>{self.lower_bounds[r]:,}</td></tr>"
                       for r in sorted(self.sizes))
        return f"<table><tr><th>arena</th><th>bytes</th><th>lower bound</th></tr>{rows}</table>"


def plan(ss: StreamSchedule, solver: str = "exact", time_limit: float = 2.0,
         ranges: ScheduleRanges | None = None) -> RelocationPlan:
    """Allocate the buffers of `ss` per arena (`cascader.memory.allocate`).

    `ranges` replaces the live ranges `cascader.memory.live_ranges` derives (a negative control
    passes a shortened one).
    """
    r = ranges if ranges is not None else live_ranges(ss.schedule)
    if np.any(ss.memory != ss.memory[r.range_buffer[r.buffer_range]]):
        raise CascaderError("an in-place alias joins buffers of two arenas")
    memory = ss.memory[r.range_buffer]  # an in-place alias shares its root's arena
    start = np.zeros(r.start.size, dtype=np.int64)
    out = RelocationPlan(np.zeros(len(ss.schedule.buffers), dtype=np.int64), {}, {})
    for region in ss.arenas:
        idx = np.flatnonzero(memory == region)
        rows = np.stack([r.start[idx], r.end[idx], r.size[idx], r.alignment[idx]], axis=1)
        result = allocate(rows, solver=solver, time_limit=time_limit)
        start[idx] = result.offsets
        out.sizes[region] = result.height
        out.lower_bounds[region] = result.lower_bound
        out.allocations[region] = result
    out.new_address[:] = start[r.buffer_range] + r.buffer_offset
    return out


def relocated_command_streams(ss: StreamSchedule, new_address: np.ndarray) -> list[np.ndarray]:
    """Each `ethos-u` operator's command stream with every arena buffer moved to `new_address`."""
    return list(_core.relocate_command_streams(ss.parts, ss.memory_of_region, [int(a) for a in new_address]))


def relocated_offsets(ss: StreamSchedule, new_address: np.ndarray) -> dict[int, int]:
    """OfflineMemoryAllocation offsets (tensor index of the binary -> byte) after relocation.

    Tensors in the scratch arena move with their buffers. Other tensors Vela gave offsets live
    at times the schedule does not show: they keep their layout among themselves and move,
    together, above every relocated byte of the scratch arena, so no buffer can land on one.
    """
    first = ss.calls[0]
    offsets = dict(first.arena_offsets)
    scratch = offsets.get(first.scratch_tensor, 0)
    for b, buffer in zip(ss.boundary, ss.boundary_buffer):
        offsets[b.tensor] = scratch + int(new_address[buffer]) + b.address - int(ss.address[buffer])
    moved = {b.tensor for b in ss.boundary} | {first.scratch_tensor, first.scratch_fast_tensor}
    others = {t: o for t, o in offsets.items() if t not in moved}
    if others:
        in_scratch = ss.memory == REGION_SCRATCH
        sizes = np.array([b.size for b in ss.schedule.buffers], dtype=np.int64)
        top = scratch + int(max((new_address + sizes)[in_scratch], default=0))
        delta = (top + 15) // 16 * 16 - min(others.values())
        if delta > 0:
            offsets.update({t: o + delta for t, o in others.items()})
    return offsets
