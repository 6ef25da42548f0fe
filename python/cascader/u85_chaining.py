"""Ethos-U85 chaining: an elementwise operation's OFM kept in the U85's chaining buffer for the
elementwise operation right after it, which reads it as its IFM or IFM2 (OFM storage CHAINED on
the first, IFM/IFM2 storage CHAINED on the second), instead of a scratch map in memory.

Vela 5.2 chains so (a comparison's CMP into its AND with 1, a SELECT's AND_NOT into its OR):
the pair runs one OFM block at a time through both operations, with the first one's block
config, and is costed as one operation (arch/ethos_u85/performance's `chain_into`, the
estimator's reading of such a pair). Here a pair is chained where:

- both operations are elementwise and run whole (no stripes of a cascade), neither with a table
  (a LUT's, or the TANH/SIGMOID one: its DMA would come between them) nor the second with a
  constant operand copied in by a DMA, neither writing its OFM transposed;
- the first one's OFM is a scratch map of the lowering's that only these two operations touch,
  read whole in the second's OFM shape, layout and type, and no CPU operator sees it;
- the second accepts the first's OFM block (`u85_try_block_config`: the chaining buffer's
  slots for a broadcast operand), and the cycle model finds the pair faster than the two apart.

The scratch map then takes no memory (the memory schedule gives it no bytes) and the emitter
writes the storage fields (`ScheduledOperation.chain`). A schedule is re-chained as a whole
(`with_chains`): a cascade that stripes one of a pair leaves the other unchained.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from . import _core
from .arch import Accelerator
from .emit import ethos_u85
from .arch import MEMORIES
from .perf import OpCost, cost_from_core
from .schedule import NpuSchedule, ScheduledOperation, SegmentSchedule, _Target

OFM, IFM, IFM2 = "ofm", "ifm", "ifm2"  # ScheduledOperation.chain: which map is in the chaining buffer


def with_chains(schedule: NpuSchedule, target: _Target | None = None) -> NpuSchedule:
    """`schedule` with every pair of operations the U85 runs faster chained (see the module),
    and every chain no longer valid (a stripe of it cascaded) undone; other targets' schedules
    are returned as they are."""
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
        while k + 1 < len(ops):
            pair = _chained_pair(ops[k], ops[k + 1], seg, touched, target)
            if pair is not None:
                ops[k], ops[k + 1] = pair
                k += 1
            k += 1
        changed |= any(a is not b for a, b in zip(ops, seg.operations))
        segments.append(SegmentSchedule(seg.segment, ops))
    return replace(schedule, segments=segments) if changed else schedule


def unchained(sop: ScheduledOperation) -> ScheduledOperation:
    """`sop` as it was costed before it was chained."""
    return replace(sop, chain="", cost=sop.unchained_cost, unchained_cost=None) if sop.chain else sop


def chained_buffers(schedule: NpuSchedule) -> set[int]:
    """The scratch maps a schedule keeps in the chaining buffer (no memory of their own)."""
    return {sop.lowered.ofm.buffer for sop in schedule.operations if sop.chain == OFM}


def _chained_operand(first: ScheduledOperation, second: ScheduledOperation, seg: SegmentSchedule,
                     touched: Counter, target: _Target) -> str | None:
    """The operand of `second` ("ifm", "ifm2") that may read `first`'s OFM from the chaining
    buffer, or None."""
    a, b = first.lowered, second.lowered
    if any(o.kind != "elementwise" or ethos_u85.lut(o) is not None for o in (a, b)):
        return None
    if any(s.cascade is not None or s.stripe_of is not None for s in (first, second)):
        return None
    # Vela 5.2 chains no operation that writes its OFM transposed or reversed (nor do we).
    if second.constant_ifm2 == "copy" or any(o.registers.get("ofm_transpose") for o in (a, b)):
        return None
    if a.ofm.shape != b.ofm.shape:
        return None
    out = a.ofm
    lowered = seg.segment
    aliased = {t for t, r in lowered.aliases.items() if t != r} | {r for t, r in lowered.aliases.items() if t != r}
    if (out.buffer not in lowered.scratch or out.buffer in aliased or out.buffer in target.in_arena
            or touched[out.buffer] != 2 or out.offset):
        return None
    reads = [name for name, v in ((IFM, b.ifm), (IFM2, b.ifm2)) if v is not None and v.buffer == out.buffer]
    if len(reads) != 1:
        return None
    v = b.ifm if reads[0] == IFM else b.ifm2
    if (v.offset, v.shape, v.strides, v.layout, v.dtype) != (0, out.shape, out.strides, out.layout, out.dtype):
        return None
    return reads[0]


def _chained_pair(first: ScheduledOperation, second: ScheduledOperation, seg: SegmentSchedule, touched: Counter,
                  target: _Target) -> tuple[ScheduledOperation, ScheduledOperation] | None:
    """`first` and `second` chained, or None where they may not be or run no faster so."""
    operand = _chained_operand(first, second, seg, touched, target)
    if operand is None:
        return None
    block = tuple(first.block)
    head = target.npu_op(first.lowered, block=block, ifm2_in_flash=first.constant_ifm2 == "flash")
    tail = target.npu_op(second.lowered, ifm2_in_flash=second.constant_ifm2 == "flash")
    if _core.u85_try_block_config(tail, target.arch.accelerator, _core.BlockShape(*block)) is None:
        return None  # the second operation cannot run the first one's block
    pair = _core.u85_chained(head, tail, operand == IFM2, target.arch)
    cost = cost_from_core(_core.estimate(pair, target.arch), pair)
    if cost.total_cycles >= first.cost.total_cycles + second.cost.total_cycles:
        return None
    return (replace(first, chain=OFM, cost=cost, unchained_cost=first.cost),
            replace(second, chain=operand, block=block, cost=_within(cost), unchained_cost=second.cost))


def _within(pair: OpCost) -> OpCost:
    """The second operation's own cost in a chain: none (the pair is costed as its first
    operation, as the estimator costs it); the DMA slack it leaves the next operation is the pair's."""
    nothing = {m: 0.0 for m in MEMORIES}
    return replace(pair, total_cycles=0.0, npu_cycles=0, dma_cycles=0, access_cycles=dict(nothing),
                   read_bytes=dict(nothing), write_bytes=dict(nothing), macs=0, described=None, _evictions={})
