"""A real scheduler's output as the memory planner's input: Vela's command streams.

A command stream is an ordered list of stripe-level operations (cascaded stripes, rolling
buffers, weight buffers and their DMAs). `stream_schedule` reads one back as a
`cascader.memory.Schedule` (the derivation is in the C++ core, `sim/stream_schedule.hpp`: one
buffer per version of the bytes a step writes, reads resolved through the block traversal's
IFM footprints), `plan` allocates its buffers per arena with our allocator, and
`relocated_command_stream` rewrites every arena address of the stream to the planned offsets
(`sim/relocate.hpp`). Simulating the relocated binary against the original is the end-to-end
test of the live-range builder and the allocator: a live range too short lets the allocator
put another buffer over bytes still to be read, and the outputs change.

What the sequential simulator cannot check is concurrency on the hardware. Two rules carry it:
a DMA that the stream does not precede with a kernel wait runs beside the operation before
it, so its buffer is a `weights` buffer whose range starts a step early; and, as in Vela's own
plans, a buffer last used at step s may share bytes with one first written at step s + 1
(Vela's allocations do this too, e.g. 13 times on zoo MobileNet v1; the hardware's kernel
pipelining is ordered by the BLOCKDEP register, which relocation keeps as Vela set it).
Binaries with more than one `ethos-u` operator (feature maps passing between them through the
shared scratch arena) are refused.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np

from .. import _core
from ..errors import CascaderError
from ..memory import Alias, AllocationResult, ScheduledBuffer, Schedule, ScheduleRanges, Step, allocate, live_ranges
from ..tflite import Model
from .binary import REGION_SCRATCH, REGION_SCRATCH_FAST, NpuCall, npu_calls

ARENA_NAMES = {REGION_SCRATCH: "scratch", REGION_SCRATCH_FAST: "scratch_fast"}


@dataclass(frozen=True)
class BoundaryTensor:
    """A subgraph IFM or OFM at its place in the scratch arena (from OfflineMemoryAllocation)."""

    tensor: int  # index in the binary's main subgraph
    name: str
    region: int
    address: int
    size: int
    input: bool


@dataclass(frozen=True)
class AddressUse:
    """One address register an operation uses, and the buffer it points into (-1: flash/SHRAM)."""

    operation: int
    register: str
    buffer: int
    address: int


@dataclass
class StreamSchedule:
    """The schedule of one `ethos-u` operator's command stream, and where Vela put each buffer.

    Steps: 0 writes the IFMs, 1..n are the stream's operations, n + 1 reads the OFMs.
    """

    schedule: Schedule
    memory: np.ndarray  # per buffer: the arena region (1 scratch, 2 scratch_fast)
    address: np.ndarray  # per buffer: Vela's offset in that arena
    uses: list[AddressUse]
    boundary: list[BoundaryTensor]
    boundary_buffer: list[int]
    words: np.ndarray  # the original command stream
    memory_of_region: list[int]
    call: NpuCall

    @property
    def arenas(self) -> list[int]:
        """The arena regions that hold buffers."""
        return sorted({int(m) for m in self.memory})

    def _repr_html_(self) -> str:
        kinds: dict[str, int] = {}
        for b in self.schedule.buffers:
            kinds[b.kind] = kinds.get(b.kind, 0) + 1
        summary = ", ".join(f"{n} {html.escape(k)}" for k, n in sorted(kinds.items()))
        return (f"<p>{len(self.schedule.steps)} steps, {len(self.schedule.buffers)} buffers ({summary}), "
                f"{len(self.uses)} address uses</p>")


def _boundary(model: Model, call: NpuCall) -> list[BoundaryTensor]:
    tensors = model.main.tensors
    scratch = call.arena_offsets.get(call.scratch_tensor, 0)
    out = []
    for ts, is_input in ((call.ifms, True), (call.ofms, False)):
        for t in ts:
            if t not in call.arena_offsets:
                raise CascaderError(f"{tensors[t].name!r} has no OfflineMemoryAllocation offset: its place in the "
                                    "scratch arena is unknown")
            address = call.arena_offsets[t] - scratch
            if address < 0:
                raise CascaderError(f"{tensors[t].name!r} lies {-address} bytes before the scratch tensor; the IFMs "
                                    "and OFMs of an ethos-u operator live inside its scratch arena")
            out.append(BoundaryTensor(t, tensors[t].name, REGION_SCRATCH, address, tensors[t].nbytes, is_input))
    return out


def stream_schedule(binary: Model) -> StreamSchedule:
    """Derive the memory planner's schedule from a binary's (single) `ethos-u` operator.

    Raises
    ------
    CascaderError
        The binary has no, or more than one, `ethos-u` operator (Vela then passes feature maps
        between them through the shared scratch arena, which one stream's schedule does not see).
    BinaryError
        The stream uses a region other than flash / scratch / scratch_fast, or reads arena bytes
        nothing wrote.
    """
    calls = npu_calls(binary)
    if len(calls) != 1:
        raise CascaderError(f"relocation handles a binary with one ethos-u operator; this one has {len(calls)} "
                            "(feature maps passing between them through the scratch arena are not derived)")
    call = calls[0]
    _, words = _core.split_driver_payload(call.payload)
    # Vela passes the scratch tensor again as region 2 when there is no dedicated fast memory.
    fast_region = REGION_SCRATCH if call.scratch_fast_tensor == call.scratch_tensor else REGION_SCRATCH_FAST
    memory_of_region = [-1, REGION_SCRATCH, fast_region, -1, -1, -1, -1, -1]
    boundary = _boundary(binary, call)
    d = _core.derive_stream_schedule(words, memory_of_region, [(b.name, b.region, b.address, b.size, b.input)
                                                               for b in boundary])
    buffers = [ScheduledBuffer(name, kind, size, alignment) for name, kind, size, alignment, _, _ in d["buffers"]]
    steps = [Step(tuple(r), tuple(w), "IFMs" if i == 0 else ("OFMs" if i == len(d["steps"]) - 1 else f"op {i - 1}"))
             for i, (r, w) in enumerate(d["steps"])]
    return StreamSchedule(
        schedule=Schedule(buffers, steps, [Alias(b, t, kind="in_place", shift=s) for b, t, s in d["in_place"]]),
        memory=np.array([m for *_, m, _ in d["buffers"]], dtype=np.int64),
        address=np.array([a for *_, a in d["buffers"]], dtype=np.int64),
        uses=[AddressUse(*u) for u in d["uses"]],
        boundary=boundary,
        boundary_buffer=list(d["boundary_buffer"]),
        words=np.asarray(words, dtype=np.uint32),
        memory_of_region=memory_of_region,
        call=call,
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


def relocated_command_stream(ss: StreamSchedule, new_address: np.ndarray) -> np.ndarray:
    """The command stream with every arena buffer moved to `new_address` (uint32 words)."""
    boundary = [(b.name, b.region, b.address, b.size, b.input) for b in ss.boundary]
    return _core.relocate_command_stream(ss.words, ss.memory_of_region, boundary,
                                         [int(a) for a in new_address])


def relocated_offsets(ss: StreamSchedule, new_address: np.ndarray) -> dict[int, int]:
    """OfflineMemoryAllocation offsets (tensor index of the binary -> byte) after relocation.

    The IFMs and OFMs move with their buffers. Other tensors Vela gave offsets (CPU operators'
    tensors) live beside them at times the stream does not show: they keep their layout among
    themselves and move, together, above every relocated byte of the scratch arena, so no
    relocated buffer can land on one.
    """
    offsets = dict(ss.call.arena_offsets)
    scratch = offsets.get(ss.call.scratch_tensor, 0)
    for b, buffer in zip(ss.boundary, ss.boundary_buffer):
        offsets[b.tensor] = scratch + int(new_address[buffer]) + b.address - int(ss.address[buffer])
    moved = {b.tensor for b in ss.boundary} | {ss.call.scratch_tensor, ss.call.scratch_fast_tensor}
    others = {t: o for t, o in offsets.items() if t not in moved}
    if others:
        in_scratch = ss.memory == REGION_SCRATCH
        sizes = np.array([b.size for b in ss.schedule.buffers], dtype=np.int64)
        top = scratch + int(max((new_address + sizes)[in_scratch], default=0))
        delta = (top + 15) // 16 * 16 - min(others.values())
        if delta > 0:
            offsets.update({t: o + delta for t, o in others.items()})
    return offsets
