"""Cascades through what real networks contain (#44): a channel pad's copy and border, a
concatenation's inputs written in place into its buffer, a channel split read in place, a 2x
nearest-neighbour upsampling, a broadcast operand, and a global reduction ending one cascade
while the next begins after it. The propagators are checked against brute force (the op run on
marked inputs), and every new cascade compiles to a bit-exact binary within its SRAM. A
stride-2 transposed convolution stripes too (its propagator divides into the zero-inserted
input, the zero rows before a stripe's first stored row its padding). A TRANSPOSE that moves
the channels (an NCHW input made NHWC) stripes by its output's rows: one depth-1 copy per
output channel, its propagator a permutation of the axes. A box of rows and columns read in
place (a SLICE) rolls too, where its reader pads only at the tensor's edges; one read every
step-th row and column (a STRIDED_SLICE) stays whole and its readers stripe. A 2x bilinear
resize with half-pixel centres stripes in its least-scratch lowering: 2x2 sums of the
upscaled input, their 2x2 average padded all round, a rescale (`lower_resize._blended_sums`)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cascader
from cascader import _core
from cascader._zoo_layers import CalibratedNet
from cascader.lowering import lower
from cascader.planner import build_graph, plan
from cascader.schedule import _Target, without_weight_buffers
from cascader.scheduling import schedule
from cascader.tflite import as_model


def _planner_graph(model, least_scratch=False):
    part, segments = lower(as_model(model), least_scratch=least_scratch)
    buffered = schedule(part, segments, "ethos-u55-128", "Ethos_U55_High_End_Embedded", "Shared_Sram")
    return build_graph(without_weight_buffers(buffered), part.graph, _Target.of(buffered), buffered)


def _channel_pad_net(h, w, c, before, after, seed=0):
    net = CalibratedNet(seed)
    x = net.conv2d(net.input((1, h, w, 3)), c, (1, 1), (1, 1), "SAME", activation=None)
    y = net.pad(x, [(0, 0), (0, 0), (0, 0), (before, after)])
    net.output(net.conv2d(y, 4, (1, 1), (1, 1), "SAME", activation=None))
    return net.build()


def _concatenation_net(h, w, channels, seed=0):
    net = CalibratedNet(seed)
    x = net.input((1, h, w, 3))
    xs = [net.conv2d(x, c, (1, 1), (1, 1), "SAME", activation=None, name=f"branch{i}")
          for i, c in enumerate(channels)]
    y = net.concatenation(xs, axis=3)
    net.output(net.conv2d(y, 4, (1, 1), (1, 1), "SAME", activation=None))
    return net.build()


def _needed_rows_columns(marked: list[np.ndarray], op, region) -> list[tuple[int, int, int, int] | None]:
    """Brute force: which rows and columns of each input the output region's elements are
    made of. `marked[i]` numbers input i's elements (H x W x C, ids unique over the inputs),
    `op` the operation on those arrays, -1 where the output is no input's element."""
    r0, r1, c0, c1 = region
    out = op(marked)[r0:r1, c0:c1]
    needed = []
    for m in marked:
        ys, xs, _ = np.nonzero(np.isin(m, out))
        needed.append((ys.min(), ys.max() + 1, xs.min(), xs.max() + 1) if len(ys) else None)
    return needed


def _propagated_rows_columns(pg, inputs: list[int], sliced: int, region) -> list[tuple[int, int, int, int] | None]:
    """The planner's answer: the union over the parts writing tensor `sliced` of the regions
    their propagators give of each of `inputs`, cropped to it."""
    r0, r1, c0, c1 = region
    found: dict[int, list[int]] = {}
    for p in pg.parts:
        if p.output != sliced:
            continue
        assert p.stripable, f"{p.name} writes a channel slice and must stripe"
        for t, prop in zip(p.inputs, p.propagators):
            box = prop.propagate(_core.Box([0, r0, c0, 0], [1, r1 - r0, c1 - c0, p.op.ofm.shape.c]))
            box = box.cropped(pg.tensors[t].shape)
            lo = [box.offset[1], box.offset[1] + box.extent[1], box.offset[2], box.offset[2] + box.extent[2]]
            have = found.setdefault(t, lo)
            found[t] = [min(have[0], lo[0]), max(have[1], lo[1]), min(have[2], lo[2]), max(have[3], lo[3])]
    return [tuple(found[t]) if t in found else None for t in inputs]


def _written_in_slices(pg) -> int:
    """The one tensor several parts write."""
    (t,) = {p.output for p in pg.parts if sum(q.output == p.output for q in pg.parts) > 1}
    return t


