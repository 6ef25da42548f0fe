"""What `cascader.plan` shares between the compiles of its points (`compiler._Prepared`, the
per-call memo of compiles by budget, the planned frontier reused as the compiles' own) gives
the answers that unshared work gives: the same binaries, frontiers and errors, per budget,
accelerator and model."""

from __future__ import annotations

import pytest

import cascader
from cascader import compiler, zoo
from cascader.planner import plan_schedule, plan_scheduled, unscored
from cascader.schedule import _Target, without_weight_buffers
from cascader.stripes import proposal_schedules

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")


def _prepared(model, accelerator: str) -> compiler._Prepared:
    bar = compiler.stage_bar(total=2, enabled=False)
    return compiler._prepare(model, accelerator, None, None, "performance", bar)


def _described(frontier) -> list[tuple]:
    return [(p.sram_bytes, p.cycles, p.estimated_bytes, repr(p.proposal)) for p in frontier.points]


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("name", ["resnet8", "mobilenet_v1"])
def test_every_compiled_point_is_the_binary_a_fresh_compile_makes(name, accelerator):
    """Each point's binary, byte for byte, is what `cascader.compile` makes at the budget it was
    compiled within, with nothing shared (two models, two accelerators: no cache answers for
    another)."""
    model = getattr(zoo, name)()
    frontier = cascader.plan(model, accelerator=accelerator)
    assert len(frontier.points) >= 2
    for p in frontier.points:
        fresh = cascader.compile(model, sram=p.budget, accelerator=accelerator)
        assert fresh.binary == p.binary.binary
        assert (fresh.sram_bytes, float(fresh.estimate().total_cycles)) == (p.sram_bytes, p.cycles)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_the_planned_frontier_unscored_is_the_compiles_own(accelerator):
    """`unscored` of the planned frontier is the frontier `plan_schedule(score=False)` plans
    again from the same schedule: the same proposals, bounds and cycles, in the same order."""
    prepared = _prepared(zoo.resnet8(), accelerator)
    sched = prepared.sched
    planned = plan_scheduled(prepared.part, sched)
    again = plan_schedule(without_weight_buffers(sched), prepared.part.graph, _Target.of(sched), score=False,
                          buffered=sched)
    shared = unscored(planned)
    assert not shared.scored and shared.graph is planned.graph
    assert _described(shared) == _described(again)
    assert [repr(p.proposal) for p in shared.candidates] == [repr(p.proposal) for p in again.candidates]


def test_the_memo_answers_per_budget_and_keeps_errors():
    """A budget compiled once is answered from the memo (the same point object), another budget
    is compiled anew, and a budget no binary fits raises its error again each time."""
    prepared = _prepared(zoo.resnet8(), "ethos-u55-128")
    bar = compiler.stage_bar(total=2, enabled=False)
    memo: dict = {}
    unlimited = compiler._compiled_point(prepared, None, bar, memo)
    assert compiler._compiled_point(prepared, None, bar, memo) is unlimited
    budget = unlimited.sram_bytes // 2
    within = compiler._compiled_point(prepared, budget, bar, memo)
    assert within is not unlimited and within.sram_bytes <= budget
    assert within.binary.binary == cascader.compile(zoo.resnet8(), sram=budget).binary
    for _ in range(2):
        with pytest.raises(cascader.InfeasibleError) as info:
            compiler._compiled_point(prepared, 1000, bar, memo)
        assert info.value.minimum_sram > 1000
    assert set(memo) == {None, budget, 1000}


def test_proposal_stripes_are_per_schedule_and_proposal():
    """`_Prepared.proposal_schedules` gives what `stripes.proposal_schedules` makes, once per
    (schedule, proposal), and the lean schedule is one object per schedule."""
    prepared = _prepared(zoo.mobilenet_v2(), "ethos-u55-128")
    sched = prepared.sched
    assert prepared.lean(sched) is prepared.lean(sched)
    frontier = prepared.frontier(sched)
    cascaded = [p for p in frontier.points if p.cascades][:2]
    assert len(cascaded) == 2
    made = [prepared.proposal_schedules(sched, p) for p in cascaded]
    assert made[0] is not made[1]
    for point, (striped, buffered) in zip(cascaded, made):
        assert prepared.proposal_schedules(sched, point) == (striped, buffered)
        fresh = proposal_schedules(without_weight_buffers(sched), frontier.graph, point.proposal, _Target.of(sched),
                                   sched)
        for shared, unshared in zip((striped, buffered), fresh):
            assert len(shared.operations) == len(unshared.operations)
            assert shared.total_cycles == unshared.total_cycles
            assert [op.lowered for op in shared.operations] == [op.lowered for op in unshared.operations]


def test_plan_records_its_stages():
    """`Frontier.stages` names each stage of the call once, in order (their times are for the
    benchmark, not checked here)."""
    frontier = cascader.plan(zoo.resnet8(), compiled=False)
    assert list(frontier.stages) == ["read", "lower", "schedule", "planner graph", "proposals (C++)",
                                     "budgeted points", "proposals laid out (C++)", "leanest laid out",
                                     "evicting points", "floor, frontier"]
    assert all(wall >= 0 and cpu >= 0 for wall, cpu in frontier.stages.values())
