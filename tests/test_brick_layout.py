"""Padded feature maps stored as 16-channel bricks where the target runs faster so."""

from __future__ import annotations

import pytest

import cascader
from cascader import brick_layout, compiler, zoo
from cascader.arch import DEFAULT_MODE, DEFAULT_SYSTEM
from cascader.bench.simulate import validate
from cascader.lowering import lower
from cascader.schedule import _Target
from cascader.scheduling import bricked_schedule, evicted_bricks, schedule
from cascader.sim.binary import npu_calls


def _target(segments, accelerator: str) -> _Target:
    u65 = accelerator.startswith("ethos-u65")
    return _Target(accelerator, DEFAULT_SYSTEM[u65], DEFAULT_MODE[u65].value, segments)


def _first_layouts(compiled: cascader.CompiledModel, count: int = 2) -> list[str]:
    ops = [o for o in npu_calls(compiled.model)[0].decode().operations if o["kind"] != "dma"]
    return [o["ofm"]["layout"] for o in ops[:count]]


def _first_map_bytes(compiled: cascader.CompiledModel) -> int:
    """Bytes the first operation's OFM spans (rows x row stride): a brick holds 16 channels."""
    ops = [o for o in npu_calls(compiled.model)[0].decode().operations if o["kind"] != "dma"]
    return ops[0]["ofm"]["shape"][0] * ops[0]["ofm"]["strides"][0]


def test_bricks_only_where_the_target_runs_faster(tmp_path, monkeypatch):
    """MobileNetV1-0.75's 24-channel maps: on the U65-512 the first depthwise reads its NHWC
    input in strided bursts and bricks save cycles; on the U55-128 they do not, and the maps
    stay NHWC (a third less SRAM each). The bricked binary is bit-exact."""
    model = zoo.mobilenet_v1(alpha=0.75, resolution=64)
    path = tmp_path / "mobilenet.tflite"
    cascader.save_model(model, path)
    fast = cascader.compile(path, accelerator="ethos-u65-512")
    assert _first_layouts(fast) == ["NHCWB16", "NHCWB16"]
    assert validate(path, fast.model, (0,)).bit_exact
    assert _first_layouts(cascader.compile(path, accelerator="ethos-u55-128")) == ["NHWC", "NHWC"]

    monkeypatch.setattr(brick_layout, "MIN_SAVING", float("inf"))  # never bricks
    dense = cascader.compile(path, accelerator="ethos-u65-512")
    assert _first_layouts(dense) == ["NHWC", "NHWC"]
    assert fast.estimate().total_cycles < dense.estimate().total_cycles
    # What the bricks cost: a third more bytes per 24-channel map. (Not the binary's SRAM: an
    # unlimited U65 compile fills its peak with weight buffers either way.)
    assert _first_map_bytes(fast) == _first_map_bytes(dense) * 32 // 24


def test_segments_given_are_left_alone():
    _, segments = lower(zoo.mobilenet_v1(alpha=0.75, resolution=64))
    layouts = [[op.ofm.layout for op in s.operations] for s in segments]
    sizes = [dict(s.buffers) for s in segments]
    bricked = brick_layout.brick_padded_maps(segments, _target(segments, "ethos-u65-512"))
    assert any(a is not b for a, b in zip(bricked, segments))
    assert [[op.ofm.layout for op in s.operations] for s in segments] == layouts
    assert [dict(s.buffers) for s in segments] == sizes
    changed = {b for s, t in zip(segments, bricked) for b in s.buffers if t.buffers[b] != s.buffers[b]}
    assert changed and all(
        t.buffers[b] == s.shapes[b][0] * s.shapes[b][1] * 32 for s, t in zip(segments, bricked) for b in changed)
    # Where nothing pays, the very segments come back.
    same = brick_layout.brick_padded_maps(segments, _target(segments, "ethos-u55-128"))
    assert all(a is b for a, b in zip(same, segments))


