"""Depth-sliced cascades (#44): a cascade whose parts run whole in H and W once per slice of its
sink's channels (`_core.plan_depth_cascade`), the first part reading every channel of its
inputs (a 1x1 convolution computing a slice of its output channels from that slice's weights),
the later ones channel by channel. A 1x1 convolution widening into a global pool then holds one
slice of its output, where row stripes cannot help (the pool reads every row).

The channel mapping of the propagators is checked against brute force (the operation's reads
enumerated element by element), and every frontier point with depth slices compiles to a
bit-exact binary within its SRAM."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cascader
from cascader import _core, zoo
from cascader._zoo_layers import CalibratedNet
from cascader.lowering import lower
from cascader.planner import PlanOptions, build_graph, plan
from cascader.schedule import _Target, without_weight_buffers
from cascader.scheduling import schedule
from cascader.tflite import as_model


def wide_tail(seed=0, size=8, width=256):
    """A classifier's tail: a 1x1 convolution widening 32 channels to `width`, a global
    average pool and a dense layer (MobileNetV2's last layers, smaller)."""
    net = CalibratedNet(seed)
    x = net.conv2d(net.input((1, size, size, 32)), width, (1, 1), (1, 1), "SAME", activation="RELU")
    x = net.pool(x, "AVERAGE", (size, size), (1, 1), "VALID")
    net.output(net.fully_connected(net.reshape(x, (1, width)), 10))
    return net.build()


def _planner_graph(model, accelerator="ethos-u55-128"):
    part, segments = lower(as_model(model))
    buffered = schedule(part, segments, accelerator)
    target = _Target.of(buffered)
    return build_graph(without_weight_buffers(buffered), part.graph, target, buffered), target


def _window_reads(h, w, c, kernel, stride, depthwise, out_c):
    """Brute force: per output element (y, x, channel), the input elements (y, x, channel) a
    VALID window operation reads: its own channel (depthwise, pooling: `out_c` is `c`) or
    every channel (a convolution of `out_c` filters)."""
    (kh, kw), (sh, sw) = kernel, stride
    out_h, out_w = (h - kh) // sh + 1, (w - kw) // sw + 1
    reads = {}
    for y, x, d in itertools.product(range(out_h), range(out_w), range(out_c)):
        channels = [d] if depthwise else range(c)
        reads[(y, x, d)] = {(y * sh + i, x * sw + j, e) for i in range(kh) for j in range(kw) for e in channels}
    return reads, (out_h, out_w, out_c)


def _channels_read(reads, d0, d1):
    """The channels of the input the output channels [d0, d1) read, as [first, end)."""
    channels = {e for (_, _, d), elements in reads.items() if d0 <= d < d1 for (_, _, e) in elements}
    return min(channels), max(channels) + 1


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_window_propagators_map_channel_slices_as_brute_force(data):
    h, w, c = data.draw(st.integers(3, 6)), data.draw(st.integers(3, 6)), data.draw(st.integers(2, 6))
    kernel = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    stride = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2)))
    depthwise = data.draw(st.booleans())
    out_c = c if depthwise else data.draw(st.integers(1, 6))
    reads, (out_h, out_w, out_c) = _window_reads(h, w, c, kernel, stride, depthwise, out_c)
    prop = _core.Propagator.window(*kernel, *stride, 1, 1, 0, 0, depthwise, c)
    d0 = data.draw(st.integers(0, out_c - 1))
    d1 = data.draw(st.integers(d0 + 1, out_c))
    box = prop.propagate(_core.Box([0, 0, 0, d0], [1, out_h, out_w, d1 - d0])).cropped([1, h, w, c])
    assert (box.offset[3], box.offset[3] + box.extent[3]) == _channels_read(reads, d0, d1)
    # Channel-local: every slice of the output reads that slice of the input, and only then.
    local = all(_channels_read(reads, a, b) == (a, b) for a in range(out_c) for b in range(a + 1, out_c + 1))
    assert _core.channel_local(prop) == local


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_broadcast_propagators_are_channel_local_only_as_deep_as_the_output(data):
    out = [data.draw(st.integers(1, 4)) for _ in range(2)] + [data.draw(st.integers(2, 6))]
    operand = [d if data.draw(st.booleans()) else 1 for d in out]
    marked = np.arange(int(np.prod(operand))).reshape(operand)
    seen = np.broadcast_to(marked, out)
    prop = _core.Propagator.broadcast([1, *operand], [1, *out])
    d0 = data.draw(st.integers(0, out[2] - 1))
    d1 = data.draw(st.integers(d0 + 1, out[2]))
    _, _, channels = np.nonzero(np.isin(marked, seen[:, :, d0:d1]))
    box = prop.propagate(_core.Box([0, 0, 0, d0], [1, out[0], out[1], d1 - d0])).cropped([1, *operand])
    assert (box.offset[3], box.offset[3] + box.extent[3]) == (channels.min(), channels.max() + 1)
    assert _core.channel_local(prop) == (operand[2] == out[2])