@st.composite
def region_of(draw, h, w):
    r0, c0 = draw(st.integers(0, h - 1)), draw(st.integers(0, w - 1))
    return r0, draw(st.integers(r0 + 1, h)), c0, draw(st.integers(c0 + 1, w))


@settings(max_examples=12, deadline=None)
@given(st.data())
def test_channel_pad_propagators_match_brute_force(data):
    h, w, c = data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9)), data.draw(st.integers(1, 20))
    before, after = data.draw(st.integers(0, 9)), data.draw(st.integers(1, 9))
    pg = _planner_graph(_channel_pad_net(h, w, c, before, after))
    padded = _written_in_slices(pg)
    assert list(pg.tensors[padded].shape) == [1, h, w, c + before + after] and pg.tensors[padded].cascadable
    # The copy reads the source; the border (a constant) no tensor.
    (source,) = [t for p in pg.parts if p.output == padded for t in p.inputs]
    region = data.draw(region_of(h, w))
    marked = [np.arange(h * w * c).reshape(h, w, c)]
    need = _needed_rows_columns(marked, lambda m: np.pad(m[0], [(0, 0), (0, 0), (before, after)],
                                                         constant_values=-1), region)
    assert _propagated_rows_columns(pg, [source], padded, region) == need


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_upscale_propagator_matches_brute_force(data):
    """A nearest-neighbour upscale by `factor`: output (y, x) is input (y // factor, x // factor)."""
    factor = data.draw(st.integers(1, 4))
    h, w, c = data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9)), data.draw(st.integers(1, 3))
    region = data.draw(region_of(h * factor, w * factor))
    marked = [np.arange(h * w * c).reshape(h, w, c)]
    need = _needed_rows_columns(marked, lambda m: m[0].repeat(factor, 0).repeat(factor, 1), region)
    r0, r1, c0, c1 = region
    box = _core.Propagator.upscale(factor).propagate(_core.Box([0, r0, c0, 0], [1, r1 - r0, c1 - c0, c]))
    box = box.cropped([1, h, w, c])
    assert [(box.offset[1], box.offset[1] + box.extent[1], box.offset[2], box.offset[2] + box.extent[2])] == need


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_broadcast_propagator_matches_brute_force(data):
    """An elementwise operand broadcast along any of H, W and C: each output element reads
    the operand's element at its own coordinates, 0 along the size-1 axes."""
    out = [data.draw(st.integers(1, 7)) for _ in range(3)]
    operand = [d if data.draw(st.booleans()) else 1 for d in out]
    marked = [np.arange(int(np.prod(operand))).reshape(operand)]
    region = data.draw(region_of(out[0], out[1]))
    need = _needed_rows_columns(marked, lambda m: np.broadcast_to(m[0], out), region)
    r0, r1, c0, c1 = region
    box = _core.Propagator.broadcast([1, *operand], [1, *out]).propagate(
        _core.Box([0, r0, c0, 0], [1, r1 - r0, c1 - c0, out[2]])).cropped([1, *operand])
    assert [(box.offset[1], box.offset[1] + box.extent[1], box.offset[2], box.offset[2] + box.extent[2])] == need


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_transposed_convolution_propagator_matches_brute_force(data):
    """TFLite's TRANSPOSE_CONV scatters input row y to output rows y * 2 - pad + fy (fy < K):
    the rows an output region needs are those, the propagator's as the lowering pads it."""
    from cascader.frontend.lower_transpose_conv import axis_padding, reference_padding

    h, w = data.draw(st.integers(1, 8)), data.draw(st.integers(1, 8))
    kh, kw = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    padding = data.draw(st.sampled_from(["SAME", "VALID"]))
    out = [2 * n if padding == "SAME" else 2 * (n - 1) + k for n, k in ((h, kh), (w, kw))]
    try:
        (top, _), (left, _) = axis_padding(h, out[0], 2, kh, padding), axis_padding(w, out[1], 2, kw, padding)
    except ValueError:
        return  # a shape the lowering refuses
    pads = [reference_padding(o, 2, k, padding) for o, k in zip(out, (kh, kw))]
    region = data.draw(region_of(*out))
    r0, r1, c0, c1 = region
    rows = [y for y in range(h) if any(r0 <= 2 * y - pads[0] + f < r1 for f in range(kh))]
    cols = [x for x in range(w) if any(c0 <= 2 * x - pads[1] + f < c1 for f in range(kw))]
    box = _core.Propagator.transposed(kh, kw, top, left, 3, 2).propagate(
        _core.Box([0, r0, c0, 0], [1, r1 - r0, c1 - c0, 5])).cropped([1, h, w, 3])
    got = (box.offset[1], box.offset[1] + box.extent[1], box.offset[2], box.offset[2] + box.extent[2])
    if not rows or not cols:
        assert box.extent[1] * box.extent[2] == 0
    else:
        assert got == (rows[0], rows[-1] + 1, cols[0], cols[-1] + 1)
    assert (box.offset[3], box.extent[3]) == (0, 3)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_transpose_propagator_matches_brute_force(data):
    """One output channel of a transpose (`channel_planes`): output (y, x, k) is source
    element (y, x, k) permuted; the box of source elements a region of channel k needs is the
    propagator's, and holds no element more (a transpose moves each element once)."""
    from cascader.planner import _transpose_propagator

    source = [data.draw(st.integers(1, 6)) for _ in range(3)]
    source_axis = tuple(data.draw(st.permutations([0, 1, 2])))
    marked = np.arange(int(np.prod(source))).reshape(source)
    out = np.transpose(marked, source_axis)
    h, w, c = out.shape
    r0, r1, c0, c1 = data.draw(region_of(h, w))
    channel = data.draw(st.integers(0, c - 1))
    needed = np.nonzero(np.isin(marked, out[r0:r1, c0:c1, channel]))
    want = [(int(a.min()), int(a.max()) + 1) for a in needed]
    prop = _transpose_propagator({"source_axis": source_axis, "channel": channel})
    box = prop.propagate(_core.Box([0, r0, c0, channel], [1, r1 - r0, c1 - c0, 1])).cropped([1, *source])
    assert [(box.offset[i], box.offset[i] + box.extent[i]) for i in (1, 2, 3)] == want
    assert box.extent[1] * box.extent[2] * box.extent[3] == (r1 - r0) * (c1 - c0)


