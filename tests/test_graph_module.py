"""cascader.graph: the planner's graph and search as public names, the C++ core's own values."""

from __future__ import annotations

import doctest

import pytest

import cascader
from cascader import _core, graph


def chain(element_bytes: int = 1) -> graph.PlanGraph:
    """expand 1x1, 3x3, project 1x1 over 32x32, as the research notebook builds it."""
    g = graph.PlanGraph()
    channels = (("a", 8), ("b", 32), ("c", 32), ("d", 8))
    a, b, c, d = (g.add_tensor(graph.tensor(n, (32, 32, ch), element_bytes=element_bytes)) for n, ch in channels)
    for name, inp, out, c_in, c_out, k in (("expand", a, b, 8, 32, 1), ("conv", b, c, 32, 32, 3),
                                           ("project", c, d, 32, 8, 1)):
        op = graph.npu_op("conv2d", (1, 32, 32, c_in), (1, 32, 32, c_out), kernel=k, padding="SAME",
                          weight_bytes=k * k * c_in * c_out)
        window = graph.Propagator.window(k, k, 1, 1, 1, 1, k // 2, k // 2, False, c_in)
        g.add_part(graph.part(name, op, inputs=[inp], output=out, propagators=[window]))
    g.inputs, g.outputs = [a], [d]
    g.validate()
    return g


def test_the_module_example_runs():
    assert doctest.testmod(graph).failed == 0


def test_helpers_build_the_core_values():
    t = graph.tensor("t", (16, 8, 4), element_bytes=2, cpu_visible=True)
    assert isinstance(t, _core.PlanTensor)
    assert (t.name, t.shape, t.bytes, t.cascadable, t.cpu_visible) == ("t", [1, 16, 8, 4], 1024, True, True)
    g = chain()
    assert [p.name for p in g.parts] == ["expand", "conv", "project"]
    assert [(p.inputs, p.output) for p in g.parts] == [([0], 1), ([1], 2), ([2], 3)]
    assert g.parts[1].propagators[0].propagate(graph.Box([0, 4, 0, 0], [1, 2, 32, 32])).offset == [0, 3, -1, 0]


def test_an_accelerator_name_is_its_default_target():
    g = chain()
    by_name = graph.plan_cascade(g, 0, 3, 4, "ethos-u55-128")
    by_config = graph.plan_cascade(g, 0, 3, 4, graph.arch_config("ethos-u55-128"))
    assert by_name.cycles == by_config.cycles > 0 and by_name.stripes == 8
    # The sink is written over the input it consumes, `staircase_shift` bytes below it: the
    # two whole tensors take one tensor's bytes and the shift.
    assert by_name.staircase_tensor == 0
    assert graph.cascade_memory(g, by_name) == by_name.buffer_bytes + 32 * 32 * 8 + by_name.staircase_shift
    assert [t.mode for t in graph.tensor_configs(g, by_name)] == [graph.BufferMode.whole, graph.BufferMode.rolling,
                                                                  graph.BufferMode.rolling, graph.BufferMode.whole]
    assert graph.stripe_config(g, by_name).count == [8, 1]
    assert graph.plan_cascade(g, 0, 3, 32, "ethos-u55-128", column_bands=2) is None  # one stripe is never split


def test_plan_options_steer_the_search_as_the_core_options_do():
    g = chain()
    arch = graph.arch_config("ethos-u65-256")
    figures = lambda proposals: [(p.memory, p.cycles) for p in proposals]  # noqa: E731
    assert figures(graph.generate_proposals(g, arch)) == figures(graph.generate_proposals(g, arch, cascader.PlanOptions()))
    options = cascader.PlanOptions(max_cascade_parts=1)
    alone = graph.generate_proposals(g, arch, options)
    assert figures(alone) == figures(graph.generate_proposals(g, arch, options.to_core()))
    assert all(c.last - c.first == 1 for p in alone for c in p.cascades)
    front = graph.pareto_frontier([(3, 1.0), (1, 5.0), (2, 5.0), (2, 2.0)])
    assert front == [1, 3, 0]


def test_every_public_name_is_documented():
    for name in graph.__all__:
        assert getattr(graph, name).__doc__, name
    assert "Attributes" in graph.Part.__doc__ and "propagators" in graph.Part.__doc__
    with pytest.raises(cascader.CascaderError):
        graph.pareto_frontier([(1, float("nan"))])
