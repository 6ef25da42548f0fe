"""Memory planning: live ranges, offset allocation and arena layout (the C++ core's `memory/`).

`allocate` places buffers that live over step intervals at byte offsets so that no two buffers
live at the same time share an address. `live_ranges` turns a scheduled list of steps into those
intervals, and `layout` spreads a schedule's buffers over the fast, slow, persistent and flash
arenas. `offline_memory_allocation` writes the TFLM metadata for an offline plan.
"""

from __future__ import annotations

import html
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np

from . import _core
from .errors import BudgetError, InvalidArgumentError

Solver = Literal["exact", "greedy", "first-fit"]
BUFFER_KINDS = ("feature_map", "stripe_buffer", "weights", "double_weights", "copy", "lut", "scratch")
ALIAS_KINDS = ("in_place", "slice", "reshape", "staircase")


@dataclass(frozen=True)
class Buffer:
    """One buffer to place: live over the half-open step interval [start, end), `size` bytes."""

    start: int
    end: int
    size: int
    alignment: int = 1
    name: str = ""
    kind: str = "feature_map"


@dataclass(frozen=True)
class AllocationResult:
    """Where each buffer goes, and how good that is proven to be.

    Attributes
    ----------
    offsets : np.ndarray
        int64 byte offset per buffer, in input order.
    height : int
        Arena size needed: max of offset + size.
    lower_bound : int
        Proven lower bound on any allocation (peak live bytes, raised by infeasibility proofs).
    optimal : bool
        `height == lower_bound`.
    nodes : int
        Search nodes the exact solver explored (0 for greedy).
    seconds : float
        Wall time.
    solver : str
        Which allocator produced it.
    """

    offsets: np.ndarray
    height: int
    lower_bound: int
    optimal: bool
    nodes: int
    seconds: float
    solver: str

    @property
    def gap(self) -> int:
        """Bytes above the proven lower bound (0 when optimal)."""
        return self.height - self.lower_bound

    def _repr_html_(self) -> str:
        status = "optimal" if self.optimal else f"gap {self.gap:,} B"
        return (
            f"<b>{html.escape(self.solver)}</b>: {self.height:,} B for {self.offsets.size} buffers "
            f"(lower bound {self.lower_bound:,} B, {status}; {self.nodes:,} nodes, {self.seconds * 1e3:.1f} ms)"
        )


def _columns(buffers: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """start, end, size, alignment int64 arrays from any accepted buffer description."""
    if hasattr(buffers, "start") and hasattr(buffers, "end") and hasattr(buffers, "size") and not isinstance(
        buffers, np.ndarray
    ):
        cols = [buffers.start, buffers.end, buffers.size, getattr(buffers, "alignment", None)]
    elif isinstance(buffers, np.ndarray) and buffers.dtype.names:
        names = buffers.dtype.names
        missing = {"start", "end", "size"} - set(names)
        if missing:
            raise InvalidArgumentError(f"structured buffer array lacks fields {sorted(missing)}")
        cols = [buffers["start"], buffers["end"], buffers["size"], buffers["alignment"] if "alignment" in names else None]
    else:
        try:
            rows = list(buffers)
        except TypeError:
            raise InvalidArgumentError(
                f"buffers must be records, rows or arrays of start, end, size; got {type(buffers).__name__}"
            ) from None
        if rows and not isinstance(rows[0], (Sequence, np.ndarray)):
            cols = [[r.start for r in rows], [r.end for r in rows], [r.size for r in rows],
                    [getattr(r, "alignment", 1) for r in rows]]
        else:
            try:
                arr = np.asarray(rows, dtype=np.int64).reshape(len(rows), -1) if rows else np.zeros((0, 3), np.int64)
            except (ValueError, TypeError) as e:
                raise InvalidArgumentError(f"buffer rows must be integers of equal length: {e}") from None
            if arr.shape[1] not in (3, 4):
                raise InvalidArgumentError(
                    f"buffers as rows need 3 or 4 columns (start, end, size[, alignment]); got {arr.shape[1]}"
                )
            cols = [arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3] if arr.shape[1] == 4 else None]
    start, end, size = (np.ascontiguousarray(c, dtype=np.int64) for c in cols[:3])
    alignment = np.ones_like(size) if cols[3] is None else np.ascontiguousarray(cols[3], dtype=np.int64)
    if not (start.ndim == end.ndim == size.ndim == alignment.ndim == 1) or not (
        start.size == end.size == size.size == alignment.size
    ):
        raise InvalidArgumentError("start, end, size and alignment must be 1-D and of the same length")
    return start, end, size, alignment


