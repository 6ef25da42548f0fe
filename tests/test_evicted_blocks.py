"""Operations on feature maps a budget moves to DRAM take the blocks that run fastest there
(`evicted_blocks`): the scheduler picks blocks with every map in SRAM, and on the Ethos-U85 a
block thin in depth reads its IFM once per OFM depth block, which costs little in SRAM and a
lot in DRAM.

Zoo DeepLab ASPP (64 x 64, 32 filters) on U85-256 within 65,536 B: 347,914 cycles with the
blocks chosen for SRAM, 302,601 reblocked; zoo U-Net 128 within 131,072 B: 2,020,527 ->
1,337,640 (coral DeepLabV3 at Vela's Size SRAM: 51.56M -> 39.54M, Vela 47.31M).
"""

from __future__ import annotations

import pytest

import cascader
from cascader import compiler, planner, zoo
from cascader.allocation import allocate
from cascader.evicted_blocks import evicted_maps, reblocked, reblocked_allocations
from cascader.lowering import lower
from cascader.memory import MemoryConfig, sram_bytes
from cascader.planner import plan
from cascader.schedule import _operations_in_order, _stream_bytes, _Target
from cascader.scheduling import schedule

ACCELERATOR = "ethos-u85-256"


def _aspp():
    return zoo.deeplab_aspp(resolution=64, filters=32)


def _moved_cycles(target: _Target, sop) -> float:
    """`sop`'s cycles with the maps of `target` (a target with the evicted maps in its arena) there."""
    lo = sop.lowered
    w, s = _stream_bytes(sop.encoded) if lo.weights is not None else (0, 0)
    return target.cost(lo, w, s, sop.block, sop.part_kernel_first if lo.kind == "conv" else None).total_cycles


def test_reblocked_operations_are_those_on_evicted_maps_and_run_faster_there():
    model = _aspp()
    acc = cascader.Accelerator(ACCELERATOR)
    part, segments = lower(model, acc.name)
    sched = schedule(part, segments, acc.name, acc.default_system, acc.default_memory_mode.value)
    allocated = allocate(sched, part, 65_536, solver="greedy")
    assert allocated[1].eviction_cycles > 0
    target = _Target.of(allocated[0])
    slow = evicted_maps(allocated, target)
    assert slow and not slow & target.in_arena
    changed = reblocked(allocated[0], slow)
    assert changed is not None
    moved = _Target(target.accelerator, target.system, target.memory_mode, target.segments, cpu_visible=slow)
    before = [sop for _, sop in _operations_in_order(allocated[0])]
    after = [sop for _, sop in _operations_in_order(changed)]
    assert len(before) == len(after)
    differ = [(a, b) for a, b in zip(before, after) if tuple(a.block) != tuple(b.block)]
    assert differ
    for old, new in differ:
        lo = new.lowered
        assert any(v is not None and v.buffer in slow for v in (lo.ifm, lo.ifm2, lo.ofm))
        assert _moved_cycles(moved, new) < _moved_cycles(moved, old)
    # Each round's layout fits the budget.
    config = MemoryConfig.for_target(acc.name, acc.default_system, acc.default_memory_mode.value)
    rounds = reblocked_allocations(allocated, part, 65_536)
    assert rounds and all(sram_bytes(a[1], config) <= 65_536 for a in rounds)


@pytest.mark.parametrize("make, budget", [(_aspp, 65_536), (zoo.unet_128, 131_072)])
def test_budgeted_compiles_reblock_and_stay_bit_exact(make, budget, monkeypatch):
    model = make()
    compiled = cascader.compile(model, sram=budget, accelerator=ACCELERATOR)
    assert compiled.sram_bytes <= budget
    result = compiled.check(seeds=2)
    assert result.bit_exact, result
    monkeypatch.setattr(compiler, "reblocked_allocations", lambda *args, **kwargs: [])
    unchanged = cascader.compile(model, sram=budget, accelerator=ACCELERATOR)
    assert compiled.estimate().total_cycles < 0.95 * unchanged.estimate().total_cycles


def test_planned_dram_points_reblock_as_the_compile_does(monkeypatch):
    """The planner's DRAM points are costed reblocked (`planner.evicting_points`), and each
    compiles within its SRAM at most at its cycles (the estimator's headline, within 1%)."""
    model = _aspp()
    frontier = plan(model, accelerator=ACCELERATOR)
    evicting = [p for p in frontier.points if p.evicting]
    assert evicting
    for point in evicting:
        compiled = cascader.compile(model, sram=point.sram_bytes, accelerator=ACCELERATOR)
        assert compiled.sram_bytes <= point.sram_bytes
        assert compiled.estimate().total_cycles <= 1.01 * point.cycles, point
    monkeypatch.setattr(planner, "reblocked_allocations", lambda *args, **kwargs: [])
    unchanged = plan(model, accelerator=ACCELERATOR)

    def fastest_within(points, sram):
        return min(p.cycles for p in points if p.sram_bytes <= sram)

    least = evicting[0].sram_bytes
    assert fastest_within(frontier.points, least) < fastest_within(unchanged.points, least)
