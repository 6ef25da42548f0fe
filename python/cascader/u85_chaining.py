"""Ethos-U85 chaining: an operation's OFM kept in one of the U85's chaining buffers for the
elementwise operation right after it, which reads it as its IFM or IFM2 (OFM storage CHAINED on
the first, IFM/IFM2 storage CHAINED on the second, the map's REGION the buffer's number), and so
on along a chain of up to 4 operations, instead of scratch maps in memory.

Vela 5.2 chains so (regor's EthosU85OpGroup and SchedulerPacking): a chain starts at any NPU
operation but a resize, a DMA or a 32-bit null pooling, and each later operation is an
elementwise one reading the OFM of the one just before it; at most 4 operations, at most 3
operands read from memory (a constant scalar operand is none), no OFM written transposed or
reversed, no stripes of a cascade; each map between two of them has a single writer and a
single reader, is no graph output, and takes the next buffer (0, 1, 2). The chain runs one OFM
block at a time through all its operations, with the first one's block config, and is costed as
one operation (arch/ethos_u85/performance's `chained`, the estimator's reading of such a chain).
Here a chain is formed where:

- its first operation is a convolution, depthwise convolution, matrix product, pooling (not of
  32-bit maps) or elementwise operation (a table of its own is loaded before it) run whole (no
  stripes of a cascade), not sliced by depth (each slice would be an operation of its own), not
  writing its OFM transposed;
- each later one is elementwise, run whole, with no constant operand copied in by a DMA, nor a
  transposed OFM; it may read a table (a lookup fused into it, `lut_fusion`, or a softmax's),
  as Vela's fused table activations chain: the tables of a chain are all loaded before its first
  operation, each into LUT RAM bytes of its own (`ethos_u85.table_offsets`), so a chain ends
  before an operation whose table does not fit beside the others' (two 2 KiB int16 tables; Vela
  would load both over the same bytes);
- each map between two of them is a map of the segment's own (a scratch map of the lowering's,
  or a model tensor between two of its operators) that only these two touch, read whole in the
  reader's OFM shape, layout and type, and no CPU operator sees it (no graph output, no state);
- each later one accepts the first one's OFM block (`u85_try_block_config`: the chaining
  buffer's slots for a broadcast operand), and the cycle model finds the chain faster than its
  operations apart (of the chains from one first operation, the fastest against the rest apart).

The maps between them then take no memory (the memory schedule gives them no bytes) and the
emitter writes the storage and region fields (`ScheduledOperation.chain`). A schedule is
re-chained as a whole (`with_chains`): a cascade that stripes an operation of a chain leaves the
others unchained, and so are the operations a later pass replaces (schedule._mapped).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from . import _core
from .arch import MEMORIES, Accelerator
from .emit import ethos_u85
from .frontend.lowered import LoweredOperation
from .perf import OpCost, cost_from_core
from .schedule import CHAINING, NpuSchedule, ScheduledOperation, SegmentSchedule, _Target, unchained

OFM, IFM, IFM2 = "ofm", "ifm", "ifm2"  # the maps of ScheduledOperation.chain
MAX_OPERATIONS = 4  # in one chain (Vela 5.2's)
MAX_MEMORY_OPERANDS = 3  # a chain's operands read from memory (Vela 5.2's)
_HEADS = ("conv", "depthwise", "pool", "elementwise")  # the kinds a chain may start at


def with_chains(schedule: NpuSchedule, target: _Target | None = None) -> NpuSchedule:
    """`schedule` with every chain of operations the U85 runs faster chained (see the module),
    and every chain no longer valid (an operation of it cascaded) undone; other targets'
    schedules are returned as they are."""
    if Accelerator(schedule.accelerator).product != ethos_u85.PRODUCT:
        return schedule
    target = target or _Target.of(schedule)
    touched: Counter = Counter()  # per buffer, the operations that read or write it
    for seg in schedule.segments:
        for sop in seg.operations:
            lo = sop.lowered
            touched.update({v.buffer for v in (lo.ifm, lo.ifm2, lo.ofm) if v is not None})
    segments, changed = [], False
    for seg in schedule.segments:
        ops = [unchained(sop) for sop in seg.operations]
        k = 0
        while k < len(ops):
            chain = _fastest_chain(ops, k, seg, touched, target)
            ops[k:k + len(chain)] = chain
            k += max(len(chain), 1)
        changed |= any(a is not b for a, b in zip(ops, seg.operations))
        segments.append(SegmentSchedule(seg.segment, ops))
    return replace(schedule, segments=segments) if changed else schedule


def chained_buffers(schedule: NpuSchedule) -> set[int]:
    """The maps a schedule keeps in a chaining buffer (no memory of their own)."""
    return {sop.lowered.ofm.buffer for sop in schedule.operations if OFM in dict(sop.chain)}


def _memory_operands(op: LoweredOperation, chained: str = "") -> int:
    """How many of `op`'s IFM and IFM2 are read from memory, but its `chained` operand (a scalar
    IFM2 is a register)."""
    ifm2 = op.ifm2 is not None and op.registers.get("ifm2_scalar") is None
    return (op.ifm is not None and chained != IFM) + (ifm2 and chained != IFM2)


def _may_start(sop: ScheduledOperation) -> bool:
    lo = sop.lowered
    # Vela 5.2 starts no chain at a 32-bit pooling that only copies or rescales (its null pooling).
    copy_32 = lo.kind == "pool" and lo.ifm.element_size == 4
    return (lo.kind in _HEADS and not lo.registers.get("u85_dma") and not copy_32 and sop.cascade is None
            and sop.stripe_of is None and not sop.depth_step and "ofm_transpose" not in lo.registers)


def _head_description(head: ScheduledOperation, target: _Target):
    """The cycle model's description of a chain's first operation as it was costed (its weight
    streams, buffering and DMA slack), or None where its cost kept none."""
    if head.cost.described is not None:
        return head.cost.described
    if head.lowered.kind != "elementwise":
        return None
    return target.npu_op(head.lowered, block=tuple(head.block), ifm2_in_flash=head.constant_ifm2 == "flash")


def _chained_operand(first: ScheduledOperation, second: ScheduledOperation, seg: SegmentSchedule,
                     touched: Counter, target: _Target) -> str | None:
    """The operand of `second` ("ifm", "ifm2") that may read `first`'s OFM from a chaining
    buffer, `second` joining a chain `first` ends, or None."""
    a, b = first.lowered, second.lowered
    if b.kind != "elementwise":
        return None
    if second.cascade is not None or second.stripe_of is not None:
        return None
    # Vela 5.2 chains no operation that writes its OFM transposed or reversed (nor do we).
    if second.constant_ifm2 == "copy" or "ofm_transpose" in b.registers:
        return None
    if a.ofm.shape != b.ofm.shape:
        return None
    out = a.ofm
    lowered = seg.segment
    aliased = {t for t, r in lowered.aliases.items() if t != r} | {r for t, r in lowered.aliases.items() if t != r}
    if (out.buffer in lowered.constants or out.buffer in lowered.resident or out.buffer in aliased
            or out.buffer in target.in_arena or touched[out.buffer] != 2 or out.offset):
        return None
    reads = [name for name, v in ((IFM, b.ifm), (IFM2, b.ifm2)) if v is not None and v.buffer == out.buffer]
    if len(reads) != 1:
        return None
    v = b.ifm if reads[0] == IFM else b.ifm2
    if (v.offset, v.shape, v.strides, v.layout, v.dtype) != (0, out.shape, out.strides, out.layout, out.dtype):
        return None
    return reads[0]


def _fastest_chain(ops: list[ScheduledOperation], k: int, seg: SegmentSchedule, touched: Counter,
                   target: _Target) -> list[ScheduledOperation]:
    """The operations from `ops[k]` on chained, the fastest chain starting at `ops[k]` against
    the operations after it costed apart (up to the longest chain that may form), or [] where
    none is faster."""
    head = ops[k]
    first = _head_description(head, target) if _may_start(head) else None
    if first is None:
        return []
    block = tuple(head.block)
    joiners, operands, described = [], [], []
    memory_operands = _memory_operands(head.lowered)
    tables = [t for t in (ethos_u85.lut(head.lowered),) if t is not None]
    while len(joiners) + 1 < MAX_OPERATIONS and k + len(joiners) + 1 < len(ops):
        nxt = ops[k + len(joiners) + 1]
        operand = _chained_operand(joiners[-1] if joiners else head, nxt, seg, touched, target)
        if operand is None:
            break
        memory_operands += _memory_operands(nxt.lowered, operand)
        if memory_operands > MAX_MEMORY_OPERANDS:
            break
        table = ethos_u85.lut(nxt.lowered)
        if table is not None:
            if ethos_u85.table_offsets(tables + [table]) is None:
                break  # its table and the chain's do not fit in the LUT RAM together
            tables.append(table)
        tail = target.npu_op(nxt.lowered, ifm2_in_flash=nxt.constant_ifm2 == "flash")
        if _core.u85_try_block_config(tail, target.arch.accelerator, _core.BlockShape(*block)) is None:
            break  # it cannot run the first operation's block
        joiners.append(nxt)
        operands.append(operand)
        described.append(tail)
    best, best_cycles = 0, sum(s.cost.total_cycles for s in ops[k:k + len(joiners) + 1])
    costs = {}
    for n in range(1, len(joiners) + 1):
        chain = _core.u85_chained(first, described[:n], [o == IFM2 for o in operands[:n]], target.arch)
        costs[n] = cost_from_core(_core.estimate(chain, target.arch), chain)
        cycles = costs[n].total_cycles + sum(s.cost.total_cycles for s in joiners[n:])
        if cycles < best_cycles:
            best, best_cycles = n, cycles
    if not best:
        return []
    cost = costs[best]
    chain = [replace(head, chain=((OFM, 0),), cost=cost, unchained_cost=head.cost)]
    for i, (sop, operand) in enumerate(zip(joiners[:best], operands)):
        maps = ((operand, i),) + (((OFM, i + 1),) if i + 1 < best else ())
        chain.append(replace(sop, chain=maps, block=block, cost=_within(cost), unchained_cost=sop.cost))
    return chain


def chain_cycles(chain: list[ScheduledOperation], moved: list[tuple[str, ...]], target: _Target, memory) -> float:
    """A chain's cycles (`chain`: its first operation and its joiners, as `with_chains` made
    them) with each operation's operands named in `moved` read or written in `memory`; what the
    estimator finds for the binary, where a joiner's operands are the chain's to cost (the
    planner's evictions, `schedule.eviction_cycles`)."""
    head = unchained(chain[0])
    first = _head_description(head, target)
    described, ifm2 = [], []
    for sop in chain[1:]:
        described.append(target.npu_op(sop.lowered, ifm2_in_flash=sop.constant_ifm2 == "flash"))
        ifm2.append(IFM2 in dict(sop.chain))
    homes = []  # the first operation's description is the schedule's own: each field set back
    for op, names in zip([first, *described], moved):
        for name in names:
            fm = getattr(op, name)
            if fm is not None:
                homes.append((op, name, fm.memory))
                fm.memory = memory
                setattr(op, name, fm)
    try:
        return _core.estimate(_core.u85_chained(first, described, ifm2, target.arch), target.arch).total_cycles
    finally:
        for op, name, home in homes:
            fm = getattr(op, name)
            fm.memory = home
            setattr(op, name, fm)


def _within(chain: OpCost) -> OpCost:
    """A later operation's own cost in a chain: none (the chain is costed as its first
    operation, as the estimator costs it); the DMA slack it leaves the next operation is the
    chain's."""
    nothing = {m: 0.0 for m in MEMORIES}
    return replace(chain, total_cycles=0.0, npu_cycles=0, dma_cycles=0, access_cycles=dict(nothing),
                   read_bytes=dict(nothing), write_bytes=dict(nothing), macs=0, described=None, _evictions={})


# The schedule module asks for these through CHAINING (it may not import this module, which
# builds on it): re-chaining after operations change, and a chain's cycles with operands moved.
CHAINING.rechain, CHAINING.cycles = with_chains, chain_cycles