def lower_bound(buffers: Any) -> int:
    """Maximum over time of the live bytes: no allocation of `buffers` can be smaller."""
    start, end, size, _ = _columns(buffers)
    return int(_core.peak_live_bytes(start, end, size))


def allocate(
    buffers: Any,
    capacity: int | None = None,
    solver: Solver = "exact",
    *,
    minimise: bool = True,
    time_limit: float = 2.0,
    node_limit: int = 2_000_000,
) -> AllocationResult:
    """Place buffers at byte offsets so that buffers live at the same time never overlap.

    Parameters
    ----------
    buffers
        A structured numpy array with fields start, end, size (and optionally alignment); an
        (n, 3|4) integer array of rows; a sequence of `Buffer` (or any records with those
        attributes); or an object with start/end/size array attributes (e.g. ActivationRanges).
        Each buffer lives over the half-open step interval [start, end).
    capacity
        Hard limit in bytes. Exceeding it raises BudgetError naming the smallest size found.
    solver
        "exact" (minimalloc-class search, warm-started from greedy), "greedy" (best fit by size)
        or "first-fit" (TFLM's greedy planner: first fit by size).
    minimise
        Exact only: False stops at the first allocation within `capacity`.
    time_limit, node_limit
        Exact only: search limits. On hitting them the best allocation found is returned with
        `optimal=False` and its gap to the proven lower bound. A search that goes on past its
        first round runs its strategies on the cores CASCADER_NUM_THREADS allows, with the
        result and node count of one thread: the result depends only on the input as long as
        `node_limit`, not `time_limit`, ends the search.

    Returns
    -------
    AllocationResult
    """
    start, end, size, alignment = _columns(buffers)
    if solver == "exact":
        result = _core.exact_allocate(
            start, end, size, alignment, -1 if capacity is None else int(capacity), minimise, int(node_limit),
            float(time_limit),
        )
    elif solver in ("greedy", "first-fit"):
        fit = _core.GreedyFit.best if solver == "greedy" else _core.GreedyFit.first
        result = _core.greedy_allocate(start, end, size, alignment, fit)
        if capacity is not None and result.height > capacity:
            raise BudgetError(
                f"greedy allocation needs {result.height:,} B, over the capacity of {capacity:,} B "
                f"(lower bound {result.lower_bound:,} B); try solver='exact' or raise the capacity"
            )
    else:
        raise InvalidArgumentError(f"solver must be 'exact', 'greedy' or 'first-fit', not {solver!r}")
    return AllocationResult(
        offsets=np.asarray(result.offsets, dtype=np.int64),
        height=int(result.height),
        lower_bound=int(result.lower_bound),
        optimal=bool(result.optimal),
        nodes=int(result.nodes),
        seconds=float(result.seconds),
        solver=str(result.solver),
    )


def check_allocation(buffers: Any, offsets: Iterable[int]) -> None:
    """Raise InvalidArgumentError if two simultaneously live buffers overlap, or an offset is misaligned."""
    start, end, size, alignment = _columns(buffers)
    _core.check_allocation(start, end, size, alignment, [int(o) for o in offsets])


# --- schedules -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScheduledBuffer:
    """A buffer of a scheduled proposal. `kind` is one of BUFFER_KINDS."""

    name: str
    kind: str
    size: int
    alignment: int = 16
    persistent: bool = False
    access_bytes: float = 0.0  # bytes moved per inference; from the cycle model, for eviction
    constant: bool = False  # read-only data (encoded weights, constants): lives in flash
    # A tensor the CPU sees too (an NPU subgraph's IFM or OFM): TFLM places it in its arena,
    # which the driver passes as `scratch`, so it never goes to `scratch_fast`.
    cpu_visible: bool = False


@dataclass(frozen=True)
class Step:
    """One stripe-level NPU op or DMA: the buffers it reads and writes (indices)."""

    reads: tuple[int, ...] = ()
    writes: tuple[int, ...] = ()
    name: str = ""


def step(reads: tuple[int, ...], writes: tuple[int, ...], name: str) -> Step:
    """`Step(reads, writes, name)` without the frozen dataclass's `__init__` (which sets each
    field through `object.__setattr__`): a memory schedule makes one per stripe. The same
    object (`Step` has no `__post_init__`)."""
    s = _new(Step)
    s.__dict__.update(reads=reads, writes=writes, name=name)
    return s


_new = object.__new__


