"""The planner's frontier on Dedicated_Sram offers feature maps in DRAM (`planner.evicting_points`).

On the U65's default memory system the SRAM is the NPU's fast scratch beside DRAM: the
frontier goes down to no SRAM at all, each such point a fast proposal (the fastest, or a faster
cascade than the one that fits) with feature maps moved to DRAM as the compile moves them, its
cycles the allocated schedule's plus what the cycle model says the slower traffic costs. Every point compiles within its SRAM to a bit-exact binary whose cycles (the
estimator's, every stripe as it runs) are the point's; Shared_Sram plans offer none.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import cascader
from cascader import zoo
from cascader.planner import plan

# A point's cycles are the planner's (every stripe costed as it runs, each operation again with
# exactly its evicted operands in DRAM), and its own proposal laid out within its SRAM runs them
# within PREDICTION_TOLERANCE on the estimator, stripes as run (openmv_yolov8n_192 on U65-256:
# to the cycle; zoo ResNet-8 on U85-256 within 0.6%). The compile ranks the binaries that fit by the
# estimator's headline figure (Vela's accounting, which costs a cascaded operation once over its
# whole OFM) and may keep another proposal where that figure is lower (zoo ResNet-8 on U65-256
# with no SRAM: a cascade at 112,000 headline cycles, 123,415 as it runs, beside the point's
# 112,305): its headline figure is at most the point's.
PREDICTION_TOLERANCE = 0.01
HEADLINE_TOLERANCE = 0.01


def _own_binary_cycles(model, accelerator: str, frontier, point) -> float:
    """The estimator's cycles (stripes as run) of `point`'s own proposal allocated within its
    SRAM as the compile allocates a proposal that fits only with feature maps in DRAM
    (`compiler._evicting_cascades`): with the weight buffers of its operations run alone, by
    the greedy planner, and reblocked for the maps in DRAM where the planner found that faster.
    A point of the schedule with padded maps bricked for DRAM
    (`PlanPoint.evicted_bricks`) is that schedule's proposal, of its own graph."""
    from cascader.allocation import allocate, eviction_cost
    from cascader.evicted_blocks import reblocked_allocations
    from cascader.memory import MemoryConfig, sram_bytes
    from cascader.emit.binary import emit
    from cascader.lowering import lower
    from cascader.packaging import package_binary
    from cascader.schedule import _Target, without_weight_buffers
    from cascader.scheduling import evicted_bricks, schedule
    from cascader.stripes import proposal_schedules

    acc = cascader.Accelerator(accelerator)
    part, segments = lower(model, acc.name)
    buffered = schedule(part, segments, acc.name, acc.default_system, acc.default_memory_mode.value)
    graph = frontier.graph
    if point.evicted_bricks:
        buffered, graph = evicted_bricks(part, buffered), point.graph
    lean = without_weight_buffers(buffered)
    proposed = proposal_schedules(lean, graph, point.proposal, _Target.of(lean), buffered)[1]
    allocated = allocate(proposed, part, point.sram_bytes, solver="greedy")
    # Reblocked for the maps moved to DRAM where that is planned faster, as the planner and the
    # compile do (`evicted_blocks.reblocked_allocations`).
    options = [allocated] + [a for a in reblocked_allocations(allocated, part, point.sram_bytes)
                             if sram_bytes(a[1], MemoryConfig.for_target(acc.name, acc.default_system,
                                                                         acc.default_memory_mode.value))
                             <= point.sram_bytes]
    allocated = min(options, key=lambda a: a[0].total_cycles + eviction_cost(a, part.graph))
    binary = package_binary(model, allocated, emit(allocated, acc.name), acc.name)[0]
    return cascader.estimate(binary, accelerator=acc.name, stripes="as_run").total_cycles


def _check_points(model, accelerator: str, frontier, points) -> None:
    for point in points:
        assert not point.least_scratch  # its proposal would be of the other lowering's graph
        own = _own_binary_cycles(cascader.load_model(model) if isinstance(model, Path) else model, accelerator,
                                 frontier, point)
        assert abs(own / point.cycles - 1) <= PREDICTION_TOLERANCE, (point, own)
        compiled = cascader.compile(model, sram=point.sram_bytes, accelerator=accelerator)
        assert compiled.sram_bytes <= point.sram_bytes, point
        headline = compiled.estimate().total_cycles
        assert headline <= point.cycles * (1 + HEADLINE_TOLERANCE), (point, headline)
        result = compiled.check(seeds=1)
        assert result.bit_exact, f"{point}: {result}"


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet8"])
def test_the_dedicated_sram_frontier_goes_down_to_no_sram(name):
    model = zoo.get(name)
    frontier = plan(model, accelerator="ethos-u65-256")
    least = frontier.points[0]
    assert least.sram_bytes == 0 and least.evicting
    assert frontier.floor_bytes == 0  # every feature map may live in DRAM: a true lower bound
    resident = frontier.resident
    assert resident is not None and not resident.evicting and resident.sram_bytes > 0
    evicting = [p for p in frontier.points if p.evicting]
    assert len(evicting) >= 3
    # DRAM costs cycles: with fewer bytes in SRAM a point is slower.
    assert all(a.cycles > b.cycles for a, b in zip(frontier.points, frontier.points[1:]))
    # None of them is faster than the fastest proposal with everything in SRAM.
    assert min(p.cycles for p in evicting) >= frontier.points[-1].cycles


