"""Data movement on the NPU: slices as in-place views or raw copies, transposes.

Every model is checked bit-exact against the reference interpreter; the operation counts show
which path was taken (a slice that only NPU operations read costs no operation at all).
"""

from __future__ import annotations

import numpy as np
import pytest

import cascader
from cascader.tflite.builder import ModelBuilder, quantization
from conftest import compile_on_npu

pytest.importorskip("ai_edge_litert")
from cascader.bench.simulate import validate  # noqa: E402

Q = quantization(0.05, 3)
Q2 = quantization(0.07, -5)


def _check(tmp_path, model, operations=None, accelerator="ethos-u55-128"):
    path, compiled = compile_on_npu(tmp_path, model, accelerator, operations, "movement")
    result = validate(path, compiled.model, (0, 1))
    assert result.bit_exact, result.details
    return compiled


def _slice_pair_add(opcode: str, in_shape, outs, options, params) -> cascader.Model:
    """input -> opcode (two outputs or two single-output slices) -> ADD of the two -> output."""
    b = ModelBuilder()
    x = b.add_input("x", in_shape, "int8", Q)
    consts = [b.add_constant(f"p{i}", np.asarray(p, np.int32)) for i, p in enumerate(params)]
    if opcode in ("STRIDED_SLICE", "SLICE"):
        parts = []
        for k, (shape, ps) in enumerate(outs):
            t = b.add_tensor(f"s{k}", shape, "int8", Q)
            cs = [b.add_constant(f"p{k}_{i}", np.asarray(p, np.int32)) for i, p in enumerate(ps)]
            b.add_operator(opcode, [x, *cs], [t], options, version=2)
            parts.append(t)
    else:
        parts = [b.add_tensor(f"s{k}", shape, "int8", Q) for k, shape in enumerate(outs)]
        inputs = [consts[0], x] if opcode == "SPLIT" else [x, *consts]
        b.add_operator(opcode, inputs, parts, options, version=2)
    y = b.add_tensor("y", b.tensors[parts[0]].shape, "int8", Q2)
    b.add_operator("ADD", parts, [y], {"fused_activation_function": "NONE"}, version=2)
    b.mark_output(y)
    return b.build()


def test_channel_halves_are_views(tmp_path):
    # YOLOv8's C2f split: both halves read in place by the ADD; one NPU operation in all.
    begin_mask, end_mask = 7, 7
    model = _slice_pair_add("STRIDED_SLICE", (1, 12, 12, 32), [
        ((1, 12, 12, 16), ([0, 0, 0, 0], [0, 0, 0, 16], [1, 1, 1, 1])),
        ((1, 12, 12, 16), ([0, 0, 0, 16], [0, 0, 0, 32], [1, 1, 1, 1])),
    ], {"begin_mask": begin_mask, "end_mask": end_mask}, [])
    _check(tmp_path, model, operations=1)


def test_strided_rows_and_columns(tmp_path):
    model = _slice_pair_add("STRIDED_SLICE", (1, 9, 10, 8), [
        ((1, 4, 5, 8), ([0, 1, 0, 0], [1, 9, 10, 8], [1, 2, 2, 1])),
        ((1, 4, 5, 8), ([0, 0, 1, 0], [1, 8, 10, 8], [1, 2, 2, 1])),
    ], {}, [])
    _check(tmp_path, model, operations=1)


def test_slice_split_split_v_unpack(tmp_path):
    cases = [
        _slice_pair_add("SLICE", (1, 6, 7, 10), [((1, 3, 7, 4), ([0, 0, 0, 0], [1, 3, 7, 4])),
                                                  ((1, 3, 7, 4), ([0, 3, 0, 5], [1, 3, -1, 4]))], {}, []),
        _slice_pair_add("SPLIT", (1, 6, 8, 10), [(1, 6, 4, 10), (1, 6, 4, 10)], {"num_splits": 2}, [[2]]),
        _slice_pair_add("SPLIT_V", (1, 6, 8, 10), [(1, 6, 8, 5), (1, 6, 8, 5)], {"num_splits": 2}, [[5, -1], [3]]),
        _slice_pair_add("UNPACK", (1, 2, 12, 32), [(1, 12, 32), (1, 12, 32)], {"num": 2, "axis": 1}, []),
    ]
    for model in cases:
        _check(tmp_path, model, operations=1)