@dataclass(frozen=True)
class Alias:
    """`buffer` gets no memory of its own: it uses `target`'s.

    Attributes
    ----------
    buffer, target
        Buffer indices.
    offset
        slice / reshape: bytes into `target` (in_place: 0).
    kind
        ``"in_place"`` (an OFM written over its own IFM), ``"slice"``, ``"reshape"`` or
        ``"staircase"``: `buffer`, an output, may be written `shift` bytes below `target`, an
        input it consumes row band by row band, while each keeps its own lifetime (the two
        become a tie the layout may place at that offset, or apart). `staircase_shift` gives
        the smallest safe shift.
    shift
        in_place only: `buffer` starts this many bytes *below* `target` (a multiple of both
        alignments); the shared live range grows to cover both. Whether the operation is then
        safe depends on the NPU's block order, not on this builder: `cascader.sim.min_in_place_shift`
        gives the smallest safe shift (0 for a same-shape elementwise op, one IFM row for a
        3x3 same-padded depthwise whose blocks span the width; offset-0 in-place depthwise
        reads bytes it already overwrote) and `cascader.sim.in_place_hazard` checks any other
        (safety is not monotone in the shift). The target must not be used after the step
        that first writes `buffer`.
    """

    buffer: int
    target: int
    offset: int = 0
    kind: str = "in_place"
    shift: int = 0


@dataclass
class Schedule:
    """What the scheduler hands the memory planner: buffers, ordered steps, aliases."""

    buffers: list[ScheduledBuffer] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    aliases: list[Alias] = field(default_factory=list)


@dataclass(frozen=True)
class ScheduleRanges:
    """Live ranges of a schedule: one per root buffer, plus where every buffer sits inside one."""

    start: np.ndarray
    end: np.ndarray
    size: np.ndarray
    alignment: np.ndarray
    range_buffer: np.ndarray  # per range: its root buffer
    buffer_range: np.ndarray  # per buffer: the range holding it
    buffer_offset: np.ndarray  # per buffer: bytes into that range
    ties: tuple = ()  # staircases: (lower range, upper range, bytes the upper sits above the lower)


def staircase_shift(writes: Iterable[tuple[int, int, int]], reads: Iterable[tuple[int, int, int]],
                    alignment: int = 16) -> int:
    """The fewest bytes (a multiple of `alignment`) an output may start below an input it is
    written over: `writes` are the output's (step, begin, end) byte accesses, `reads` the
    input's. Every byte written at step t must land below every input byte read at step t - 1
    or later (consecutive NPU operations overlap)."""
    return _core.staircase_shift([tuple(map(int, a)) for a in writes], [tuple(map(int, a)) for a in reads],
                                 int(alignment))


def _enum(enum_type: Any, names: tuple[str, ...], value: str, what: str) -> Any:
    if value not in names:
        raise InvalidArgumentError(f"{what} must be one of {', '.join(names)}; got {value!r}")
    return getattr(enum_type, value)


# Buffer kinds by name. A compile copies thousands of buffers to the core: one lookup each, and
# the error message made only for a buffer that has none.
_BUFFER_KIND = {name: getattr(_core.BufferKind, name) for name in BUFFER_KINDS}


def core_schedule(schedule: Schedule) -> "_core.BufferSchedule":
    """The C++ core's copy of a schedule (live ranges and layouts are computed there)."""
    kinds = _BUFFER_KIND
    try:
        buffers = [
            (b.name, kinds[b.kind], int(b.size), int(b.alignment), bool(b.persistent), float(b.access_bytes),
             bool(b.constant), bool(b.cpu_visible))
            for b in schedule.buffers
        ]
    except (KeyError, TypeError):  # an unknown (or unhashable) kind, named here; else the error as it is
        for b in schedule.buffers:
            _enum(_core.BufferKind, BUFFER_KINDS, b.kind, f"kind of buffer {b.name!r}")
        raise
    steps = [(s.reads, s.writes) for s in schedule.steps]  # any sequences: the binding copies them
    aliases = [
        (a.buffer, a.target, int(a.offset), _enum(_core.AliasKind, ALIAS_KINDS, a.kind, "alias kind"), int(a.shift))
        for a in schedule.aliases
    ]
    return _core.BufferSchedule(buffers, steps, aliases)


def live_ranges(schedule: Schedule) -> ScheduleRanges:
    """Live ranges of every buffer of a schedule (see the rules in memory/buffer_schedule.hpp)."""
    r = _core.build_live_ranges(core_schedule(schedule))
    as_array = lambda v: np.asarray(v, dtype=np.int64)  # noqa: E731
    return ScheduleRanges(
        as_array(r.start), as_array(r.end), as_array(r.size), as_array(r.alignment), as_array(r.range_buffer),
        as_array(r.buffer_range), as_array(r.buffer_offset), tuple(r.ties),
    )