def nchw_input(seed=0, size=48):
    """A PyTorch export's start: an NCHW image transposed to NHWC before the first convolution."""
    net = CalibratedNet(seed)
    x = net.transpose(net.input((1, 3, size, size)), (0, 2, 3, 1), name="to_nhwc")
    x = net.conv2d(x, 8, (3, 3), (1, 1), "SAME", activation="RELU")
    x = net.conv2d(x, 16, (3, 3), (2, 2), "SAME", activation="RELU")
    net.output(net.conv2d(x, 8, (3, 3), (2, 2), "SAME", activation=None))
    return net.build()


def test_a_transpose_is_a_striped_plane_per_output_channel():
    pg = _planner_graph(nchw_input(size=16), least_scratch=True)
    planes = [p for p in pg.parts if "TRANSPOSE" in p.name]
    assert len(planes) == 3 and all(p.stripable for p in planes)
    (source,) = {p.inputs[0] for p in planes}
    (transposed,) = {p.output for p in planes}
    # The input is read along other axes than its rows (whole); the output rolls.
    assert not pg.tensors[source].cascadable and pg.tensors[transposed].cascadable
    assert [p.op.ofm.shape.c for p in planes] == [1, 1, 1]


def test_the_default_lowering_transposes_in_vela_steps_faster_than_planes():
    """The planes run a whole 8-deep block per element (depth 1): on the estimator's yardstick
    (Vela's accounting, a transpose's pieces costed as one operation) the default lowering's
    steps through a scratch map are the faster; the least-scratch lowering takes the planes
    (`planes_in_least_scratch`), which cascade."""
    from cascader.compiler import _compile_within, _prepare
    from cascader.progress import progress

    model = nchw_input(size=48)
    default = [p.name for p in _planner_graph(model).parts if "TRANSPOSE" in p.name]
    assert default and not any("channel" in n for n in default)
    # On the Ethos-U85 the steps are not the default: its OFM transpose (one operation) where
    # that is faster, else the planes (`lower_ofm_transpose`).
    u85 = [op for s in lower(model, "ethos-u85-256")[1] for op in s.operations if "TRANSPOSE" in op.name]
    assert (len(u85) == 1 and u85[0].registers.get("ofm_transpose")) or (
        len(u85) == 3 and all("channel" in op.name for op in u85))
    for accelerator in ("ethos-u55-128", "ethos-u65-256"):
        steps = cascader.compile(model, accelerator=accelerator)
        assert steps.check(seeds=1).bit_exact
        bar = progress(total=4, enabled=False)
        planes = _compile_within(_prepare(model, accelerator, None, None, "performance", bar, least_scratch=True),
                                 None, "performance", bar, 0.0)
        assert steps.estimate().total_cycles < 0.9 * planes.estimate().total_cycles


