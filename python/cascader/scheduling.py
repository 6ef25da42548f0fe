"""The schedule stage: the lowered segments -> an uncascaded `NpuSchedule` (one whole-tensor
stripe per operation, in partition order, with block configs, encoded weights and weight
buffers chosen by the cycle model), and the same schedule with padded maps stored as bricks
where the target runs them faster (`brick_layout`)."""

from __future__ import annotations

from .brick_layout import MIN_TOTAL_SAVING, brick_padded_maps
from .frontend.lowered import LoweredSegment
from .frontend.partition import NPU, Partition
from .schedule import NpuSchedule, _Target, schedule_uncascaded
from .u85_chaining import with_chains


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
    return with_chains(schedule_uncascaded(segments, order, accelerator, system, memory_mode))


def bricked_schedule(part: Partition, segments: list[LoweredSegment], sched: NpuSchedule) -> NpuSchedule | None:
    """`sched` with the padded maps that run faster as bricks on its target stored so
    (`brick_layout`), or None when that saves too little of the whole schedule's cycles."""
    bricked = brick_padded_maps(segments, _Target.of(sched))
    if all(a is b for a, b in zip(bricked, segments)):
        return None
    faster = schedule(part, bricked, sched.accelerator, sched.system, sched.memory_mode)
    return faster if faster.total_cycles < (1 - MIN_TOTAL_SAVING) * sched.total_cycles else None


def evicted_bricks(part: Partition, sched: NpuSchedule) -> NpuSchedule | None:
    """Dedicated_Sram: `sched` with the padded maps that run faster as bricks in the slow memory
    a budget evicts maps to (the arena's, DRAM) stored so, or None (another memory mode, or no
    such map). In the SRAM most run as fast either way, so `bricked_schedule` keeps them
    dense, but a 24-channel NHWC map written to DRAM in 16-byte bursts costs several times its
    bricks (PoseNet's MobileNetV1-0.75 at 353 x 481 on U65-256: the first depthwise's stripes
    684,875 cycles against 389,820 as Vela's bricks)."""
    target = _Target.of(sched)
    if target.arena_memory == target.buffer_memory:
        return None
    segments = [s.segment for s in sched.segments]
    bricked = brick_padded_maps(segments, target, memory=target.arena_memory)
    if all(a is b for a, b in zip(bricked, segments)):
        return None
    return schedule(part, bricked, sched.accelerator, sched.system, sched.memory_mode)


def schedules(part: Partition, segments: list[LoweredSegment], accelerator: str, system, memory_mode,
              bricks: bool) -> tuple[NpuSchedule, NpuSchedule | None]:
    """The stage as the compile runs it: the uncascaded schedule and, with `bricks`, its
    bricked variant (`bricked_schedule`; None where it does not pay)."""
    sched = schedule(part, segments, accelerator, system, memory_mode)
    return sched, bricked_schedule(part, segments, sched) if bricks else None
