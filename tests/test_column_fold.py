"""A convolution reading its input's columns in groups as channels (`frontend.column_fold`):
bit-exact against the reference interpreter on two seeds on ethos-u55-128, ethos-u65-256 and
ethos-u85-256,
at the edges of the rewrite (strides 2 and 3 with groups of 2 and 3, a kernel one group wide; SAME padding whose
first window starts inside a group; VALID; kernels narrower and wider than a group; 1, 2 and 3
input channels; a dilation along H; an int16 input; a depthwise with a channel multiplier,
which lowers as a convolution), applied only where the cycle model says it is faster, and left
out where the input is no whole map only that convolution reads.
"""

from __future__ import annotations

import pytest

import cascader
from cascader import zoo
from cascader._zoo_layers import CalibratedNet
from cascader.frontend import column_fold
from cascader.lowering import lower
from cascader.schedule import operation_cycles

pytest.importorskip("ai_edge_litert")
from conftest import compile_exact  # noqa: E402

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")
EXACT_ON = (*ACCELERATORS, "ethos-u85-256")


def _folded(model, accelerator) -> list:
    """The folded convolutions of the model's lowering."""
    _, segments = lower(model, accelerator)
    return [op for seg in segments for op in seg.operations if "columns in groups" in op.name]


@pytest.fixture
def always_fold(monkeypatch):
    """Fold wherever the rewrite applies, whatever the cycle model says: the arithmetic is
    checked on shapes the model would leave unfolded too."""
    monkeypatch.setattr(column_fold, "placement_cycles",
                        lambda lw, op: (0.0, 0.0) if "columns in groups" in op.name else (1.0, 1.0))


def _single_conv(shape, filters, kernel, stride, padding="SAME", dilation=(1, 1), dtype="int8", depthwise=0):
    net = CalibratedNet(7)
    x = net.input(shape, dtype=dtype)
    if depthwise:
        y = net.depthwise_conv2d(x, kernel, stride, padding=padding, depth_multiplier=depthwise, activation=None)
    else:
        y = net.conv2d(x, filters, kernel, stride, padding=padding, dilation=dilation, activation=None)
    net.output(y)
    return net.build()


@pytest.mark.parametrize("accelerator", EXACT_ON)
@pytest.mark.parametrize("name", ["ds_cnn_kws", "kws_mean"])
def test_ds_cnn_first_convolution_folds_exactly(tmp_path, accelerator, name):
    # DS-CNN's 10x4 stride-2 convolution over 49 x 10 x 1: a 10x3 one over 49 x 5 x 2 column pairs.
    model = zoo.get(name)
    folded = _folded(model, accelerator)
    assert [(op.ifm.shape, op.registers["kernel"]["width"], op.registers["kernel"]["stride"]) for op in folded] == [
        ((49, 5, 2), 3, (2, 1))]
    compile_exact(tmp_path, model, accelerator)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_folded_only_where_faster(accelerator):
    # The rewrite keeps the faster form on the cycle model, the input in the arena and staged.
    model = zoo.get("ds_cnn_kws")
    _, segments = lower(model, accelerator)
    seg = segments[0]
    op = next(o for o in seg.operations if "columns in groups" in o.name)
    visible = {seg.aliases.get(t, t) for t in (*seg.ifms, *seg.ofms)}
    unfolded = _unfolded(model, accelerator)
    for cpu_visible in (visible, set()):
        folded_cycles = operation_cycles(accelerator, cpu_visible, [op], weights=True)
        plain_cycles = operation_cycles(accelerator, cpu_visible, [unfolded], weights=True)
        assert folded_cycles < plain_cycles
    # The compiled binary is faster too (U55-128: 121k -> 116k cycles at Vela's Size SRAM).
    faster = cascader.compile(model, accelerator=accelerator).estimate().total_cycles
    slower = _compiled_unfolded(model, accelerator).estimate().total_cycles
    assert faster < slower