def test_cascaded_proposals_offer_dram_points_too():
    """Not only the fastest proposal: a faster cascade than the one that fits, with a few maps
    in DRAM, can be the fastest at its SRAM (zoo MobileNetV2 on U65-256: evicting points of 4
    proposals on the frontier), as the compile tries them (`compiler._evicting_cascades`)."""
    frontier = plan(zoo.mobilenet_v2(), accelerator="ethos-u65-256")
    evicting = [p for p in frontier.points if p.evicting]
    assert len({id(p.proposal) for p in evicting}) >= 2
    fastest = min(frontier.points, key=lambda p: p.cycles)
    assert any(p.proposal is not fastest.proposal for p in evicting)


def test_shared_sram_plans_offer_no_dram():
    frontier = plan(zoo.mobilenet_v2(), accelerator="ethos-u55-128")
    assert not any(p.evicting for p in frontier.points)
    assert frontier.floor_bytes > 0 and frontier.points[0].sram_bytes >= frontier.floor_bytes


@pytest.mark.parametrize("name, accelerator", [("mobilenet_v2", "ethos-u65-256"), ("resnet8", "ethos-u65-256"),
                                               ("resnet8", "ethos-u85-256")])
def test_every_dram_point_compiles_bit_exact_within_its_sram_at_its_cycles(name, accelerator):
    model = zoo.get(name)
    frontier = plan(model, accelerator=accelerator)
    _check_points(model, accelerator, frontier, [p for p in frontier.points if p.evicting])


def test_the_compiled_frontier_reaches_no_sram():
    """`cascader.plan` compiles at the DRAM points' sizes too: its least binary uses no SRAM."""
    compiled = cascader.plan(zoo.resnet8(), accelerator="ethos-u65-256")
    assert compiled.points[0].sram_bytes == 0
    assert compiled.points[0].cycles > compiled.points[-1].cycles


def _shared(name: str) -> Path | None:
    folder = os.environ.get("CASCADER_MODELS")
    path = Path(folder) / f"{name}.tflite" if folder else None
    return path if path is not None and path.exists() else None


@pytest.mark.parametrize("name", ["openmv_yolov8n_192"])
def test_shared_models_dram_points(name):
    """openmv_yolov8n_192 on U65-256: least SRAM 303,156 B with every feature map in SRAM
    (Vela's Size 303,248 B); with DRAM, down to 0 B at 5.66M cycles (4.37M unlimited)."""
    path = _shared(name)
    if path is None:
        pytest.skip("CASCADER_MODELS is not set")
    frontier = plan(path, accelerator="ethos-u65-256")
    assert frontier.points[0].sram_bytes == 0
    evicting = [p for p in frontier.points if p.evicting]
    _check_points(path, "ethos-u65-256", frontier, [evicting[0], evicting[len(evicting) // 2]])


@pytest.mark.parametrize("name, cascaded", [("coral_tf2_mobilenet_v2_1.0_224_ptq", False),
                                            ("coral_mobilenet_v1_0.75_192_quant", False)])
def test_shared_models_dram_points_of_cascades(name, cascaded):
    """Every DRAM point of the coral MobileNets on U65-256, cascades' and bricked schedules'
    too, compiles within its SRAM, bit-exact, at its cycles (tf2 MobileNetV2-224: its DRAM
    points are uncascaded proposals', some with padded maps as bricks, since the blocks the
    cycle model picks made them faster than its cascades' with maps in DRAM; MobileNetV1-0.75
    192: 7 from its 2 fastest proposals, both uncascaded, 6 with padded maps as bricks)."""
    path = _shared(name)
    if path is None:
        pytest.skip("CASCADER_MODELS is not set")
    frontier = plan(path, accelerator="ethos-u65-256")
    evicting = [p for p in frontier.points if p.evicting]
    assert any(p.cascades for p in evicting) == cascaded
    assert any(p.evicted_bricks for p in evicting)
    _check_points(path, "ethos-u65-256", frontier, evicting)


def test_dram_points_with_their_weight_buffers_dominate_vela_size():
    """coral tf2 MobileNetV2-224 on U65-256: Vela's Size binary takes 389,184 B at 3,270,918
    cycles (the estimator, stripes as run). The fastest proposal with feature maps in DRAM,
    costed with the weight buffers the compile's allocation keeps, is 376,320 B at 3,206,781
    (costed without them, as before, 3,285,004: not dominated)."""
    path = _shared("coral_tf2_mobilenet_v2_1.0_224_ptq")
    if path is None:
        pytest.skip("CASCADER_MODELS is not set")
    frontier = plan(path, accelerator="ethos-u65-256")
    dominating = [p for p in frontier.points if p.sram_bytes <= 389_184 and p.cycles <= 3_270_918]
    assert dominating and all(p.evicting for p in dominating)
    point = max(dominating, key=lambda p: p.sram_bytes)
    compiled = cascader.compile(path, sram=point.sram_bytes, accelerator="ethos-u65-256")
    assert compiled.sram_bytes <= point.sram_bytes
    assert compiled.estimate().total_cycles <= point.cycles, point