def test_a_wide_tail_holds_one_slice_of_the_widened_map():
    pg, target = _planner_graph(wide_tail())
    names = [p.name for p in pg.parts]
    conv, pool, dense = (next(k for k, n in enumerate(names) if op in n)
                         for op in ("CONV_2D", "AVERAGE_POOL_2D", "FULLY_CONNECTED"))
    assert (conv + 1, pool + 1) == (pool, dense)
    plan8 = _core.plan_depth_cascade(pg, conv, pool + 1, 8, target.arch)
    assert (plan8.depth_slices, plan8.slice_depth, plan8.stripes) == (8, 32, 1)
    (held,) = plan8.buffers
    widened = pg.tensors[pg.parts[conv].output]
    assert held.tensor == pg.parts[conv].output and (held.rows, held.columns, held.channels) == (8, 8, 32)
    assert held.bytes == 8 * 8 * 32 == widened.bytes // 8
    # Slice by slice, each part once, over its whole rows and columns.
    runs = [(r.part, r.channel_begin, r.channel_end, r.begin, r.end) for r in plan8.runs]
    assert runs == [(k, 32 * s, 32 * s + 32, 0, pg.tensors[pg.parts[k].output].shape[1])
                    for s in range(8) for k in (conv, pool)]
    assert plan8.run_fields() == [r.fields() for r in plan8.runs]  # the stripes read them so
    assert plan8.operations == 16 and plan8.cycles > 0
    assert _core.plan_depth_cascade(pg, conv, pool + 1, 8, target.arch, runs=False).cycles == plan8.cycles
    # Not every count of slices makes 16-channel multiples (5 slices of 64 are 4), and the dense
    # layer reads every channel of the pool's output: no slice of it reads a slice.
    assert _core.plan_depth_cascade(pg, conv, pool + 1, 5, target.arch) is None
    assert _core.plan_depth_cascade(pg, conv, dense + 1, 2, target.arch) is None
    assert _core.plan_depth_cascade(pg, conv, conv + 1, 2, target.arch) is None  # one part: nothing to hold
    with pytest.raises(cascader.InvalidArgumentError, match="depth_slices"):
        _core.plan_depth_cascade(pg, conv, pool + 1, 0, target.arch)


def _depth_points(frontier):
    # Dedicated_Sram: the points with feature maps in DRAM may dominate every depth-sliced one
    # but the least with every feature map in SRAM (`Frontier.resident`).
    points = frontier.points + [p for p in (frontier.resident,) if p is not None and p not in frontier.points]
    return [p for p in points if any(c.depth_slices > 1 for c in p.proposal.cascades)]


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
def test_depth_slices_give_the_wide_tail_its_least_sram(accelerator):
    """18,432 B (u55-128) and 16,640 B (u65-256) without depth slices: the widened map whole."""
    model = wide_tail()
    without = plan(model, accelerator=accelerator, options=PlanOptions(depth_slices=()))
    frontier = plan(model, accelerator=accelerator)
    assert not _depth_points(without)
    least = frontier.resident  # Dedicated_Sram: points[0] has its feature maps in DRAM
    assert any(c.depth_slices > 1 for c in least.proposal.cascades)
    assert least.sram_bytes <= 0.3 * without.resident.sram_bytes
    # The floor counts the pool's input (8 x 8 x 256) one slice deep: below every point.
    assert frontier.floor_bytes <= least.sram_bytes < 8 * 8 * 256


def test_depth_slices_add_frontier_points_to_ds_cnn():
    """ds_cnn_kws: its last 1x1 convolution and global pool in two slices of 32 channels give
    points between its row-striped ones (12,480 B at 173,006 cycles, where the frontier had
    191,886 cycles at that SRAM), none dominated by a point without depth slices."""
    model = zoo.ds_cnn_kws()
    without = plan(model, options=PlanOptions(depth_slices=()))
    new = _depth_points(plan(model))
    assert new
    for p in new:
        assert not any(q.sram_bytes <= p.sram_bytes and q.cycles <= p.cycles for q in without.points)


@pytest.mark.parametrize("name, accelerator", [("wide_tail", "ethos-u55-128"), ("wide_tail", "ethos-u65-256"),
                                               ("ds_cnn_kws", "ethos-u55-128")])
def test_every_depth_sliced_point_compiles_bit_exact_within_its_sram(tmp_path, name, accelerator):
    path = tmp_path / f"{name}.tflite"
    cascader.save_model(wide_tail() if name == "wide_tail" else zoo.get(name), path)
    frontier = plan(path, accelerator=accelerator)
    points = _depth_points(frontier)
    assert points
    for point in points:
        compiled = cascader.compile(path, sram=point.sram_bytes, accelerator=accelerator)
        assert compiled.sram_bytes <= point.sram_bytes
        assert compiled.check(seeds=(0, 1)).bit_exact, f"{name} at {point.sram_bytes} B"
        sliced = [op for op in compiled.schedule.operations if ", channels " in op.lowered.name]
        if sliced:
            # The planner costs a slice's weight streams as its share of the whole ones; the
            # binary reads the slice's own encoding (a few bytes apart).
            assert compiled.schedule.total_cycles == pytest.approx(point.cycles, rel=1e-3)
    if accelerator == "ethos-u55-128":  # U65-256's compile meets these budgets uncascaded
        assert any(", channels " in op.lowered.name
                   for op in cascader.compile(path, sram=points[0].sram_bytes,
                                              accelerator=accelerator).schedule.operations)
