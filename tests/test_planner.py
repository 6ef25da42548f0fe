"""The cascading planner: propagators against brute force, Pareto frontiers, cascades of a
hand-built graph, and the frontier of whole models (its ends, its order, its allocator-scored
SRAM)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cascader
from cascader import _core, zoo
from cascader.errors import InfeasibleError
from cascader.planner import PlanOptions, plan


@st.composite
def window_case(draw):
    k = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pad = (draw(st.integers(0, k[0] - 1)), draw(st.integers(0, k[1] - 1)))
    in_shape = (draw(st.integers(max((k[0] - 1) * d[0] + 1 - 2 * pad[0], 1), 16)),
                draw(st.integers(max((k[1] - 1) * d[1] + 1 - 2 * pad[1], 1), 16)), draw(st.integers(1, 4)))
    depthwise = draw(st.booleans())
    out_h = (in_shape[0] + 2 * pad[0] - ((k[0] - 1) * d[0] + 1)) // s[0] + 1
    out_w = (in_shape[1] + 2 * pad[1] - ((k[1] - 1) * d[1] + 1)) // s[1] + 1
    out_c = in_shape[2] if depthwise else draw(st.integers(1, 3))
    oh0 = draw(st.integers(0, out_h - 1))
    ow0 = draw(st.integers(0, out_w - 1))
    oc0 = draw(st.integers(0, out_c - 1))
    box = ((oh0, ow0, oc0), (draw(st.integers(1, out_h - oh0)), draw(st.integers(1, out_w - ow0)),
                             draw(st.integers(1, out_c - oc0))))
    return k, s, d, pad, in_shape, depthwise, box


@settings(max_examples=300, deadline=None)
@given(window_case())
def test_window_propagator_matches_brute_force(case):
    (kh, kw), (sh, sw), (dh, dw), (pt, pl), (ih, iw, ic), depthwise, ((oh0, ow0, oc0), (eh, ew, ec)) = case
    read = set()
    for oh, ow, oc in itertools.product(range(oh0, oh0 + eh), range(ow0, ow0 + ew), range(oc0, oc0 + ec)):
        for a, b in itertools.product(range(kh), range(kw)):
            y, x = oh * sh - pt + a * dh, ow * sw - pl + b * dw
            if 0 <= y < ih and 0 <= x < iw:
                for c in ([oc] if depthwise else range(ic)):
                    read.add((y, x, c))
    p = _core.Propagator.window(kh, kw, sh, sw, dh, dw, pt, pl, depthwise, ic)
    box = p.propagate(_core.Box([0, oh0, ow0, oc0], [1, eh, ew, ec])).cropped([1, ih, iw, ic])
    lo, hi = list(box.offset[1:]), [o + e for o, e in zip(box.offset[1:], box.extent[1:])]
    # Everything the computation reads is in the box...
    assert all(lo[a] <= v[a] < hi[a] for v in read for a in range(3))
    if not read:
        return
    # ...and the box is exactly its bounding box along every axis without dilation gaps (a
    # dilated kernel's outermost taps may fall on rows it skips; the buffer holds them anyway).
    arr = np.array(sorted(read))
    for axis, dilation in ((0, dh), (1, dw), (2, 1)):
        if dilation == 1:
            assert (lo[axis], hi[axis]) == (arr[:, axis].min(), arr[:, axis].max() + 1)


def test_offsets_scale_with_the_stride():
    # TVM's cascader placed stripe k of a stride-2 convolution at k rows instead of 2k.
    p = _core.Propagator.window(3, 3, 2, 2, 1, 1, 1, 1, False, 8)
    box = p.propagate(_core.Box([0, 4, 0, 0], [1, 2, 5, 16]))
    assert (box.offset[1], box.extent[1]) == (4 * 2 - 1, 2 * 2 + 1)
    assert (box.offset[3], box.extent[3]) == (0, 8)


def test_broadcast_propagator_reads_element_zero_of_size_one_axes():
    p = _core.Propagator.broadcast([1, 1, 7, 16], [1, 9, 7, 16])
    box = p.propagate(_core.Box([0, 3, 2, 0], [1, 4, 5, 16]))
    assert (box.offset[1], box.extent[1]) == (0, 1) and (box.offset[2], box.extent[2]) == (2, 5)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.floats(0, 1000, allow_nan=False)), min_size=1, max_size=60))
def test_pareto_frontier_is_the_non_dominated_set(points):
    front = _core.pareto_frontier(points)
    brute = {i for i, (m, c) in enumerate(points)
             if not any((m2 <= m and c2 <= c and (m2, c2) != (m, c)) for m2, c2 in points)}
    assert {points[i] for i in front} == {points[i] for i in brute}
    assert [points[i][0] for i in front] == sorted(points[i][0] for i in front)


def test_pareto_frontier_keeps_the_first_of_equal_points_and_refuses_nan():
    # The proposal DP keeps the first-found of equally good extensions; pareto_frontier agrees.
    assert _core.pareto_frontier([(5, 2.0), (3, 4.0), (5, 2.0), (3, 4.0), (9, 2.0)]) == [1, 0]
    with pytest.raises(cascader.InvalidArgumentError, match="NaN"):
        _core.pareto_frontier([(1, 1.0), (2, float("nan"))])


def test_thinning_keeps_both_ends():
    pts = [(m, 1000.0 / (m + 1)) for m in range(100)]
    front = _core.pareto_frontier(pts)
    thin = _core.thin_frontier(pts, front, 10)
    assert len(thin) == 10 and thin[0] == front[0] and thin[-1] == front[-1]


def _conv_part(name, inp, out, h, w, c_in, c_out, stride=1, k=3):
    part = _core.Part()
    part.name = name
    part.op = cascader.perf.npu_op("conv2d", (1, h * stride, w * stride, c_in), (1, h, w, c_out), kernel=k,
                                   stride=stride, padding="SAME", weight_bytes=k * k * c_in * c_out)
    part.inputs, part.output = [inp], out
    part.propagators = [_core.Propagator.window(k, k, stride, stride, 1, 1, k // 2, k // 2, False, c_in)]
    return part


def _tensor(name, h, w, c):
    t = _core.PlanTensor()
    t.name, t.shape, t.bytes = name, [1, h, w, c], h * w * c
    return t


def _chain():
    """expand 1x1 -> 3x3 -> project 1x1 at 64x64 (the inverted residual's shape)."""
    g = _core.PlanGraph()
    a = g.add_tensor(_tensor("a", 64, 64, 16))
    b = g.add_tensor(_tensor("b", 64, 64, 64))
    c = g.add_tensor(_tensor("c", 64, 64, 64))
    d = g.add_tensor(_tensor("d", 64, 64, 16))
    g.add_part(_conv_part("expand", a, b, 64, 64, 16, 64, k=1))
    g.add_part(_conv_part("conv", b, c, 64, 64, 64, 64))
    g.add_part(_conv_part("project", c, d, 64, 64, 64, 16, k=1))
    g.inputs, g.outputs = [a], [d]
    return g, (a, b, c, d)


def test_hand_built_three_part_graph_plans():
    """An expand / 3x3 / project chain at 64x64: uncascaded, the two 64-channel maps are live
    together (512 KiB); cascaded, only rows of them are, beside the 16-channel ends."""
    g, (a, b, c, d) = _chain()
    arch = cascader.arch.arch_config("ethos-u55-128")
    cascade = _core.plan_cascade(g, 0, 3, 8, arch)
    # 8 output rows need 8 rows of c and 10 of b: rolling buffers, not whole maps.
    assert {h.tensor: h.rows for h in cascade.buffers} == {b: 10, c: 8} and cascade.stripes == 8
    assert all(h.columns == 64 and h.bytes == h.rows * 64 * 64 for h in cascade.buffers)
    proposals = _core.generate_proposals(g, arch, _core.ProposalOptions())
    memories = [p.memory for p in proposals]
    assert memories == sorted(memories) and len(proposals) >= 2
    weights = sum(p.op.weight_bytes for p in g.parts)
    assert memories[-1] <= 2 * 64 * 64 * 64 + weights  # uncascaded, b and c live together (+ weight buffers)
    assert memories[0] < 2 * 64 * 64 * 16 + 20 * 64 * 64  # a, d and some rows
    cycles = [p.cycles for p in proposals]
    assert cycles == sorted(cycles, reverse=True)


def test_residual_block_cascades_through_its_two_consumer_input():
    """x -> conv1 -> conv2 -> add(conv2, conv1 output): conv1's output feeds two parts inside
    the cascade, and the rows held for it cover both."""
    g = _core.PlanGraph()
    x = g.add_tensor(_tensor("x", 32, 32, 8))
    y = g.add_tensor(_tensor("y", 32, 32, 8))
    z = g.add_tensor(_tensor("z", 32, 32, 8))
    out = g.add_tensor(_tensor("out", 32, 32, 8))
    g.add_part(_conv_part("conv1", x, y, 32, 32, 8, 8))
    g.add_part(_conv_part("conv2", y, z, 32, 32, 8, 8))
    add = _core.Part()
    add.name = "add"
    add.op = cascader.perf.npu_op("add", (1, 32, 32, 8), (1, 32, 32, 8), ifm2_shape=(1, 32, 32, 8))
    add.inputs, add.output = [z, y], out
    add.propagators = [_core.Propagator.identity(), _core.Propagator.identity()]
    g.add_part(add)
    g.inputs, g.outputs = [x], [out]
    cascade = _core.plan_cascade(g, 0, 3, 4, cascader.arch.arch_config("ethos-u55-128"))
    held = {h.tensor: h.rows for h in cascade.buffers}
    assert set(held) == {y, z} and held[y] == 4 + 2 and held[z] == 4


def test_rolling_buffers_hold_the_rows_still_read_not_each_stripes_whole_need():
    """Five 3x3 convolutions cascaded in one-row stripes. A stripe's need grows by two rows per
    layer back from the sink (3, 5, 7, 9 rows), but rows a stripe finds already computed are not
    read again: a buffer holds from the first row still read to the last written, 3 rows in the
    steady state, a little more for the first layers where the first stripe computes ahead."""
    g = _core.PlanGraph()
    t = [g.add_tensor(_tensor(f"t{i}", 32, 32, 8)) for i in range(6)]
    for i in range(5):
        g.add_part(_conv_part(f"conv{i}", t[i], t[i + 1], 32, 32, 8, 8))
    g.inputs, g.outputs = [t[0]], [t[5]]
    cascade = _core.plan_cascade(g, 0, 5, 1, cascader.arch.arch_config("ethos-u55-128"))
    assert {h.tensor: h.rows for h in cascade.buffers} == {t[1]: 5, t[2]: 4, t[3]: 3, t[4]: 3}


def test_runs_carry_the_regions_they_read_and_their_edge_padding():
    """Each recorded run says which rows and columns of its input it reads (the 3x3 window's
    reach, cropped to the tensor) and the padding where that reach passes the tensor's edge:
    the stripes of a binary are built from exactly these."""
    g = _core.PlanGraph()
    t = [g.add_tensor(_tensor(f"t{i}", 32, 32, 8)) for i in range(4)]
    for i in range(3):
        g.add_part(_conv_part(f"conv{i}", t[i], t[i + 1], 32, 32, 8, 8))
    g.inputs, g.outputs = [t[0]], [t[3]]
    cascade = _core.plan_cascade(g, 0, 3, 2, cascader.arch.arch_config("ethos-u55-128"), column_bands=2)
    assert cascade.runs
    for r in cascade.runs:
        want = (r.begin - 1, r.end + 1, r.column_begin - 1, r.column_end + 1)
        got = (max(want[0], 0), min(want[1], 32), max(want[2], 0), min(want[3], 32))
        assert r.inputs == (got,)
        assert r.padding == (got[0] - want[0], got[2] - want[2], want[1] - got[1], want[3] - got[3])
        # The stripes of a schedule read a run's attributes in one call.
        assert r.fields() == (r.part, (r.begin, r.end, r.column_begin, r.column_end), r.inputs, r.padding,
                              (r.channel_begin, r.channel_end))
        assert (r.channel_begin, r.channel_end) == (0, -1)  # every channel: no depth slices
    assert {r.padding for r in cascade.runs} >= {(1, 1, 0, 0), (0, 0, 1, 1), (0, 1, 0, 0), (0, 0, 0, 1)}
    # Or every run's in one call, in run order.
    assert cascade.run_fields() == [r.fields() for r in cascade.runs]


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet8", "unet"])
def test_steady_state_stripes_are_added_as_simulated(name):
    """Without recording runs, a cascade adds its steady-state stripes (each the one before it
    moved down) without simulating them. Every cascade of a model, with and without column
    bands and weight buffers, must come out exactly as the stripe-by-stripe simulation."""
    pg = plan(zoo.get(name)).graph
    arch = cascader.arch.arch_config("ethos-u55-128")
    n, compared = len(pg.parts), 0
    for first in range(n):
        for last, height, bands, buffered in itertools.product(range(first + 2, min(n, first + 6) + 1), (1, 2, 3, 8),
                                                               (1, 2), (False, True)):
            full = _core.plan_cascade(pg, first, last, height, arch, buffer_weights=buffered, column_bands=bands)
            fast = _core.plan_cascade(pg, first, last, height, arch, buffer_weights=buffered, column_bands=bands,
                                      runs=False)
            assert (full is None) == (fast is None)
            if full is None:
                continue
            compared += 1
            assert fast.cycles == full.cycles and fast.operations == full.operations == len(full.runs)
            assert fast.buffer_bytes == full.buffer_bytes and fast.weight_buffer_bytes == full.weight_buffer_bytes
            assert [(b.tensor, b.rows, b.columns) for b in fast.buffers] == [(b.tensor, b.rows, b.columns)
                                                                             for b in full.buffers]
    assert compared > 100


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet8", "unet"])
def test_cascades_sharing_a_sink_are_planned_in_one_simulation(name):
    """plan_cascades plans every cascade ending at one part from one simulation of the longest.
    Each must be what that cascade planned alone stripe by stripe gives (runs recorded: no
    steady-state shortcut), bit for bit: cycles, operations, rolling buffers, the weight buffer
    and the staircase (source and shift)."""
    pg = plan(zoo.get(name)).graph
    arch = cascader.arch.arch_config("ethos-u55-128")
    n, compared, staircases = len(pg.parts), 0, 0

    def fields(c):
        return None if c is None else (c.first, c.last, c.stripe_height, c.stripes, c.column_bands, c.cycles,
                                       c.operations, c.buffer_bytes, c.weight_buffer_bytes, c.buffered_weights,
                                       [(b.tensor, b.rows, b.columns, b.bytes) for b in c.buffers],
                                       c.staircase_tensor, c.staircase_shift)

    for last in range(1, n + 1):
        first_lo = max(0, last - 8)
        for height, bands, buffered in itertools.product((1, 2, 8, 1000), (1, 3), (False, True)):
            together = _core.plan_cascades(pg, first_lo, last - 1, last, height, arch, buffer_weights=buffered,
                                           column_bands=bands)
            alone = [_core.plan_cascade(pg, first, last, height, arch, buffer_weights=buffered, column_bands=bands)
                     for first in range(first_lo, last)]
            assert [fields(c) for c in together] == [fields(c) for c in alone]
            compared += sum(c is not None for c in alone)
            staircases += sum(c is not None and c.staircase_tensor >= 0 for c in alone)
    assert compared > 200 and staircases > 10


def test_stripe_and_tensor_configs_describe_a_plan():
    """The StripeConfig and TensorConfig views of a cascade: the sink's stripes per axis (edge
    stripes counted exactly) and each tensor's home region and buffer mode."""
    g, (a, b, c, d) = _chain()
    arch = cascader.arch.arch_config("ethos-u55-128")
    plan = _core.plan_cascade(g, 0, 3, 5, arch, column_bands=3)
    sc = _core.stripe_config(g, plan)
    assert sc.extent == [64, 64] and sc.shape == [5, 22] and sc.strides == sc.shape
    assert sc.count == [13, 3] and sc.edge == [4, 20] and sc.count[0] == plan.stripes
    assert repr(sc) == "StripeConfig(shape 5x22 of 64x64, 13x3 stripes, last 4x20)"
    configs = _core.tensor_configs(g, plan)
    assert [t.tensor for t in configs] == [a, b, c, d]
    held = {h.tensor: h for h in plan.buffers}
    for t in configs:
        if t.tensor in (a, d):
            assert t.boundary and t.mode == _core.BufferMode.whole and (t.rows, t.columns) == (64, 64)
            assert t.bytes == g.tensors[t.tensor].bytes
        else:
            assert not t.boundary and t.mode == _core.BufferMode.rolling
            assert (t.rows, t.columns, t.bytes) == (held[t.tensor].rows, held[t.tensor].columns, held[t.tensor].bytes)
    assert "interior, rolling" in repr(configs[1]) and "boundary, whole 64x64" in repr(configs[0])
    # Run one after another, a cascade holds its tensors whole.
    whole = _core.tensor_configs(g, _core.plan_cascade(g, 0, 3, 64, arch))
    assert all(t.mode == _core.BufferMode.whole for t in whole) and not whole[1].boundary
    assert _core.stripe_config(g, _core.plan_cascade(g, 0, 3, 64, arch)).count == [1, 1]


def test_column_bands_narrow_the_rolling_buffers():
    g, (a, b, c, d) = _chain()
    arch = cascader.arch.arch_config("ethos-u55-128")
    rows_only = _core.plan_cascade(g, 0, 3, 4, arch)
    banded = _core.plan_cascade(g, 0, 3, 4, arch, column_bands=4)
    assert banded.column_bands == 4 and rows_only.column_bands == 1
    held = {h.tensor: h for h in banded.buffers}
    # A band is 16 output columns; the 3x3 needs one halo column each side of it in b.
    assert held[c].columns == 16 and held[b].columns == 18 and held[b].rows == 6
    assert held[b].bytes == 6 * 18 * 64
    assert banded.buffer_bytes < 0.35 * rows_only.buffer_bytes
    # The halo columns of b are computed twice (once per neighbouring band), and narrower
    # operations cost more: the bands trade cycles for SRAM.
    assert banded.cycles > rows_only.cycles and banded.operations > rows_only.operations
    # Every output element is computed exactly once, and every region is inside its tensor.
    sink = [r for r in banded.runs if r.part == 2]
    covered = sum((r.end - r.begin) * (r.column_end - r.column_begin) for r in sink)
    assert covered == 64 * 64
    cells = {(y, x) for r in sink for y in range(r.begin, r.end) for x in range(r.column_begin, r.column_end)}
    assert len(cells) == 64 * 64
    expand = [r for r in banded.runs if r.part == 0]
    assert {(r.column_begin, r.column_end) for r in expand} == {(0, 17), (15, 33), (31, 49), (47, 64)}
    # A band count above the width is clamped; a single stripe is never banded.
    assert _core.plan_cascade(g, 0, 3, 4, arch, column_bands=1000).column_bands == 64
    assert _core.plan_cascade(g, 0, 3, 64, arch, column_bands=2) is None


def test_proposals_use_column_bands_for_less_memory():
    g, (a, _, _, d) = _chain()
    # `a` kept to the end (a graph output): no staircase over it, only bands lower the least memory.
    g.outputs = [a, d]
    arch = cascader.arch.arch_config("ethos-u55-128")
    rows_only = _core.ProposalOptions()
    rows_only.column_bands = [1]
    least_rows = _core.generate_proposals(g, arch, rows_only)[0]
    least = _core.generate_proposals(g, arch, _core.ProposalOptions())[0]
    assert least.memory < least_rows.memory
    assert any(c.column_bands > 1 for c in least.cascades)
    bad = _core.ProposalOptions()
    bad.column_bands = [0]
    with pytest.raises(cascader.InvalidArgumentError):
        _core.generate_proposals(g, arch, bad)


@pytest.mark.parametrize("name, at_most", [("mobilenet_v2", 0.5), ("resnet8", 0.7), ("mobilenet_v1", 0.8)])
def test_model_frontier(name, at_most):
    frontier = plan(zoo.get(name))
    points = frontier.points
    assert len(points) >= 2
    assert [p.sram_bytes for p in points] == sorted(p.sram_bytes for p in points)
    assert all(a.cycles > b.cycles for a, b in zip(points, points[1:]))
    # The allocator's layout is at least the planner's own peak, which is its lower bound.
    assert all(p.sram_bytes >= p.estimated_bytes for p in points)
    uncascaded = cascader.compile(zoo.get(name)).sram_bytes
    # The least SRAM against the uncascaded compile's (MobileNetV1's whole 96x96x3 input bounds it).
    assert points[0].sram_bytes < at_most * uncascaded
    assert frontier.select(None) is points[-1]
    with pytest.raises(InfeasibleError) as err:
        frontier.select(1024)
    assert err.value.minimum_sram == points[0].sram_bytes


def test_a_cascade_between_two_tensors_tflm_sees_writes_no_staircase():
    """The model's input cascades straight into its output: the output may not be written
    over the input (TFLM would see its two tensors share bytes), and the planner must not
    count that saving either. It did: the least point claimed 6,064 B, the compile named
    6,414 B and a compile at 6,064 B failed (found by random networks)."""
    from cascader._zoo_layers import CalibratedNet

    net = CalibratedNet(56)
    x = net.input((1, 19, 35, 5))
    net.output(net.conv2d(net.tanh(x), 8, (2, 2), (1, 2), "SAME"))
    model = net.build()
    points = plan(model).points
    assert any(p.cascades for p in points)
    with pytest.raises(InfeasibleError) as err:
        cascader.compile(model, sram=1)
    assert err.value.minimum_sram == points[0].sram_bytes
    for p in points:
        assert p.estimated_bytes - 15 <= p.sram_bytes
        assert cascader.compile(model, sram=p.sram_bytes).sram_bytes <= p.sram_bytes


def test_plan_options_change_the_frontier():
    model = zoo.mobilenet_v2()
    narrow = plan(model, options=PlanOptions(max_cascade_parts=1))
    assert len(narrow.points) == 1 and narrow.points[0].cascades == 0


def test_weight_buffers_are_a_plan_option():
    """Buffering a cascade's weights costs their bytes of SRAM for the cascade and saves the
    re-reads from flash every further stripe makes."""
    g = _core.PlanGraph()
    a = g.add_tensor(_tensor("a", 32, 32, 64))
    b = g.add_tensor(_tensor("b", 32, 32, 64))
    c = g.add_tensor(_tensor("c", 32, 32, 64))
    for name, i, o in (("conv1", a, b), ("conv2", b, c)):
        part = _conv_part(name, i, o, 32, 32, 64, 64)
        part.op.weight_memory = _core.MemoryArea.OffChipFlash
        g.add_part(part)
    g.inputs, g.outputs = [a], [c]
    arch = cascader.arch.arch_config("ethos-u55-128", "Ethos_U55_High_End_Embedded", "Shared_Sram")
    plain = _core.plan_cascade(g, 0, 2, 2, arch)
    buffered = _core.plan_cascade(g, 0, 2, 2, arch, buffer_weights=True)
    assert not plain.buffered_weights and plain.weight_buffer_bytes == 0
    assert buffered.weight_buffer_bytes == 2 * 9 * 64 * 64
    assert buffered.cycles < plain.cycles


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet8", "ds_cnn_kws"])
def test_fastest_proposal_is_the_uncascaded_compile(name):
    """The planner takes a lone operation's weight buffering (one copy or double-buffered depth
    slices) from the scheduler: its fastest proposal is as fast as the unlimited compile, so plan
    and binary agree at that end of the frontier. Its SRAM is at most the unlimited compile's:
    the allocator under a budget may lay it out tighter (`planner.budgeted_points`), and the
    compile within that SRAM gives it."""
    model = zoo.get(name)
    fastest = plan(model).points[-1]
    compiled = cascader.compile(model)
    assert fastest.cycles == pytest.approx(compiled.schedule.total_cycles)
    assert fastest.sram_bytes <= compiled.sram_bytes
    within = cascader.compile(model, sram=fastest.sram_bytes)
    assert within.sram_bytes <= fastest.sram_bytes
    assert within.schedule.total_cycles == pytest.approx(fastest.cycles)


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet8"])
def test_budgeted_point_of_a_wrong_guess_is_made_again(monkeypatch, name):
    """`plan` budgets its guess of the fastest uncascaded point while the leanest are scored;
    where the frontier's is another point, the budgeted point is made again from that one: a
    guess forced wrong (the slowest uncascaded proposal) gives the same frontier."""
    from cascader import planner

    model = zoo.get(name)
    right = [(p.sram_bytes, p.cycles) for p in plan(model).points]
    fastest = planner._fastest_uncascaded
    made = []

    def slowest_guess(points, key=None):
        if key is not None:  # the guess, by the planner's bound
            return fastest(points, key=lambda p: (-p.cycles, p.estimated_bytes))
        return fastest(points)

    monkeypatch.setattr(planner, "_fastest_uncascaded", slowest_guess)
    budgeted = planner.budgeted_points
    monkeypatch.setattr(planner, "budgeted_points", lambda fastest, *a, **k: made.append(fastest) or budgeted(
        fastest, *a, **k))
    assert [(p.sram_bytes, p.cycles) for p in plan(model).points] == right
    assert len(made) == 2 and made[0] is not made[1]


@pytest.mark.skipif(not os.environ.get("CASCADER_MODELS"), reason="CASCADER_MODELS is not set")
def test_fastest_proposal_is_the_uncascaded_compile_with_a_flattened_copy():
    """MobileNetV2-224 starts with a uint8 -> int8 QUANTIZE that runs whole 16 channels wide
    but stripes in its own 224 x 224 x 3 shape: run alone, the plan costs it as scheduled."""
    path = Path(os.environ["CASCADER_MODELS"]) / "coral_tf2_mobilenet_v2_1.0_224_ptq.tflite"
    if not path.exists():
        pytest.skip(f"{path} is missing")
    assert plan(path).points[-1].cycles == pytest.approx(cascader.compile(path).schedule.total_cycles)


def test_planner_values_have_readable_reprs():
    g, (a, b, c, d) = _chain()
    arch = cascader.arch.arch_config("ethos-u55-128")
    assert repr(g.tensors[b]) == "PlanTensor(b: 1x64x64x64, 262144 B)"
    assert repr(g.parts[1]).startswith("Part(conv: inputs [1] -> 2, ") and "B of weights" in repr(g.parts[1])
    banded = _core.plan_cascade(g, 0, 3, 4, arch, column_bands=4)
    assert repr(banded).startswith("CascadePlan(parts 0..2: 16 stripes of 4 rows x 4 column bands, ")
    proposal = _core.generate_proposals(g, arch, _core.ProposalOptions())[0]
    assert repr(proposal).startswith("Proposal(") and " cycles)" in repr(proposal)


def _concatenation_graph():
    """Two 3x3 convolutions writing the halves of a concatenation's channels, read by a third."""
    g = _core.PlanGraph()
    x = g.add_tensor(_tensor("x", 16, 16, 8))
    cat = g.add_tensor(_tensor("cat", 16, 16, 16))
    out = g.add_tensor(_tensor("out", 16, 16, 8))
    g.add_part(_conv_part("left", x, cat, 16, 16, 8, 8))
    g.add_part(_conv_part("right", x, cat, 16, 16, 8, 8))
    g.add_part(_conv_part("after", cat, out, 16, 16, 16, 8))
    g.inputs, g.outputs = [x], [out]
    return g, cat


def test_a_tensor_several_parts_write_is_one_buffer_of_its_cascade():
    """Two convolutions writing the halves of one concatenation, read by a third: run whole in
    one cascade, the concatenation is one buffer, counted once."""
    g, cat = _concatenation_graph()
    cascade = _core.plan_cascade(g, 0, 3, 16, cascader.arch.arch_config("ethos-u55-128"))
    assert [b.tensor for b in cascade.buffers] == [cat]
    assert cascade.buffer_bytes == 16 * 16 * 16


def test_a_cascade_holds_every_writer_of_a_channel_sliced_tensor():
    """Two convolutions each writing half of a concatenation's channels, read by a third: the
    striped cascade of all three rolls the concatenation (one buffer, its whole depth); a
    cascade from the second writer on would leave the first half unwritten, and is none."""
    g, cat = _concatenation_graph()
    g.validate()
    arch = cascader.arch.arch_config("ethos-u55-128")
    cascade = _core.plan_cascade(g, 0, 3, 2, arch)
    assert [(b.tensor, b.rows) for b in cascade.buffers] == [(cat, 4)]  # 3x3 windows, 2 rows a stripe
    assert cascade.buffer_bytes == 4 * 16 * 16
    # Both writers compute every row of the concatenation, once.
    for name in (0, 1):
        rows = sorted((r.begin, r.end) for r in cascade.runs if r.part == name)
        assert rows[0][0] == 0 and rows[-1][1] == 16 and all(a[1] == b[0] for a, b in zip(rows, rows[1:]))
    assert _core.plan_cascade(g, 1, 3, 2, arch) is None


def test_an_aligned_part_computes_whole_blocks_of_its_rows():
    """A part aligned to 2 (a 2x nearest upscale) computes rows from even ones on in a
    cascade, so every stripe of it reads whole input rows; as a sink it stripes only in
    multiples of 2 rows."""
    g = _core.PlanGraph()
    src, x, up, out = (g.add_tensor(_tensor(name, size, size, 8))
                       for name, size in (("src", 8), ("x", 8), ("up", 16), ("out", 16)))
    g.add_part(_conv_part("before", src, x, 8, 8, 8, 8))
    part = _core.Part()
    part.name = "upscale"
    part.op = cascader.perf.npu_op("avg_pool", (1, 16, 16, 8), (1, 16, 16, 8), kernel=1, stride=1, padding="VALID")
    part.inputs, part.output, part.alignment = [x], up, 2
    part.propagators = [_core.Propagator.upscale(2)]
    g.add_part(part)
    g.add_part(_conv_part("after", up, out, 16, 16, 8, 8))
    g.inputs, g.outputs = [src], [out]
    arch = cascader.arch.arch_config("ethos-u55-128")
    cascade = _core.plan_cascade(g, 0, 3, 1, arch)
    runs = [r for r in cascade.runs if r.part == 1]
    assert [(r.begin, r.end) for r in runs] == [(k, k + 2) for k in range(0, 16, 2)]
    assert all(r.inputs[0][:2] == (r.begin // 2, r.end // 2) for r in runs)
    assert _core.plan_cascade(g, 0, 2, 1, arch) is None
    assert _core.plan_cascade(g, 0, 2, 2, arch).stripes == 8


def test_proposal_schedule_makes_each_cascade_one_step():
    """The schedule a proposal is scored on: each cascade one step, its rolled tensors rolling
    buffers written there instead of whole buffers, and the layout's SRAM the score."""
    from cascader import memory as mem
    from cascader.lowering import lower
    from cascader.scheduling import schedule
    from cascader.planner import plan_schedule
    from cascader.schedule import _Target, memory_schedule, without_weight_buffers

    part, segments = lower(zoo.get("mobilenet_v2"))
    buffered = schedule(part, segments, "ethos-u55-128", "Ethos_U55_High_End_Embedded", "Shared_Sram")
    lean = without_weight_buffers(buffered)
    frontier = plan_schedule(lean, part.graph, _Target.of(buffered), buffered=buffered)
    uncascaded = mem.core_schedule(memory_schedule(lean, part.graph)[0])
    config = mem.MemoryConfig.for_target("ethos-u55-128", "Ethos_U55_High_End_Embedded", "Shared_Sram")
    point = frontier.points[0]
    proposal = point.proposal
    cascades = proposal.cascades
    assert any(c.buffers for c in cascades)
    s = _core.proposal_schedule(frontier.graph, proposal, uncascaded)
    assert len(s.steps) == len(cascades) + 2
    names = [b[0] for b in s.buffers]
    for c in cascades:
        for b in c.buffers:
            whole = frontier.graph.tensors[b.tensor].name
            assert whole not in names and f"{whole} (rolling, {b.rows}x{b.columns})" in names
    assert _core.layout_schedule(s, config.to_core()).arenas.fast_size == point.sram_bytes
    assert _core.proposal_sram(frontier.graph, proposal, uncascaded, config.to_core()) == point.sram_bytes
    scores = _core.proposal_srams(frontier.graph, [p.proposal for p in frontier.candidates], uncascaded, config.to_core())
    assert scores == [p.sram_bytes for p in frontier.candidates]
    short = mem.core_schedule(mem.Schedule([], [], []))
    with pytest.raises(cascader.InvalidArgumentError, match="steps"):
        _core.proposal_schedule(frontier.graph, proposal, short)
    with pytest.raises(cascader.InvalidArgumentError, match="missing"):
        _core.proposal_srams(frontier.graph, [proposal, None], uncascaded, config.to_core())


def test_proposals_are_the_same_on_every_run():
    """The cascades are planned on every core: the proposals must not depend on which."""
    from cascader.lowering import lower
    from cascader.scheduling import schedule
    from cascader.planner import build_graph
    from cascader.schedule import _Target, without_weight_buffers

    part, segments = lower(zoo.get("mobilenet_v2"))
    buffered = schedule(part, segments, "ethos-u55-128", "Ethos_U55_High_End_Embedded", "Shared_Sram")
    target = _Target.of(buffered)
    graph = build_graph(without_weight_buffers(buffered), part.graph, target, buffered)
    runs = [[(p.memory, p.cycles, [repr(c) for c in p.cascades])
             for p in _core.generate_proposals(graph, target.arch, PlanOptions().to_core())] for _ in range(3)]
    assert runs[0] == runs[1] == runs[2] and len(runs[0]) > 2


def test_the_schedulers_target_is_reused_while_the_segments_are_its_own():
    """The planner and the budgeted compile cost a schedule's operations with the target the
    scheduler made (its descriptions are made once): only while the schedule has the lowered
    segments that target was made for, and with the same costs a new target gives."""
    import pickle
    from dataclasses import replace

    from cascader.lowering import lower
    from cascader.scheduling import schedule
    from cascader.schedule import _Target, without_weight_buffers

    part, segments = lower(zoo.get("resnet8"))
    buffered = schedule(part, segments, "ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram")
    kept = buffered.target
    assert kept is not None and _Target.of(buffered) is kept and _Target.of(without_weight_buffers(buffered)) is kept
    fresh = _Target(buffered.accelerator, buffered.system, buffered.memory_mode, [s.segment for s in buffered.segments])
    for sop in buffered.operations:
        op = sop.lowered
        w = sum(r.weight_length for streams in sop.encoded.slices for r in streams) if sop.encoded else 0
        flash = sop.constant_ifm2 == "flash"
        assert kept.cost(op, w, ifm2_in_flash=flash) == fresh.cost(op, w, ifm2_in_flash=flash), op.name
    other = replace(buffered, segments=[replace(buffered.segments[0], segment=replace(buffered.segments[0].segment)),
                                        *buffered.segments[1:]])
    assert _Target.of(other) is not kept
    elsewhere = replace(buffered, accelerator="ethos-u65-512")
    assert _Target.of(elsewhere).accelerator == "ethos-u65-512"
    copy = pickle.loads(pickle.dumps(buffered))  # the target holds core objects: not pickled
    assert copy.target is None and _Target.of(copy).accelerator == buffered.accelerator


def test_tensors_tflm_sees_take_no_sram_outside_shared_sram():
    """Outside Shared_Sram the tensors TFLM sees live in its arena, the slow memory: the planner
    counts none of their bytes, so its bound stays a lower bound of every layout; Shared_Sram
    counts them all. (Counted on the U65-256, DeepLabV3's 7.9 MB of logits and ARG_MAX indices
    were every proposal's peak: one point, the fastest, at 3,969,120 B.)"""
    model = zoo.mobilenet_v2()
    for accelerator, counted in (("ethos-u55-128", True), ("ethos-u65-256", False)):
        frontier = plan(model, accelerator=accelerator)
        visible = [t for t in frontier.graph.tensors if t.cpu_visible]
        assert visible and all((t.bytes > 0) == counted for t in visible)
        assert all(p.estimated_bytes - 15 <= p.sram_bytes for p in frontier.points)


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
def test_a_one_pixel_resize_stripes_over_its_constant_zeros(tmp_path, accelerator):
    """DeepLab's image pooling branch: a RESIZE_BILINEAR of a 1x1 map is an ADD of it, broadcast
    as the IFM2, to zeros in flash as the IFM (the part's inputs start at operand 1). It stripes,
    so the least point cascades both branches into the concatenation and its projection instead
    of holding the concatenation whole (DeepLabV3 on U65-256: 836,608 -> 270,892 B), and that
    binary is bit-exact."""
    from cascader.bench.simulate import validate

    pytest.importorskip("ai_edge_litert")
    path = tmp_path / "aspp.tflite"
    cascader.save_model(zoo.deeplab_aspp(), path)
    frontier = plan(path, accelerator=accelerator)
    parts = frontier.graph.parts
    k = next(i for i, p in enumerate(parts) if "RESIZE_BILINEAR" in p.name)
    assert parts[k].first_operand == 1 and parts[k].stripable and len(parts[k].inputs) == 1
    least = frontier.resident  # Dedicated_Sram: points[0] has its feature maps in DRAM
    assert any(c.first <= k < c.last and c.last - c.first > 1 and c.stripes > 1 for c in least.proposal.cascades)
    compiled = cascader.compile(path, sram=least.sram_bytes, accelerator=accelerator)
    assert compiled.sram_bytes <= least.sram_bytes
    result = validate(path, compiled.model, (0, 1))
    assert result.bit_exact, result.details


def test_a_part_starting_at_the_second_operand_has_one_input():
    g, (a, b, _, _) = _chain()
    part = _conv_part("two inputs from the IFM2", a, b, 64, 64, 16, 64, k=1)
    part.inputs, part.propagators = [a, b], [_core.Propagator.identity()] * 2
    for first in (1, 2):
        part.first_operand = first
        bad = _core.PlanGraph()
        for t in g.tensors:
            bad.add_tensor(t)
        bad.add_part(part)
        with pytest.raises(cascader.InvalidArgumentError, match="first_operand"):
            bad.validate()


def test_proposals_their_bound_shows_dominated_are_not_laid_out():
    """Shared_Sram: a proposal whose planner bound is above the score of one at most as slow is
    not laid out (`_core.undominated_srams`, `sram_bytes` None). Laid out, each comes out at
    least its bound, above that one: the frontier is the one of every score."""
    from cascader import memory as mem
    from cascader.lowering import lower
    from cascader.planner import plan_scheduled
    from cascader.scheduling import schedule
    from cascader.schedule import memory_schedule, without_weight_buffers

    part, segments = lower(zoo.get("mobilenet_v2"))
    buffered = schedule(part, segments, "ethos-u55-128", "Ethos_U55_High_End_Embedded", "Shared_Sram")
    lean = without_weight_buffers(buffered)
    frontier = plan_scheduled(part, buffered, lean=lean)
    skipped = [p for p in frontier.candidates if p.sram_bytes is None]
    laid = [p for p in frontier.candidates if p.sram_bytes is not None]
    assert skipped and laid and "not laid out" in repr(skipped[0])
    uncascaded = mem.core_schedule(memory_schedule(lean, part.graph)[0])
    config = mem.MemoryConfig.for_target("ethos-u55-128", "Ethos_U55_High_End_Embedded", "Shared_Sram")
    scores = _core.proposal_srams(frontier.graph, [p.proposal for p in skipped], uncascaded, config.to_core())
    for p, sram in zip(skipped, scores):
        assert sram >= p.estimated_bytes - 15
        assert any(d.cycles <= p.cycles and d.sram_bytes < sram for d in laid)
    assert all(any(p is q for q in laid) for p in frontier.points)


def test_undominated_srams_score_what_no_scored_point_dominates_by_bound():
    """`_core.undominated_srams` scores fastest first, 8 at a time, and skips (-1) a proposal
    whose bound is above the SRAM of one at most as slow by more than 15 bytes, of the settled
    ones or of those scored before it: the rule, replayed in Python over every score. Run in
    the background it gives the same; its result is taken once; an error in it is raised by
    `take()`."""
    from cascader import memory as mem
    from cascader.lowering import lower
    from cascader.planner import plan_schedule
    from cascader.scheduling import schedule
    from cascader.schedule import _Target, memory_schedule, without_weight_buffers

    part, segments = lower(zoo.get("mobilenet_v2"))
    lean = without_weight_buffers(schedule(part, segments, "ethos-u55-128"))
    frontier = plan_schedule(lean, part.graph, _Target.of(lean), score=False)
    proposals = [p.proposal for p in frontier.candidates]
    uncascaded = mem.core_schedule(memory_schedule(lean, part.graph)[0])
    config = mem.MemoryConfig.for_target("ethos-u55-128", None, None).to_core()
    every = _core.proposal_srams(frontier.graph, proposals, uncascaded, config)
    settled = [(proposals[-1].cycles, every[-1])]
    got = _core.undominated_srams(frontier.graph, proposals, settled, True, uncascaded, config)
    known, want = list(settled), [-1] * len(proposals)
    order = sorted(range(len(proposals)), key=lambda k: (proposals[k].cycles, proposals[k].memory))
    for begin in range(0, len(order), 8):
        batch = [k for k in order[begin:begin + 8]
                 if not any(c <= proposals[k].cycles and s < proposals[k].memory - 15 for c, s in known)]
        for k in batch:
            want[k] = every[k]
        known += [(proposals[k].cycles, every[k]) for k in batch]
    assert got == want and 0 < got.count(-1) < len(got)
    assert _core.undominated_srams(frontier.graph, proposals, settled, False, uncascaded, config) == every
    work = _core.queue_undominated_srams(frontier.graph, proposals, settled, True, uncascaded, config)
    assert work.take() == want
    with pytest.raises(cascader.InvalidArgumentError, match="taken already"):
        work.take()
    broken = _core.queue_undominated_srams(frontier.graph, [None], [], True, uncascaded, config)
    with pytest.raises(cascader.InvalidArgumentError, match="missing"):
        broken.take()


def test_scores_within_their_node_limit_keep_the_frontier(monkeypatch):
    """A score's layout searches at most SCORE_NODE_LIMIT nodes: zoo lstm_kws on U65-256 (one
    proposal's search found nothing below its greedy layout in 200,000 nodes) plans the same
    frontier as with 200,000, every proposal scored (Dedicated_Sram: its bound is no bound)."""
    from cascader import planner

    model = zoo.get("lstm_kws")
    frontier = plan(model, accelerator="ethos-u65-256")
    assert all(p.sram_bytes is not None for p in frontier.candidates)
    monkeypatch.setattr(planner, "SCORE_NODE_LIMIT", 200_000)
    thorough = plan(model, accelerator="ethos-u65-256")
    assert [(p.sram_bytes, p.cycles, p.evicting) for p in frontier.points] == \
        [(p.sram_bytes, p.cycles, p.evicting) for p in thorough.points]
    assert [p.sram_bytes for p in frontier.candidates] == [p.sram_bytes for p in thorough.candidates]
