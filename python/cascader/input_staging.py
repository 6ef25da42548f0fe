"""Input staging: a feature map the CPU hands in, copied into the fast memory before the
operation that reads it.

Outside Shared_Sram (the U65's Dedicated_Sram) the tensors the CPU hands in live in the arena,
which is DRAM, and the NPU fetches an NHWC map in bursts no longer than a pixel's channels when
its IFM block is deeper than them: a 3-channel image reads as 8-byte bursts of DRAM's 128. One
DMA of the whole buffer moves it in full bursts, and the operation then reads the copy in SRAM
(zoo MobileNetV1 on U65-256: its first convolution reads its 96 x 96 x 3 input at 41,676 DRAM
access cycles; the 27,648 B copy takes 2,804 and the convolution 8,743 from SRAM). Vela reads
the input in place.

An operation run whole (not a cascade's stripe) is staged where the cycle model says the copy
plus the operation from the fast memory is faster than the operation alone. The copy is a buffer
of the fast arena live over that operation only. Like a weight buffer it is an extra the
allocator keeps where the budget holds it: the lean schedule the planner, the floors and the
cascades work on reads the input in place (`schedule.without_weight_buffers`), and where the
memory planner cannot keep the copy in the fast memory (`allocation.allocate`) the operation
reads its input in place again (`unstaged`). The planner offers the staged operation, as it
offers a weight buffer, as the buffering of the part run alone (`planner.build_graph`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from . import _core
from .perf import OpCost, cost_from_core


def stageable_bytes(op: Any, target: Any) -> int:
    """The bytes of the buffer `op` (a lowered operation run whole) would copy to read its IFM
    from the fast memory, or 0 where it cannot: its IFM is no map the CPU hands in, the arena is
    the fast memory already (Shared_Sram), the target is an Ethos-U85 (its own chaining and
    estimator rules, not costed here), or the operation is no convolution. A pool reading a
    model input is a copy or a transpose step, whose cost the estimator takes from Vela's
    transposes rather than from the cycle model that weighs the staging: staged, a U65-256
    transpose of a 16x4x24 input took 628 + 288 cycles where Vela's step takes 670."""
    v = op.ifm
    if (op.kind not in ("conv", "depthwise") or v is None or target.arena_memory == target.buffer_memory or target.is_u85
            or v.buffer not in target.cpu_visible or v.buffer in target.constant_buffers or v.wrap_rows):
        return 0
    return target.buffer_bytes.get(v.buffer, 0)


def _recosted(cost: OpCost | None, memory: Any, arch: Any) -> OpCost | None:
    """`cost` again with its operation's IFM in `memory` (block, weights and DMAs as they were)."""
    if cost is None or cost.described is None:
        return cost
    described = _core.NpuOp(cost.described)
    described.ifm.memory = memory
    return cost_from_core(_core.estimate(described, arch), described)


def staged(sop: Any, target: Any) -> Any:
    """`sop` with its IFM staged in the fast memory when that is faster by the cycle model
    (the copy's DMA counted in full: it runs before the operation, alone), else `sop`."""
    if sop.cascade is not None or sop.staged_cycles:
        return sop
    nbytes = stageable_bytes(sop.lowered, target)
    if not nbytes or sop.cost.described is None:  # no description to cost it again with
        return sop
    fast = target.arch.region_memory(_core.Region.FastCache)
    cost, direct = _recosted(sop.cost, fast, target.arch), _recosted(sop.direct_cost, fast, target.arch)
    # A weight-buffered operation may read its weights in place once staged (the caller's choice).
    fastest = min(cost.total_cycles, direct.total_cycles if direct is not None else cost.total_cycles)
    copy = target.copy_cost(nbytes, target.arena_memory)
    if fastest + copy >= sop.cost.total_cycles:
        return sop
    return replace(sop, cost=cost, direct_cost=direct, staged_cycles=copy)


def unstaged(sop: Any, arch: Any) -> Any:
    """`sop` reading its IFM in place again (the arena's memory), without the copy."""
    if not sop.staged_cycles:
        return sop
    slow = arch.region_memory(_core.Region.Arena)
    return replace(sop, cost=_recosted(sop.cost, slow, arch), direct_cost=_recosted(sop.direct_cost, slow, arch),
                   staged_cycles=0.0)


def staged_key(position: int, buffer: int) -> tuple:
    """The memory planner's key of the fast-memory copy of the IFM buffer the operation at
    `position` stages."""
    return ("staged", position, buffer)