def test_a_transposed_input_cascades_bit_exact_on_u65():
    model = nchw_input(seed=1, size=40)
    frontier = plan(model, accelerator="ethos-u65-256")
    least = frontier.resident  # the least SRAM with every feature map in SRAM
    assert least.least_scratch  # the planes cascade, Vela's steps through a scratch map do not
    names = [p.name for p in _planner_graph(model, least_scratch=True).parts]
    assert any(c.stripes > 1 and any("TRANSPOSE" in names[k] for k in range(c.first, c.last))
               for c in least.proposal.cascades)
    compiled = cascader.compile(model, sram=least.sram_bytes, accelerator="ethos-u65-256")
    assert compiled.sram_bytes <= least.sram_bytes and compiled.check(seeds=1).bit_exact


def hw_slice(seed=0, size=48, begin=(0, 2, 3, 0), end=(1, 46, 47, 16), kernel=(3, 3), stride=(1, 1), padding="VALID",
             step=(1, 1)):
    """A SLICE of rows, columns (and channels) read in place by a convolution (a
    STRIDED_SLICE: every step-th row and column)."""
    net = CalibratedNet(seed)
    x = net.conv2d(net.input((1, size, size, 3)), 16, (3, 3), (1, 1), "SAME", activation="RELU")
    if step == (1, 1):
        x = net.slice(x, begin, [e - b for b, e in zip(begin, end)])
    else:
        x = net.strided_slice(x, begin, end, (1, *step, 1))
    x = net.conv2d(x, 16, kernel, stride, padding, activation="RELU")
    net.output(net.conv2d(x, 8, (3, 3), (2, 2), "SAME", activation=None))
    return net.build()


@settings(max_examples=12, deadline=None)
@given(st.data())
def test_box_reader_propagator_matches_brute_force(data):
    """A convolution reading a box of its input in place: the source rows, columns and
    channels a region of its output reads are its windows' (in the box), moved by the box's
    origin."""
    size = 12
    step = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    y0, x0, c0 = data.draw(st.integers(0, 5)), data.draw(st.integers(0, 5)), data.draw(st.integers(0, 8))
    # At least 4 rows and columns of the box (a kernel of up to 3 fits).
    y1, x1 = data.draw(st.integers(y0 + 3 * step[0] + 1, size)), data.draw(st.integers(x0 + 3 * step[1] + 1, size))
    c1 = data.draw(st.integers(c0 + 1, 16))
    k = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    s = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    pg = _planner_graph(hw_slice(size=size, begin=(0, y0, x0, c0), end=(1, y1, x1, c1), kernel=k, stride=s, step=step))
    reader = pg.parts[1]
    # A box read every step-th row or column stays whole (no rolling buffer skips rows).
    assert reader.stripable and pg.tensors[reader.inputs[0]].cascadable == (step == (1, 1))
    out = pg.tensors[reader.output].shape
    r0, r1, q0, q1 = data.draw(region_of(out[1], out[2]))
    rows = {y0 + step[0] * (y * s[0] + f) for y in range(r0, r1) for f in range(k[0])}
    cols = {x0 + step[1] * (x * s[1] + f) for x in range(q0, q1) for f in range(k[1])}
    box = reader.propagators[0].propagate(_core.Box([0, r0, q0, 0], [1, r1 - r0, q1 - q0, out[3]]))
    box = box.cropped(pg.tensors[reader.inputs[0]].shape)
    got = [(box.offset[i], box.offset[i] + box.extent[i]) for i in (1, 2, 3)]
    assert got == [(min(rows), max(rows) + 1), (min(cols), max(cols) + 1), (c0, c1)]