def test_a_budget_the_bricks_overflow_keeps_the_maps_dense(monkeypatch):
    """Bricks are a speed choice. With Shared_Sram, a budget the dense maps fit uncascaded and
    the bricks do not gets the dense schedule, not a cascade. With Dedicated_Sram the bricked
    schedule may still fit by moving maps to DRAM, or cascaded: the estimate ranks those with
    the dense one, and the binary kept is within the budget and no slower."""
    model = zoo.mobilenet_v1(alpha=0.75, resolution=64)
    for accelerator, mode in (("ethos-u55-256", "Shared_Sram"), ("ethos-u65-512", "Dedicated_Sram")):
        target = dict(accelerator=accelerator, memory_mode=mode)
        bricked = cascader.compile(model, **target)
        with monkeypatch.context() as m:
            m.setattr(brick_layout, "MIN_SAVING", float("inf"))
            dense = cascader.compile(model, **target)
        # With Shared_Sram the bricks raise the peak; with Dedicated_Sram weight buffers set it
        # (an unlimited U65 compile keeps them at the budgeted rate), bricks or not.
        assert dense.sram_bytes < bricked.sram_bytes if mode == "Shared_Sram" else dense.sram_bytes <= bricked.sram_bytes
        c = cascader.compile(model, sram=dense.sram_bytes, **target)
        assert c.sram_bytes <= dense.sram_bytes
        if mode == "Shared_Sram":
            assert _first_layouts(c) == ["NHWC", "NHWC"] and all(op.cascade is None for op in c.schedule.operations)
            assert c.estimate().total_cycles == dense.estimate().total_cycles
        else:
            assert c.estimate().total_cycles <= dense.estimate().total_cycles


def test_size_mode_keeps_padded_maps_dense():
    """Size mode wants the least SRAM: the bricks' padding is not bought there."""
    c = cascader.compile(zoo.mobilenet_v1(alpha=0.75, resolution=64), accelerator="ethos-u65-512", optimise="Size")
    assert _first_layouts(c) == ["NHWC", "NHWC"]


@pytest.mark.parametrize("accelerator,mode", [("ethos-u55-256", "Shared_Sram"), ("ethos-u65-512", "Dedicated_Sram")])
def test_cascades_with_bricks_are_ranked_not_assumed(monkeypatch, accelerator, mode):
    """Under a budget the dense maps need a cascade for, the bricked schedule's cascade is
    ranked with the dense one's on the estimate: the binary kept is within the budget and no
    slower than the dense compile's."""
    model = zoo.mobilenet_v1(alpha=0.75, resolution=64)
    target = dict(accelerator=accelerator, memory_mode=mode)
    with monkeypatch.context() as m:
        m.setattr(brick_layout, "MIN_SAVING", float("inf"))
        budget = cascader.compile(model, **target).sram_bytes // 2
        dense = cascader.compile(model, sram=budget, **target)
    c = cascader.compile(model, sram=budget, **target)
    assert c.sram_bytes <= budget
    assert c.estimate().total_cycles <= dense.estimate().total_cycles


def test_maps_a_budget_evicts_are_bricked_where_that_pays(monkeypatch):
    """On the U65-256 MobileNetV1-0.75's 24-channel maps run as fast NHWC as bricks in the
    SRAM, so the schedule keeps them dense; written to DRAM in 16-byte bursts they cost more.
    Under a budget that evicts maps, the compile also ranks the schedule with those maps as
    bricks (`scheduling.evicted_bricks`): within the budget, bit-exact, and faster than the
    dense one (645,889 against 672,831 cycles within 48 KiB). With Shared_Sram nothing is
    evicted and there is no such schedule."""
    model = zoo.mobilenet_v1(alpha=0.75, resolution=(96, 128))
    part, segments = lower(model, "ethos-u65-256")
    sched = schedule(part, segments, "ethos-u65-256")
    assert bricked_schedule(part, segments, sched) is None
    bricked = evicted_bricks(part, sched)
    assert bricked is not None and [op.lowered.ofm.layout for op in bricked.operations[:2]] == ["NHCWB16", "NHCWB16"]
    part55, segments55 = lower(model, "ethos-u55-128")
    assert evicted_bricks(part55, schedule(part55, segments55, "ethos-u55-128")) is None

    budget = 48 * 1024
    fast = cascader.compile(model, sram=budget, accelerator="ethos-u65-256")
    assert fast.sram_bytes <= budget and fast.check(seeds=1).bit_exact
    monkeypatch.setattr(compiler._Prepared, "evicted_bricks", lambda self: None)
    dense = cascader.compile(model, sram=budget, accelerator="ethos-u65-256")
    assert fast.estimate().total_cycles < 0.98 * dense.estimate().total_cycles