# --- arena layout ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryConfig:
    """The memories a layout may use. Cycles per byte come from the cycle model's memory system."""

    fast_capacity: int | None = None
    slow_capacity: int | None = None
    fast_cycles_per_byte: float = 0.0
    slow_cycles_per_byte: float = 1.0
    shared_sram: bool = False  # Shared_Sram: one scratch arena in SRAM, named `scratch`; no eviction
    solver: Literal["exact", "greedy"] = "exact"
    # Per exact search: the node limit ends it, so that a layout depends on its schedule only;
    # the time limit is a safety net (see memory/arena_layout.hpp).
    node_limit: int = 200_000
    time_limit: float = 5.0

    @classmethod
    def for_target(
        cls,
        accelerator: Any = "ethos-u55-128",
        system: Any = None,
        memory_mode: Any = None,
        sram_size: int | None = None,
        **options: Any,
    ) -> "MemoryConfig":
        """The memories of a target, with access costs from the cycle model.

        The fast arena is the memory the target's fast-cache region maps to (SRAM), the slow
        one is the arena region's memory (DRAM in Dedicated_Sram). When both are the same
        memory (Shared_Sram, Sram_Only) there is one arena and nothing to evict to.
        """
        from .arch import arch_config

        return cls.for_arch(arch_config(accelerator, system, memory_mode), sram_size, **options)

    @classmethod
    def for_arch(cls, arch: "_core.ArchConfig", sram_size: int | None = None, **options: Any) -> "MemoryConfig":
        """`for_target` of a target resolved already (`arch.arch_config`; a schedule's target
        holds it: resolving it anew builds the core's system and memory specs again)."""
        fast = arch.region_memory(_core.Region.FastCache)
        slow = arch.region_memory(_core.Region.Arena)
        return cls(
            fast_capacity=sram_size,
            fast_cycles_per_byte=_core.access_cycles_per_byte(arch, fast),
            slow_cycles_per_byte=_core.access_cycles_per_byte(arch, slow),
            shared_sram=fast == slow,
            **options,
        )

    def to_core(self) -> "_core.MemoryConfig":
        """The core's copy (memory/arena_layout.hpp), for the layouts computed there."""
        if self.solver not in ("exact", "greedy"):
            raise InvalidArgumentError(f"MemoryConfig.solver must be 'exact' or 'greedy', not {self.solver!r}")
        c = _core.MemoryConfig()
        c.fast_capacity = -1 if self.fast_capacity is None else int(self.fast_capacity)
        c.slow_capacity = -1 if self.slow_capacity is None else int(self.slow_capacity)
        c.fast_cycles_per_byte, c.slow_cycles_per_byte = float(self.fast_cycles_per_byte), float(self.slow_cycles_per_byte)
        c.exact, c.time_limit_s, c.shared = self.solver == "exact", float(self.time_limit), self.shared_sram
        c.node_limit = int(self.node_limit)
        return c


@dataclass(frozen=True)
class PlacedBuffer:
    """One buffer of a layout: its arena, address and lifetime."""

    name: str
    kind: str
    arena: str
    offset: int
    start: int
    end: int
    size: int


@dataclass(frozen=True)
class MemoryLayout:
    """Every buffer's arena and address, and each arena's size.

    Arena names follow the Ethos-U driver: `scratch_fast` (SRAM), `scratch` (off-chip, or SRAM
    in Shared_Sram mode), `persistent` (outlives an inference: LUTs, state), `flash` (constants).
    `arenas` and `offsets` hold each buffer's arena and address, in the schedule's order;
    `buffers` the same as records, with names and lifetimes.
    """

    arenas: list[str]
    offsets: list[int]
    sizes: dict[str, int]
    lower_bounds: dict[str, int]
    eviction_cycles: float
    # The schedule's buffers, and each one's live steps [start, end) and bytes: `buffers` is
    # made of them when first read (a compile lays out dozens of candidates and reads the
    # records of one at most; making them was a fifth of the layouts' time).
    spans: tuple[list, list[int], list[int], list[int]] = field(default=([], [], [], []), repr=False, compare=False)

    @cached_property
    def buffers(self) -> list[PlacedBuffer]:
        scheduled, starts, ends, sizes = self.spans
        return [PlacedBuffer(b.name, b.kind, arena, offset, start, end, size) for b, arena, offset, start, end, size
                in zip(scheduled, self.arenas, self.offsets, starts, ends, sizes)]

    @property
    def evicted(self) -> bool:
        """Whether a buffer the fast arena holds otherwise went to the slow one (Dedicated_Sram:
        a feature map moved to DRAM to fit the budget). Its `eviction_cycles` may still be 0,
        where the cycle model finds the slower traffic hidden under the compute."""
        return "scratch_fast" in self.sizes and any(
            arena == "scratch" and not b.cpu_visible for b, arena in zip(self.spans[0], self.arenas))

    @property
    def persistent_size(self) -> int:
        return self.sizes.get("persistent", 0)

    @property
    def non_persistent_size(self) -> int:
        return sum(v for k, v in self.sizes.items() if k in ("scratch", "scratch_fast"))

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(k)}</td><td>{v:,}</td><td>{self.lower_bounds.get(k, v):,}</td></tr>"
            for k, v in self.sizes.items()
        )
        return (
            "<table><tr><th>arena</th><th>bytes</th><th>lower bound</th></tr>"
            f"{rows}</table><p>{len(self.buffers)} buffers; eviction cost {self.eviction_cycles:,.0f} cycles</p>"
        )


