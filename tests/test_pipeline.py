"""The shape of the compile pipeline (#41): no import circle, stages visited once in order, and
a frontier whose every point is what `compile` produces at its SRAM."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import cascader
from cascader import zoo
from cascader.bench.route import in_order, returns_up, route

PACKAGE = Path(cascader.__file__).parent


def _imports() -> dict[str, set[str]]:
    """Module -> the cascader modules it imports anywhere: at the top, inside functions and
    under TYPE_CHECKING (a reader sees all of them)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(("cascader", *path.relative_to(PACKAGE).with_suffix("").parts))
        modules[name.removesuffix(".__init__")] = path
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            edges[name].update(t for t in targets if t in modules and t != name)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    assert _cycles(_imports()) == []


def test_the_checker_sees_circles_inside_functions():
    assert _cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b"]]
    edges = _imports()
    # The result of a compile does not import the policy that made it.
    assert "cascader.compiler" not in edges["cascader.compiled"]
    # planner.plan reads the lower and schedule stages, not the policy above them.
    assert "cascader.compiler" not in edges["cascader.planner"]
    assert {"cascader.lowering", "cascader.scheduling"} <= edges["cascader.planner"]


def test_an_unlimited_compile_visits_each_stage_once_in_order():
    model = zoo.mobilenet_v2()
    stays = route(lambda: cascader.compile(model))
    assert stays == ["policy", "lower", "policy", "schedule", "policy", "allocate", "policy", "emit", "policy",
                     "package", "policy"]
    assert in_order(stays) and returns_up(stays) == 5


def test_route_counts():
    assert returns_up(["policy", "lower", "policy", "plan", "schedule", "plan", "policy"]) == 3
    assert not in_order(["policy", "plan", "policy", "schedule", "policy"])
    assert not in_order(["policy", "allocate", "policy", "allocate", "policy"])


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet8", "mobilenet_v1"])
def test_every_frontier_point_is_what_compile_gives_at_its_sram(name):
    """cascader.plan compiles its points: compiling at a point's SRAM gives that point's SRAM
    and cycles (the estimator's, the headline yardstick), and the points form a frontier."""
    model = getattr(zoo, name)()
    frontier = cascader.plan(model)
    assert frontier.compiled and len(frontier.points) >= 2
    for p in frontier.points:
        binary = cascader.compile(model, sram=p.sram_bytes)
        assert binary.sram_bytes == pytest.approx(p.sram_bytes, rel=0.01)
        assert binary.estimate().total_cycles == pytest.approx(p.cycles, rel=0.01)
    for a, b in zip(frontier.points, frontier.points[1:]):
        assert a.sram_bytes < b.sram_bytes and a.cycles > b.cycles


def test_the_compiled_binary_is_on_its_plotted_frontier():
    """plot_pareto draws compiled binaries, this one among them: a compile at a frontier point
    lies on the frontier it plots, and no compile lies below it (the planner's predictions put
    MobileNetV2's binaries up to 25% below its planned frontier). The unlimited compile may lie
    above it: uncascaded, it takes more SRAM than a cascade the estimator finds as fast."""
    pytest.importorskip("matplotlib")
    model = zoo.mobilenet_v2()
    frontier = cascader.plan(model)
    for budget in (frontier.points[0].sram_bytes, frontier.points[len(frontier.points) // 2].sram_bytes, None):
        r = cascader.compile(model, sram=budget)
        star = (r.sram_bytes, r.estimate().total_cycles)
        points = [(p.sram_bytes, p.cycles) for p in r.pareto.points]
        if budget is not None:
            assert star in points
        assert min(c for s, c in points if s <= star[0]) <= star[1]
        fig = r.plot_pareto()
        drawn = [tuple(line.get_xydata()[0]) for line in fig.axes[0].lines if line.get_marker() == "*"]
        assert drawn == [(star[0] / 1024, star[1])]


def test_planned_frontier_is_still_there():
    frontier = cascader.plan(zoo.resnet8(), compiled=False)
    assert not frontier.compiled and "planned" in repr(frontier)
    assert all(hasattr(p, "proposal") for p in frontier.points)


def test_a_budget_too_small_raises_one_error_naming_one_minimum():
    model = zoo.mobilenet_v2()
    with pytest.raises(cascader.InfeasibleError) as info:
        cascader.compile(model, sram=1000)
    e = info.value
    assert e.__cause__ is None and e.__context__ is None
    named = {int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?= B)", str(e))} - {1000}
    assert named == {e.minimum_sram}
    assert cascader.compile(model, sram=e.minimum_sram).sram_bytes <= e.minimum_sram