def _unfolded(model, accelerator):
    """The first convolution as the lowering makes it without the fold."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(column_fold, "fold_columns", lambda lw: None)
        mp.setattr("cascader.frontend.lower.fold_columns", lambda lw: None)
        _, segments = lower(model, accelerator)
    return segments[0].operations[0]


def _compiled_unfolded(model, accelerator):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("cascader.frontend.lower.fold_columns", lambda lw: None)
        return cascader.compile(model, accelerator=accelerator)


def test_not_folded_where_slower():
    # A 3-channel 96 x 96 image read from DRAM on U65-256: the folded convolution's 6-channel
    # pixels come in shorter bursts (43,374 -> 45,876 cycles in place): left as it is.
    model = _single_conv((1, 96, 96, 3), 8, (3, 3), (2, 2))
    assert not _folded(model, "ethos-u65-256")


EDGES = {
    # name: (input shape, filters, kernel, stride, padding, dilation, dtype, depthwise multiplier)
    "pairs_same_odd_start": ((1, 49, 10, 1), 16, (10, 4), (2, 2), "SAME", (1, 1), "int8", 0),
    "pairs_valid": ((1, 12, 16, 3), 8, (3, 3), (2, 2), "VALID", (1, 1), "int8", 0),
    "pairs_kernel_1": ((1, 8, 8, 1), 8, (1, 1), (2, 2), "VALID", (1, 1), "int8", 0),
    "pairs_kernel_wider": ((1, 9, 20, 2), 8, (3, 7), (1, 2), "SAME", (1, 1), "int8", 0),
    "triples_stride_3": ((1, 9, 18, 1), 8, (3, 5), (3, 3), "SAME", (1, 1), "int8", 0),
    "kernel_a_group": ((1, 10, 12, 2), 8, (3, 2), (3, 2), "VALID", (1, 1), "int8", 0),
    "dilated_h": ((1, 12, 12, 1), 8, (3, 3), (1, 2), "SAME", (2, 1), "int8", 0),
    "int16": ((1, 10, 12, 1), 8, (3, 3), (2, 2), "SAME", (1, 1), "int16", 0),
    "depth_multiplier": ((1, 16, 16, 1), 8, (3, 3), (2, 2), "SAME", (1, 1), "int8", 8),
}


@pytest.mark.parametrize("accelerator", EXACT_ON)
@pytest.mark.parametrize("edge", list(EDGES))
def test_edges_bitcompile_exact(tmp_path, always_fold, accelerator, edge):
    shape, filters, kernel, stride, padding, dilation, dtype, multiplier = EDGES[edge]
    model = _single_conv(shape, filters, kernel, stride, padding, dilation, dtype, multiplier)
    folded = _folded(model, accelerator)
    assert len(folded) == 1
    op = folded[0]
    assert op.ifm.shape[1] * op.ifm.shape[2] == shape[2] * shape[3]
    compile_exact(tmp_path, model, accelerator)


def test_width_not_a_multiple_is_not_folded(always_fold):
    # 11 columns do not group in pairs: a row of the map is no whole number of groups.
    model = _single_conv((1, 9, 11, 1), 8, (3, 3), (2, 2))
    assert not _folded(model, "ethos-u55-128")


def test_input_read_twice_is_not_folded(always_fold):
    # Two convolutions read the input: one shape of the buffer must serve both.
    net = CalibratedNet(3)
    x = net.input((1, 10, 10, 1))
    a = net.conv2d(x, 8, (3, 3), (2, 2), activation=None, name="a")
    b = net.conv2d(x, 8, (3, 3), (2, 2), activation=None, name="b")
    net.output(net.add(a, b))
    assert not _folded(net.build(), "ethos-u55-128")


def test_computed_input_is_not_folded(always_fold):
    # A map an NPU operation writes (a cascade could produce it in rows of its own shape).
    net = CalibratedNet(4)
    x = net.input((1, 10, 10, 1))
    y = net.conv2d(x, 1, (1, 1), (1, 1), activation=None, name="a")
    net.output(net.conv2d(y, 8, (3, 3), (2, 2), activation=None, name="b"))
    folded = _folded(net.build(), "ethos-u55-128")
    assert [op.ifm.shape for op in folded] == []