def focus(seed=0, size=64):
    """YOLOv5's Focus: four STRIDED_SLICEs of every other row and column of the image,
    concatenated along the channels (space to depth), then convolutions."""
    net = CalibratedNet(seed)
    x = net.input((1, size, size, 3))
    parts = [net.strided_slice(x, (0, dy, dx, 0), (1, size, size, 3), (1, 2, 2, 1), name=f"focus{dy}{dx}")
             for dy, dx in ((0, 0), (1, 0), (0, 1), (1, 1))]
    y = net.conv2d(net.concatenation(parts, axis=3), 16, (3, 3), (1, 1), "SAME", activation="RELU")
    net.output(net.conv2d(y, 16, (3, 3), (2, 2), "SAME", activation=None))
    return net.build()


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
def test_strided_slices_read_in_place_cascade_bit_exact(accelerator):
    """The concatenation's copies read every other row and column of the input in place: they
    stripe (the input stays whole), and the concatenation rolls."""
    model = focus()
    frontier = plan(model, accelerator=accelerator)
    least = frontier.resident  # Dedicated_Sram: points[0] has its feature maps in DRAM
    names = [p.name for p in frontier.graph.parts]
    assert any(c.stripes > 1 and sum("QUANTIZE" in names[k] for k in range(c.first, c.last)) == 4
               for c in least.proposal.cascades)
    if accelerator == "ethos-u55-128":
        assert least.sram_bytes < 0.75 * 24576  # before: 24,576 B (the concatenation whole)
    for point in (least, frontier.points[len(frontier.points) // 2]):
        compiled = cascader.compile(model, sram=point.sram_bytes, accelerator=accelerator)
        assert compiled.sram_bytes <= point.sram_bytes and compiled.check(seeds=1).bit_exact


@settings(max_examples=12, deadline=None)
@given(st.data())
def test_box_reader_padding_matches_brute_force(data):
    """A SAME convolution reading a box inside its input: a stripe reads the rows and columns
    of the box its windows cover, and pads where they leave the box (not the tensor)."""
    size = 12
    y0, x0 = data.draw(st.integers(0, 5)), data.draw(st.integers(0, 5))
    y1, x1 = data.draw(st.integers(y0 + 3, size)), data.draw(st.integers(x0 + 3, size))
    k = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    s = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    pg = _planner_graph(hw_slice(size=size, begin=(0, y0, x0, 0), end=(1, y1, x1, 16), kernel=k, stride=s,
                                 padding="SAME"))
    reader = pg.parts[1]
    assert reader.stripable
    out = pg.tensors[reader.output].shape
    # TFLite's SAME: the padding before is half the total (rounded down).
    pads = [max((o - 1) * st_ + kk - n, 0) // 2 for o, st_, kk, n in zip(out[1:3], s, k, (y1 - y0, x1 - x0))]
    runs = _core.plan_cascade(pg, 1, 3, data.draw(st.integers(1, 3)), _arch(), column_bands=1).runs
    for part, (r0, r1, q0, q1), reads, padding, _ in (r.fields() for r in runs):
        if part != 1:
            continue
        rows = [y0 + y * s[0] - pads[0] + f for y in range(r0, r1) for f in range(k[0])]
        cols = [x0 + x * s[1] - pads[1] + f for x in range(q0, q1) for f in range(k[1])]
        inside = [r for r in rows if y0 <= r < y1], [c for c in cols if x0 <= c < x1]
        assert reads[0] == (min(inside[0]), max(inside[0]) + 1, min(inside[1]), max(inside[1]) + 1)
        assert padding == (min(inside[0]) - min(rows), min(inside[1]) - min(cols),
                           max(rows) - max(inside[0]), max(cols) - max(inside[1]))


def _arch():
    """The u55-128's architecture, as the planner takes it."""
    return _Target.of(schedule(*lower(as_model(hw_slice())), "ethos-u55-128",
                               "Ethos_U55_High_End_Embedded", "Shared_Sram")).arch


@pytest.mark.parametrize("kernel", [(1, 1), (3, 3), (4, 3)])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_transposed_convolution_stripes_are_bit_exact(kernel, padding):
    """A stride-2 TRANSPOSE_CONV inside a cascade (odd sizes, even and odd kernels): each
    stripe's zero rows before its first stored row are padding, and the binary at the least
    SRAM is bit-exact."""
    net = CalibratedNet(kernel[0] + len(padding))
    x = net.conv2d(net.input((1, 9, 7, 3)), 8, (3, 3), (1, 1), "SAME", activation="RELU")
    x = net.transpose_conv2d(x, 8, kernel, (2, 2), padding)
    net.output(net.conv2d(x, 8, (3, 3), (1, 1), "SAME", activation="RELU"))
    model = net.build()
    frontier = plan(model)
    names = [p.name for p in frontier.graph.parts]
    least = frontier.points[0]
    assert any(c.stripes > 1 and any("TRANSPOSE_CONV" in names[k] for k in range(c.first, c.last))
               for c in least.proposal.cascades)
    compiled = cascader.compile(model, sram=least.sram_bytes)
    assert compiled.sram_bytes <= least.sram_bytes and compiled.check(seeds=1).bit_exact


def upsampled(seed=0, h=5, w=4, c=3):
    """A convolution, a 2x bilinear resize (half-pixel centres) and another convolution."""
    net = CalibratedNet(seed)
    x = net.conv2d(net.input((1, h, w, 3)), c, (1, 1), (1, 1), "SAME", activation=None)
    net.output(net.conv2d(net.resize(x, "BILINEAR"), 4, (1, 1), (1, 1), "SAME", activation=None))
    return net.build()


@settings(max_examples=20, deadline=None)
@given(st.data())
def test_bilinear_sums_propagators_match_brute_force(data):
    """The least-scratch bilinear's parts (`lower_resize._blended_sums`): the pair sums read the
    input repeated twice through a 2x2 window (sum (y, x) reads upscaled rows y, y + 1: input
    rows y // 2 .. (y + 1) // 2), aligned to 2; the edge averages a 2x2 window padded by one."""
    h, w = data.draw(st.integers(1, 8)), data.draw(st.integers(1, 8))
    if (h, w) == (1, 1):
        return  # a 1x1 input is a broadcast
    pg = _planner_graph(upsampled(h=h, w=w), least_scratch=True)
    sums, averages = (next(p for p in pg.parts if tag in p.name) for tag in ("(pair sums)", "(edge averages)"))
    assert sums.stripable and averages.stripable and sums.alignment == 2
    assert pg.tensors[sums.output].cascadable and pg.tensors[averages.output].cascadable
    c = pg.tensors[sums.output].shape[3]
    marked = [np.arange(h * w * c).reshape(h, w, c)]
    upscaled = lambda m: m[0].repeat(2, 0).repeat(2, 1)  # noqa: E731
    windows = lambda m, k: np.stack([upscaled(m)[dy:2 * h - 1 + dy, dx:2 * w - 1 + dx]  # noqa: E731
                                     for dy in range(k) for dx in range(k)], axis=-1)
    region = data.draw(region_of(2 * h - 1, 2 * w - 1))
    need = _needed_rows_columns(marked, lambda m: windows(m, 2), region)
    r0, r1, c0, c1 = region
    box = sums.propagators[0].propagate(_core.Box([0, r0, c0, 0], [1, r1 - r0, c1 - c0, c])).cropped([1, h, w, c])
    assert [(box.offset[1], box.offset[1] + box.extent[1], box.offset[2], box.offset[2] + box.extent[2])] == need
    # The averages' output (y, x) reads sums [y - 1, y] x [x - 1, x], cropped.
    r0, r1, c0, c1 = data.draw(region_of(2 * h, 2 * w))
    box = averages.propagators[0].propagate(_core.Box([0, r0, c0, 0], [1, r1 - r0, c1 - c0, c]))
    box = box.cropped(pg.tensors[sums.output].shape)
    got = (box.offset[1], box.offset[1] + box.extent[1], box.offset[2], box.offset[2] + box.extent[2])
    assert got == (max(r0 - 1, 0), min(r1, 2 * h - 1), max(c0 - 1, 0), min(c1, 2 * w - 1))


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
@pytest.mark.parametrize("shape", [(9, 7, 24), (4, 32, 16)])
def test_every_point_through_a_bilinear_resize_is_bit_exact_within_its_sram(accelerator, shape):
    """3x3 convolutions either side of a 2x bilinear resize, odd sizes (9 x 7 -> 18 x 14) and a
    wide map (4 x 32 -> 8 x 64, whose least point splits the cascade into 4 column bands: the
    edge averages' inner stripes pad nothing and divide through their scale): the least point
    cascades through the least-scratch bilinear, and every frontier point compiles within its
    SRAM to a bit-exact binary."""
    h, w, c = shape
    net = CalibratedNet(3)
    x = net.conv2d(net.input((1, h, w, 3)), c, (3, 3), (1, 1), "SAME", activation="RELU")
    x = net.conv2d(net.resize(x, "BILINEAR"), 16, (3, 3), (1, 1), "SAME", activation="RELU")
    net.output(net.conv2d(x, 8, (3, 3), (1, 1), "SAME", activation=None))
    model = net.build()
    frontier = plan(model, accelerator=accelerator)
    least = frontier.resident  # Dedicated_Sram: points[0] has its feature maps in DRAM
    names = [p.name for p in _planner_graph(model, least_scratch=True).parts]
    crossing = [c for c in least.proposal.cascades
                if c.stripes > 1 and any("RESIZE_BILINEAR(edge averages)" in names[k] for k in range(c.first, c.last))]
    assert least.least_scratch and crossing
    assert w < 32 or any(c.column_bands > 1 for c in crossing)
    for point in frontier.points:
        compiled = cascader.compile(model, sram=point.sram_bytes, accelerator=accelerator)
        assert compiled.sram_bytes <= point.sram_bytes
        assert compiled.check(seeds=2).bit_exact, f"{point}"


def test_a_nearest_resize_is_an_upscale_part_aligned_to_its_factor():
    pg = _planner_graph(unet_skip(size=16, method="NEAREST"))
    (resize,) = [p for p in pg.parts if "RESIZE" in p.name]
    assert resize.stripable and resize.alignment == 2
    assert [(a.scale, a.divisor) for a in resize.propagators[0].axes] == [(1, 1), (1, 2), (1, 2), (1, 1)]


@settings(max_examples=12, deadline=None)
@given(st.data())
def test_concatenation_propagators_match_brute_force(data):
    h, w = data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9))
    channels = data.draw(st.lists(st.integers(1, 24), min_size=2, max_size=3))
    pg = _planner_graph(_concatenation_net(h, w, channels))
    # The concatenation's inputs as the planner sees them: the branches (or their requantized
    # copies) are plan tensors of their own, or written straight into the concatenation's buffer.
    cat = _written_in_slices(pg)
    assert list(pg.tensors[cat].shape) == [1, h, w, sum(channels)] and pg.tensors[cat].cascadable
    writers = [p for p in pg.parts if p.output == cat]
    assert len(writers) == len(channels)
    region = data.draw(region_of(h, w))
    sources = [p.inputs[0] for p in writers]
    sizes = [pg.tensors[t].shape[3] for t in sources]
    offsets = np.cumsum([0] + sizes)
    marked = [np.arange(h * w * s).reshape(h, w, s) + h * w * o for s, o in zip(sizes, offsets)]
    need = _needed_rows_columns(marked, lambda m: np.concatenate(m, axis=2), region)
    assert _propagated_rows_columns(pg, sources, cat, region) == need


def blaze_blocks(seed=0, size=64):
    """BlazeFace's BlazeBlocks: 5x5 depthwise and 1x1 projection, the shortcut's channels
    zero-padded to the block's output (24 -> 28 -> 32)."""
    net = CalibratedNet(seed)
    x = net.input((1, size, size, 3))
    x = net.conv2d(x, 24, (5, 5), (2, 2), "SAME", activation="RELU")
    for cout in (24, 28, 32):
        y = net.depthwise_conv2d(x, (5, 5), (1, 1), "SAME", activation=None)
        y = net.conv2d(y, cout, (1, 1), (1, 1), "SAME", activation=None)
        shortcut = x if cout == x.shape[3] else net.pad(x, [(0, 0), (0, 0), (0, 0), (0, cout - x.shape[3])])
        x = net.add(y, shortcut, activation="RELU")
    net.output(net.conv2d(x, 8, (3, 3), (2, 2), "SAME", activation=None))
    return net.build()


def unet_skip(seed=0, size=64, method="BILINEAR"):
    """A U-Net level: an encoder's full-resolution map concatenated with the upsampled bottleneck."""
    net = CalibratedNet(seed)
    x = net.input((1, size, size, 3))
    e1 = net.conv2d(x, 8, (3, 3), (1, 1), "SAME", activation="RELU")
    e2 = net.conv2d(e1, 16, (3, 3), (2, 2), "SAME", activation="RELU")
    b = net.conv2d(e2, 16, (3, 3), (1, 1), "SAME", activation="RELU")
    up = net.transpose_conv2d(b, 16, (3, 3), (2, 2), "SAME") if method == "TRANSPOSE_CONV" else net.resize(b, method)
    c = net.concatenation([up, e1], axis=3)
    d = net.conv2d(c, 8, (3, 3), (1, 1), "SAME", activation="RELU")
    net.output(net.conv2d(d, 2, (1, 1), (1, 1), "SAME", activation=None))
    return net.build()


def channel_split(seed=0, size=48):
    """SPLIT along the channels, each half read in place by its own branch (a ShuffleNet unit,
    a YOLOv8 C2f block), the branches concatenated again."""
    net = CalibratedNet(seed)
    x = net.conv2d(net.input((1, size, size, 3)), 32, (3, 3), (1, 1), "SAME", activation="RELU")
    a, b = net.split(x, 2, axis=3)
    b = net.depthwise_conv2d(b, (3, 3), (1, 1), "SAME", activation="RELU")
    b = net.conv2d(b, 16, (1, 1), (1, 1), "SAME", activation="RELU")
    y = net.concatenation([a, b], axis=3)
    net.output(net.conv2d(y, 8, (3, 3), (2, 2), "SAME", activation=None))
    return net.build()


def row_broadcast(seed=0, size=32):
    """A map plus its mean over each row (MEAN over W, broadcast back along W): the ADD's
    second operand is read one column wide by every stripe."""
    net = CalibratedNet(seed)
    x = net.conv2d(net.input((1, size, size, 3)), 8, (3, 3), (1, 1), "SAME", activation="RELU")
    y = net.add(net.conv2d(x, 8, (3, 3), (1, 1), "SAME", activation="RELU"), net.mean(x, (2,), True))
    net.output(net.conv2d(y, 8, (3, 3), (2, 2), "SAME", activation=None))
    return net.build()


# name: (model, the least SRAM before #44's cascades through it (None: it cascaded before), a
# part every least point's cascades hold)
PATTERNS = {
    "channel_pad": (blaze_blocks, 94208, "PAD(border)"),
    "concatenation": (unet_skip, 196608, "QUANTIZE"),
    "channel_split": (channel_split, 184320, "DEPTHWISE"),
    "nearest_upsampling": (lambda: unet_skip(method="NEAREST"), 196608, "RESIZE_NEAREST_NEIGHBOR"),
    # The least-scratch lowering's three operations (the default's copies and phases end cascades).
    "bilinear_upsampling": (unet_skip, 116800, "RESIZE_BILINEAR(edge averages)"),
    "row_broadcast": (row_broadcast, None, "ADD"),
    "transpose_conv_upsampling": (lambda: unet_skip(method="TRANSPOSE_CONV"), 147456, "TRANSPOSE_CONV"),
    "nchw_transpose": (nchw_input, 17280, "TRANSPOSE"),
    "hw_slice": (hw_slice, 65088, "2:CONV_2D"),
    "hw_and_channel_slice": (lambda: hw_slice(begin=(0, 3, 0, 2), end=(1, 40, 30, 14)), 52544, "2:CONV_2D"),
    "hw_slice_same_padding": (lambda: hw_slice(begin=(0, 5, 4, 0), end=(1, 48, 48, 16), padding="SAME"), 67136,
                              "2:CONV_2D"),
}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_new_cascades_compile_bit_exact_in_less_sram(name):
    build, before, crossed = PATTERNS[name]
    model = build()
    frontier = plan(model)
    least = frontier.points[0]
    assert before is None or least.sram_bytes < 0.7 * before
    # A least-scratch point's proposal is of that lowering's graph.
    graph = _planner_graph(model, least_scratch=True) if least.least_scratch else frontier.graph
    names = [p.name for p in graph.parts]
    assert any(c.stripes > 1 and any(crossed in names[k] for k in range(c.first, c.last))
               for c in least.proposal.cascades), "the least point does not cascade through the slices"
    for point in (least, frontier.points[len(frontier.points) // 2]):
        compiled = cascader.compile(model, sram=point.sram_bytes)
        assert compiled.sram_bytes <= point.sram_bytes
        result = compiled.check(seeds=1)
        assert result.bit_exact, f"{name} at {point.sram_bytes} B: {result}"


def squeeze_excite(seed=0, size=48):
    """A squeeze-and-excite block: the gate pools the whole map (MEAN), two 1x1 convolutions
    and a sigmoid make per-channel weights, a MUL applies them."""
    net = CalibratedNet(seed)
    x = net.conv2d(net.input((1, size, size, 3)), 16, (3, 3), (2, 2), "SAME", activation="RELU")
    y = net.depthwise_conv2d(x, (3, 3), (1, 1), "SAME", activation="RELU")
    g = net.conv2d(net.mean(y, (1, 2), True), 8, (1, 1), (1, 1), "SAME", activation="RELU")
    g = net.logistic(net.conv2d(g, 16, (1, 1), (1, 1), "SAME", activation=None))
    y = net.conv2d(net.mul(y, g), 16, (1, 1), (1, 1), "SAME", activation=None)
    net.output(net.conv2d(y, 16, (3, 3), (2, 2), "SAME", activation="RELU"))
    return net.build()


def test_a_global_reduction_ends_one_cascade_and_the_gate_continues_the_next():
    """The gate's MEAN needs its whole input: the cascade before it ends at that input (a whole
    buffer), the MEAN runs alone, and the MUL by the gate is striped in a cascade after it."""
    model = squeeze_excite()
    frontier = plan(model)
    names = [p.name for p in frontier.graph.parts]
    mean = next(k for k, n in enumerate(names) if "MEAN" in n)
    mul = next(k for k, n in enumerate(names) if n.endswith("MUL"))
    least = frontier.points[0]
    striped = [(c.first, c.last) for c in least.proposal.cascades if c.stripes > 1 and c.last - c.first > 1]
    assert not frontier.graph.parts[mean].stripable
    assert any(last == mean for _, last in striped), "no cascade ends at the pool's whole input"
    assert any(first <= mul < last and first > mean for first, last in striped), "the MUL is not striped after the pool"
    compiled = cascader.compile(model, sram=least.sram_bytes)
    assert compiled.sram_bytes <= least.sram_bytes
    assert compiled.check(seeds=1).bit_exact