def test_slice_that_is_a_model_output_is_copied(tmp_path):
    b = ModelBuilder()
    x = b.add_input("x", (1, 5, 6, 20), "int8", Q)
    y = b.add_tensor("y", (1, 5, 6, 7), "int8", Q)
    begin, size = b.add_constant("b", np.array([0, 0, 0, 3], np.int32)), b.add_constant("s", np.array([1, 5, 6, 7], np.int32))
    b.add_operator("SLICE", [x, begin, size], [y], version=2)
    b.mark_output(y)
    _check(tmp_path, b.build(), operations=1)


@pytest.mark.parametrize("in_shape, perm", [
    ((1, 4, 16, 40), [0, 2, 1, 3]),   # H <-> W, the channels stay innermost: one copy
    ((1, 6, 6, 65), [0, 3, 1, 2]),    # YOLOv8's NHWC -> NCHW: depth-1 planes
    ((1, 16, 4, 24), [0, 2, 3, 1]),
    ((1, 3, 9, 11), [0, 2, 3, 1]),    # NCHW -> NHWC: a depth-1 (H x W) plane per output channel
    ((1, 5, 7, 3), [0, 1, 3, 2]),
    ((1, 5, 6, 9), [0, 3, 2, 1]),     # H <-> C: one (H x C) plane per column
    ((4, 30, 9), [0, 2, 1]),
    ((3, 5, 7), [2, 0, 1]),           # two steps: H <-> C, then W <-> C
    ((3, 5, 7), [1, 2, 0]),           # two steps: H <-> W, then W <-> C
    ((12, 20), [1, 0]),
])
@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
def test_transpose(tmp_path, in_shape, perm, accelerator):
    b = ModelBuilder()
    x = b.add_input("x", in_shape, "int8", Q)
    y = b.add_tensor("y", [in_shape[p] for p in perm], "int8", Q)
    b.add_operator("TRANSPOSE", [x, b.add_constant("perm", np.array(perm, np.int32))], [y], version=2)
    z = b.add_tensor("z", b.tensors[y].shape, "int8", Q2)
    b.add_operator("ADD", [y, y], [z], {"fused_activation_function": "NONE"}, version=2)
    b.mark_output(z)
    _check(tmp_path, b.build(), accelerator=accelerator)


@pytest.mark.parametrize("shape, axis, count", [((1, 17), 2, 2), ((1, 17), 1, 3), ((2, 3), 0, 4)])
def test_pack(tmp_path, shape, axis, count):
    b = ModelBuilder()
    inputs = [b.add_input(f"x{k}", shape, "int8", Q) for k in range(count)]
    out_shape = list(shape)
    out_shape.insert(axis, count)
    y = b.add_tensor("y", out_shape, "int8", Q)
    b.add_operator("PACK", inputs, [y], {"axis": axis, "values_count": count}, version=2)
    z = b.add_tensor("z", out_shape, "int8", Q2)
    b.add_operator("ADD", [y, y], [z], {"fused_activation_function": "NONE"}, version=2)
    b.mark_output(z)
    _check(tmp_path, b.build(), operations=count + 1)  # a copy per input, then the ADD


@pytest.mark.parametrize("begin, end, strides, pads, conv_first", [
    ((0, 3, 18, 23), (1, 12, 19, 24), (1, 2, 2, 1), ((0, 0), (2, 0), (0, 2), (0, 0)), False),
    ((0, 3, 0, 0), (1, 12, 19, 24), (1, 1, 1, 1), ((0, 0), (2, 0), (0, 2), (0, 0)), True),
    ((0, 0, 0, 4), (1, 22, 19, 20), (1, 1, 1, 1), ((0, 0), (0, 0), (0, 0), (0, 0)), True),
])
def test_a_pad_of_a_slice_read_in_place(tmp_path, begin, end, strides, pads, conv_first):
    """A PAD whose input is a slice viewed in place (an offset into the sliced tensor) writes
    its interior at its own output's offset. It took the slice's offset instead: 60-78% of the
    outputs wrong, or an OFM beyond the arena (found by random networks)."""
    from cascader._zoo_layers import CalibratedNet

    net = CalibratedNet(1)
    x = net.input((1, 22, 19, 24))
    if conv_first:
        x = net.conv2d(x, 24, (1, 1))
    net.output(net.pad(net.strided_slice(x, begin, end, strides), pads))
    _check(tmp_path, net.build())