def layout(schedule: Schedule, config: MemoryConfig | None = None) -> MemoryLayout:
    """Place every buffer of `schedule` in an arena and at an address.

    Feature maps, stripe buffers, weight buffers, copies and scratch go to the fast arena; when
    it does not fit `config.fast_capacity` the planner evicts to slow memory the buffers whose
    eviction costs the fewest extra access cycles per byte freed. CPU-visible buffers (the NPU
    subgraph's IFMs and OFMs) go to `scratch`, the arena TFLM plans, which outside Shared_Sram
    is the slow one. Persistent buffers (LUTs and state) and constants are laid out linearly in
    their own arenas.
    """
    config = config or MemoryConfig()
    laid = _core.layout_schedule(core_schedule(schedule), config.to_core())
    result = laid.arenas
    fast_name = "scratch" if config.shared_sram else "scratch_fast"
    names = {int(_core.Arena.fast): fast_name, int(_core.Arena.slow): "scratch",
             int(_core.Arena.persistent): "persistent", int(_core.Arena.flash): "flash"}
    arenas = [names[a] for a in laid.buffer_arena]
    sizes = {fast_name: int(result.fast_size)}
    lower = {fast_name: int(result.fast_lower_bound)}
    if not config.shared_sram:
        sizes["scratch"] = int(result.slow_size)
        lower["scratch"] = int(result.slow_lower_bound)
    sizes["persistent"] = int(result.persistent_size)
    sizes["flash"] = int(result.flash_size)
    return MemoryLayout(arenas, laid.buffer_address, sizes, lower, float(result.eviction_cycles),
                        spans=(schedule.buffers, laid.buffer_start, laid.buffer_end, laid.buffer_bytes))


def offline_memory_allocation(n_tensors: int, offsets: dict[int, int], subgraph: int = 0) -> bytes:
    """The TFLM `OfflineMemoryAllocation` metadata payload for one subgraph.

    int32 little-endian words: format version 0, subgraph index, tensor count n, then one offset
    per tensor into the arena (-1: let TFLM's planner place it at runtime). The count must equal
    the subgraph's tensor count, which TFLM checks.
    """
    words = [-1] * n_tensors
    for t, off in offsets.items():
        if not 0 <= t < n_tensors:
            raise InvalidArgumentError(f"tensor {t} is outside the subgraph's {n_tensors} tensors")
        if not 0 <= off < 2**31:
            raise InvalidArgumentError(f"offset {off} of tensor {t} does not fit an int32 arena offset")
        words[t] = int(off)
    return struct.pack(f"<{3 + n_tensors}i", 0, subgraph, n_tensors, *words)


def add_offline_memory_allocation(model: Any, offsets: dict[int, int], subgraph: int = 0) -> int:
    """Attach an offline plan for the CPU-side tensors of `model`'s subgraph; returns the buffer index."""
    n = len(model.subgraphs[subgraph].tensors)
    return model.add_metadata("OfflineMemoryAllocation", offline_memory_allocation(n, offsets, subgraph))


def sram_bytes(result: MemoryLayout, config: MemoryConfig) -> int:
    """The SRAM a layout uses: the whole scratch arena when it is in SRAM (Shared_Sram,
    Sram_Only), else the fast arena."""
    return result.sizes.get("scratch", 0) if config.shared_sram else result.sizes.get("scratch_fast", 0)
